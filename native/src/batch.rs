//! File mode's batch entry point: a block of whole JSONL lines in, the encoded outputs per output
//! file and the counts out (issue 23, item 4).
//!
//! Why: fed one record at a time, `pair` spent as much CPU in the Python loop around the core
//! (a source dict per line, a call per line, a list of outputs per call, a write per output) as
//! in the core itself. Here the reader hands over a block of complete lines cut from one read
//! (adapters/files.py `split_blocks`), and gets back three byte strings ready to append to
//! pairs.jsonl, orphans.jsonl and dead_letter.jsonl, with the record bytes by kind.
//!
//! Each line is read exactly as `adapters/files.py::_line` reads it (a trailing CR dropped, a
//! blank line skipped), and fed through `Core::feed`, so the records, counts and observer calls
//! are the per-record path's. Two cases go back to Python before the line is touched or right
//! after it: a line over the record size limit (the reader's `Oversize`: a dead letter Python
//! words), and a record that announced a session id (Codex `session_meta`), which renames the
//! conversation of the file's later records.

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};

use crate::vocab::record_kind;
use crate::Core;

/// Where an encoded output record's kind starts: every record begins `{"kind":"`.
const KIND_AT: usize = 9;

/// How a block ended: every line read, or stopped at a line Python has to see.
const DONE: u8 = 0;
const OVERSIZE: u8 = 1;
const SESSION: u8 = 2;

/// Output kinds, in the order of the byte counts returned: pair, orphan_call, orphan_result,
/// dead_letter (the vocabulary's `record_kind::ALL`). The files: pairs (0), orphans (1, 2), dead
/// letters (3). A record's kind is read from its prefix, the kind's name and its closing quote.
pub(crate) fn kind_index(rec: &[u8]) -> usize {
    let k = rec.get(KIND_AT..).unwrap_or_default();
    record_kind::ALL
        .iter()
        .position(|kind| k.starts_with(kind.as_bytes()) && k.get(kind.len()) == Some(&b'"'))
        .unwrap_or(3)
}

/// Python's `bytes.strip()` whitespace: what makes a line blank.
pub(crate) fn is_blank(line: &[u8]) -> bool {
    line.iter()
        .all(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c))
}

/// What one block gave: (pairs, orphans, dead letters) as bytes to append to their files,
/// record bytes by kind, bytes of the block consumed, the number of the last line consumed,
/// input bytes of the records fed, records fed, and how the block ended (0 every line read; 1
/// stopped before a line over the size limit; 2 stopped after a record announcing a session id).
type BlockResult<'py> = (
    Bound<'py, PyBytes>,
    Bound<'py, PyBytes>,
    Bound<'py, PyBytes>,
    [u64; 4],
    usize,
    u64,
    u64,
    u64,
    u8,
);

