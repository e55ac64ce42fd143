//! The fast path: a canonical-format record (`type` tool_call / tool_result at the top level)
//! read straight from its bytes. Only the fields pairing needs are decoded; `arguments`/`content`
//! and the record itself (the event's `raw`) are spliced into the output as they are.
//!
//! Every check here mirrors stream_pairer/core/formats (canonical.py, common.py) for the inputs it
//! accepts; an input it is not sure about returns `Err(reason)` and the caller hands the record
//! to the Python format layer (which also produces every dead letter and its wording).

use crate::event::Event;
use crate::fields::{as_id, as_name, conversation_id, get, record_ts, scalar, FormatCfg, Part};
use crate::scan::{self, Member};

/// Reads one record: a top-level canonical event here, the wrapped message shapes in
/// messages.rs. `Ok(events)` (never empty), or `Err(reason)` to hand the record to Python.
pub fn parse(
    raw: &[u8],
    source: &[u8],
    key: Option<&str>,
    cfg: &FormatCfg,
) -> Result<Vec<Event>, &'static str> {
    if raw.len() > cfg.max_record_bytes {
        return Err("too_large");
    }
    // simdutf8, not std: nearly every record carries non-ASCII text, where std's check goes byte
    // by byte (it was ~9 % of a record's time in perf; simdutf8 checks 32 bytes at once).
    if simdutf8::basic::from_utf8(raw).is_err() {
        return Err("not_utf8");
    }
    let is_ws = |c: &u8| matches!(c, b' ' | b'\t' | b'\n' | b'\r');
    let start = raw.iter().position(|c| !is_ws(c)).ok_or("empty")?;
    if raw[start] != b'{' {
        return Err("not_an_object");
    }
    let mut m: Vec<Member> = Vec::with_capacity(16);
    // The index lives while this record is read (nested readers step over containers with it).
    let (end, _index) = scan::value_indexed(raw, start, Some(&mut m));
    let end = end.ok_or("not_canonical")?;
    if !raw[end..].iter().all(is_ws) {
        return Err("not_canonical");
    }
    let is_call = match get(&m, b"type").map(|t| &raw[t.start..t.end]) {
        Some(b"\"tool_call\"") => true,
        Some(b"\"tool_result\"") => false,
        Some(
            b"\"function_call\""
            | b"\"function_call_output\""
            | b"\"custom_tool_call\""
            | b"\"custom_tool_call_output\"",
        ) => return crate::messages::responses_item(raw, &m, (start, end), source, key, cfg),
        // A wrapped message (`message` an object) or a record without one (envelope.rs).
        _ if get(&m, b"message").is_some_and(|x| raw[x.start] == b'{') => {
            return crate::messages::parse(raw, &m, source, key, cfg)
        }
        _ => return crate::envelope::parse(raw, &m, source, key, cfg),
    };
    if get(&m, b"message").is_some() {
        return Err("other_format"); // its timestamp may come from the message: left to Python
    }
    let conversation_id = conversation_id(raw, &m, cfg, key)?;
    let ts_ms = record_ts(raw, &m)?;
    // On a result `call_id` wins over `id` (canonical.py says why); on a call `id` wins.
    let (first, second): (&[u8], &[u8]) = if is_call {
        (b"id", b"call_id")
    } else {
        (b"call_id", b"id")
    };
    let id_mem = match get(&m, first) {
        Some(x) if raw[x.start] != b'n' => Some(x),
        _ => get(&m, second),
    };
    let id = as_id(scalar(raw, id_mem))?;
    let name = as_name(scalar(raw, get(&m, b"name")), is_call)?;
    let is_error: &[u8] = if is_call {
        b""
    } else {
        match get(&m, b"is_error").map(|x| &raw[x.start..x.end]) {
            None | Some(b"null") => b"null",
            Some(b"true") => b"true",
            Some(b"false") => b"false",
            _ => return Err("field_type"),
        }
    };
    let payload: &[u8] = match get(&m, if is_call { b"arguments" } else { b"content" }) {
        Some(x) => &raw[x.start..x.end],
        None => b"null",
    };
    let part = Part {
        is_call,
        id,
        name,
        payload: payload.into(),
        is_error,
        block: &raw[start..end],
        format: b"canonical",
    };
    Ok(vec![part.event(
        conversation_id,
        ts_ms,
        source,
        0,
        raw.len().max(1),
    )])
}