/// Feeds the complete lines of `block` (each ending in a newline; `lineno` is the number of the
/// line before the first) with source `{"file": label, "line": n}` and conversation fallback
/// `key`. `limit` is the record size limit (-1: none); `watch_session`: stop after a record that
/// announced a session id (file mode without --conversation-id).
#[pyfunction]
#[pyo3(signature = (core, block, label, lineno, key, limit, watch_session))]
#[allow(clippy::too_many_arguments)]
pub fn feed_block<'py>(
    core: &Bound<'py, Core>,
    block: &[u8],
    label: &Bound<'py, PyAny>,
    lineno: u64,
    key: &str,
    limit: i64,
    watch_session: bool,
) -> PyResult<BlockResult<'py>> {
    let py = core.py();
    let mut files: [Vec<u8>; 3] = [Vec::new(), Vec::new(), Vec::new()];
    let mut sizes = [0u64; 4];
    let (mut at, mut line_no, mut input_bytes, mut fed) = (0usize, lineno, 0u64, 0u64);
    let mut status = DONE;
    let file_key = intern!(py, "file");
    let line_key = intern!(py, "line");
    while at < block.len() {
        let Some(nl) = block[at..].iter().position(|&b| b == b'\n') else {
            break; // the reader hands over whole lines only; a tail without one is not read
        };
        let line = &block[at..at + nl];
        let body = line.strip_suffix(b"\r").unwrap_or(line);
        if limit >= 0 && body.len() as i64 > limit {
            status = OVERSIZE;
            break;
        }
        at += nl + 1;
        line_no += 1;
        if is_blank(body) {
            continue;
        }
        let source = PyDict::new(py);
        source.set_item(file_key, label)?;
        source.set_item(line_key, line_no)?;
        let out = Core::feed(core, body, source.as_any(), Some(key), None, None, None)?;
        input_bytes += body.len() as u64;
        fed += 1;
        for item in out.downcast::<PyList>()?.iter() {
            let rec = item.downcast::<PyBytes>()?.as_bytes();
            let kind = kind_index(rec);
            sizes[kind] += rec.len() as u64;
            let file = &mut files[if kind == 0 {
                0
            } else if kind == 3 {
                2
            } else {
                1
            }];
            file.extend_from_slice(rec);
            file.push(b'\n');
        }
        if watch_session && core.borrow().info_dirty {
            let info = core.borrow().info.as_ref().map(|i| i.clone_ref(py));
            if let Some(info) = info {
                if !info.bind(py).getattr(intern!(py, "session_id"))?.is_none() {
                    status = SESSION;
                    break;
                }
            }
        }
    }
    Ok((
        PyBytes::new(py, &files[0]),
        PyBytes::new(py, &files[1]),
        PyBytes::new(py, &files[2]),
        sizes,
        at,
        line_no,
        input_bytes,
        fed,
        status,
    ))
}

/// The sidecar's batch entry point: the consumed messages of one partition fetch (objects with
/// `offset`, `key`, `value`, `timestamp`: aiokafka's ConsumerRecord), each fed as the partition's
/// record path feeds it (source `{"topic", "partition", "offset"}`, the key as the conversation
/// fallback, decoded as UTF-8 with replacement, the timestamp as arrival time, a tombstone as
/// empty bytes). Returns `(routed output, the message's key)` for every output, in order: the
/// partition routes them (a dead letter is keyed by its input's key). Routed pipelines only; the
/// caller leaves out messages already processed, replays and lineage headers.
#[pyfunction]
pub fn feed_messages<'py>(
    core: &Bound<'py, Core>,
    msgs: &Bound<'py, PyList>,
    topic: &Bound<'py, PyAny>,
    partition: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyList>> {
    let py = core.py();
    let out = PyList::empty(py);
    let (k_topic, k_partition, k_offset) = (
        intern!(py, "topic"),
        intern!(py, "partition"),
        intern!(py, "offset"),
    );
    for msg in msgs.iter() {
        let value = msg.getattr(intern!(py, "value"))?;
        let key = msg.getattr(intern!(py, "key"))?;
        let arrival: f64 = msg.getattr(intern!(py, "timestamp"))?.extract()?;
        let raw: &[u8] = if value.is_none() {
            b""
        } else {
            value.downcast::<PyBytes>()?.as_bytes()
        };
        let source = PyDict::new(py);
        source.set_item(k_topic, topic)?;
        source.set_item(k_partition, partition)?;
        source.set_item(k_offset, msg.getattr(k_offset)?)?;
        let conv: Option<String> = if key.is_none() {
            None
        } else {
            match std::str::from_utf8(key.downcast::<PyBytes>()?.as_bytes()) {
                Ok(s) => Some(s.to_owned()),
                // Python's own replacement rule, as `decode_key` applies it
                Err(_) => Some(
                    key.call_method1("decode", ("utf-8", "replace"))?
                        .extract()?,
                ),
            }
        };
        let recs = Core::feed(
            core,
            raw,
            source.as_any(),
            conv.as_deref(),
            Some(arrival),
            None,
            None,
        )?;
        for rec in recs.downcast::<PyList>()?.iter() {
            out.append((rec, &key))?;
        }
    }
    Ok(out)
}

/// The batch entry points, added to the extension module (lib.rs).
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(feed_block, m)?)?;
    m.add_function(wrap_pyfunction!(feed_messages, m)?)?;
    Ok(())
}
