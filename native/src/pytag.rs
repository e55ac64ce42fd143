//! What the tagger learns from one event alone, worked out when the event is read (before the
//! engine sees it): the identity of a call's (tool, arguments), the points its arguments give,
//! and a result's verdict. Two rare steps call back into Python (`TagHooks`), so that their
//! wording is the Python tagger's own: decoding arguments given as a JSON string that is not an
//! object (orjson's error message is part of `failure_detail`), and the `--tool-schemas` check
//! (the ToolSchemaRegistry and its jsonschema-rs validators; only when schemas are configured).

use std::hash::{BuildHasher, Hasher};

use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::event::Event;
use crate::fields::get;
use crate::scan;
use crate::tagging::{point_index, EventTag};
use crate::text::py_strip;
use crate::verdict::{classify_result, classify_text, cut, first_line, input_rejection, Verdict};
use crate::vocab::failure_point::{ARGUMENT_CONSTRUCTION, EXECUTION, RESULT_INTERPRETATION};
use crate::vocab::outcome::{EMPTY, ERROR, OK};
use crate::vocab::{FREEFORM_CALL_TYPES, REJECTION_CHARS};

/// The Python side of tagging: `decode_arguments(text) -> (bytes | None, str | None)` and, when
/// schemas are configured, `schema_check(name, args_json | None) -> list[(point, detail)]`.
pub struct TagHooks {
    pub decode_arguments: PyObject,
    pub schema_check: Option<PyObject>,
    /// The hash of (tool, arguments) for the repeat check: keyed per core with a random seed, as
    /// Python's `hash()` is per process (the hash only has to tell argument sets apart inside
    /// this core and the runs that continue it: `pair --state` carries the seed with the hashes,
    /// engine/carry.rs, and nothing else ever compares them). foldhash's quality variant,
    /// not SipHash: SipHash was ~40 % of hashing a call's arguments (perf). Like the Python
    /// tagger's, it is not built to resist crafted collisions; the random key keeps a collision
    /// from being written into a log ahead of time, and the worst a collision does is tag one
    /// call as a repeat.
    pub hasher: HashState,
}

/// See `TagHooks::hasher`: foldhash's quality hash under a random 64-bit seed that can be read
/// and set again, so a state carried to the next run (`pair --state`) keeps its remembered
/// (tool, arguments) hashes comparable with the new run's.
#[derive(Clone)]
pub struct HashState {
    seed: u64,
    inner: foldhash::quality::SeedableRandomState,
}

impl Default for HashState {
    /// A random seed: a randomly keyed hasher's hash of 0 (foldhash keys it per process and per
    /// hasher), so a fresh core's keys cannot be known ahead of time.
    fn default() -> Self {
        Self::with_seed(foldhash::quality::RandomState::default().hash_one(0u64))
    }
}

impl HashState {
    pub fn with_seed(seed: u64) -> Self {
        HashState {
            seed,
            inner: foldhash::quality::SeedableRandomState::with_seed(
                seed,
                foldhash::SharedSeed::global_fixed(),
            ),
        }
    }
    pub fn seed(&self) -> u64 {
        self.seed
    }
}

impl BuildHasher for HashState {
    type Hasher = foldhash::quality::FoldHasher<'static>;
    fn build_hasher(&self) -> Self::Hasher {
        self.inner.build_hasher()
    }
}

/// Sets `ev.tag`. The side is canonical JSON (the engine writes it, or it was checked when read).
/// `raw` is the event's raw block when the side may not carry it (`--raw call|omit`): a custom
/// tool call is told by its block's `type`.
pub fn prepare(
    py: Python<'_>,
    ev: &mut Event,
    hooks: &TagHooks,
    raw: Option<&[u8]>,
) -> PyResult<()> {
    let side = &ev.side;
    let (payload, is_error, raw_at) = payload_of(side, ev.raw_at, ev.is_call).ok_or_else(|| {
        pyo3::exceptions::PyRuntimeError::new_err("internal: an event side is not canonical JSON")
    })?;
    let tag = if ev.is_call {
        let mut found: Vec<(usize, String)> = Vec::new();
        let mut owned: Option<Vec<u8>> = None;
        let mut bad = false;
        if payload == b"null" {
            owned = Some(b"{}".to_vec()); // absent arguments are taken as {} (MCP makes them optional)
        } else if payload[0] == b'"'
            && !match raw.filter(|r| !r.is_empty()) {
                Some(block) => freeform(block, Some(0)),
                None => freeform(side, raw_at),
            }
        {
            let text = scan::unescape(&payload[1..payload.len() - 1]).into_owned();
            let (decoded, detail): (Option<Vec<u8>>, Option<String>) =
                hooks.decode_arguments.bind(py).call1((text,))?.extract()?;
            if let Some(d) = detail {
                found.push((point_index(ARGUMENT_CONSTRUCTION), d));
                bad = true;
            }
            owned = decoded;
        }
        let args: &[u8] = owned.as_deref().unwrap_or(payload);
        if let Some(check) = &hooks.schema_check {
            let arg = (!bad).then(|| PyBytes::new(py, args));
            let points: Vec<(String, String)> =
                check.bind(py).call1((ev.name.as_deref(), arg))?.extract()?;
            for (p, d) in points {
                found.push((point_index(&p), d));
            }
        }
        let mut h = hooks.hasher.build_hasher();
        h.write(ev.name.as_deref().unwrap_or("").as_bytes());
        h.write_u8(0xff);
        h.write_u64(value_hash(&hooks.hasher, args, 0).0);
        EventTag::Call {
            key: h.finish(),
            found,
            failures: Vec::new(),
            detail: None,
        }
    } else {
        let content = payload;
        let is_error = match is_error {
            b"true" => Some(true),
            b"false" => Some(false),
            _ => None,
        };
        let text: std::borrow::Cow<'_, str>;
        let value: serde_json::Value;
        let v = if content[0] == b'"' {
            // A text result (the common case): no JSON tree for it, and no copy without escapes.
            let raw = &content[1..content.len() - 1];
            match (is_error != Some(true)).then(|| text_head(raw)).flatten() {
                Some(head) => {
                    text = head;
                    Verdict {
                        outcome: OK,
                        why: std::borrow::Cow::Borrowed("text"),
                        text: Some(std::borrow::Cow::Borrowed(&text)),
                        code: None,
                    }
                }
                None => {
                    text = scan::unescape(raw);
                    classify_text(&text, is_error)
                }
            }
        } else {
            value = serde_json::from_slice(content).unwrap_or(serde_json::Value::Null);
            classify_result(&value, is_error)
        };
        let mut points = Vec::new();
        if let Some(rejected) = input_rejection(&v) {
            // A refusal of the input is the arguments' fault, not the infrastructure's.
            points.push((point_index(ARGUMENT_CONSTRUCTION), rejected));
        } else if v.outcome == ERROR {
            let said = match v.text.as_deref() {
                Some(t) if !t.is_empty() => format!(": {}", first_line(t)),
                _ => String::new(),
            };
            points.push((
                point_index(EXECUTION),
                cut(format!("error result ({}){said}", v.why)),
            ));
        }
        if v.outcome == EMPTY {
            points.push((
                point_index(RESULT_INTERPRETATION),
                format!("empty result ({})", v.why),
            ));
        }
        EventTag::Result {
            outcome: v.outcome,
            points,
        }
    };
    ev.tag = Some(Box::new(tag));
    Ok(())
}

/// The first bytes of a long text result that are unescaped to judge it: enough for the refusal
/// check's REJECTION_CHARS characters of ASCII text; the second try covers any text (at most 6
/// escaped bytes per character).
const HEADS: [usize; 2] = [REJECTION_CHARS + 24, 6 * REJECTION_CHARS + 24];

/// The unescaped start of a long text result (`raw`: the escaped content between the quotes),
/// when that start alone settles `classify_text` and `input_rejection` as the whole text would
/// (None: judge the whole text). It settles them when the text goes on past REJECTION_CHARS
/// characters (input_rejection reads no further) and its first non-blank character is none of
/// `{ " [` (the JSON decode and empty-brackets rules, which read the whole text), with more than
/// 4 bytes of non-blank text in the start (so the whole is neither blank nor `null`). The result
/// is then "ok (text)", unless `is_error` (the caller's check), whose detail quotes the whole
/// first line. Unescaping and checking only the start saves copying and UTF-8-checking the rest.
fn text_head(raw: &[u8]) -> Option<std::borrow::Cow<'_, str>> {
    for want in HEADS {
        if raw.len() <= want + 8 {
            return None;
        }
        let end = head_end(raw, want);
        if end >= raw.len() {
            return None;
        }
        let head = scan::unescape(&raw[..end]);
        if head.chars().nth(REJECTION_CHARS).is_none() {
            continue;
        }
        let h = py_strip(&head);
        if h.len() <= 4 || matches!(h.as_bytes()[0], b'{' | b'"' | b'[') {
            return None;
        }
        return Some(head);
    }
    None
}

/// `want` moved forward past an escape it would split, then back to a character boundary
/// (escapes are ASCII, so stepping back over UTF-8 continuation bytes never enters one).
fn head_end(raw: &[u8], want: usize) -> usize {
    let mut i = 0;
    let mut end = want;
    while let Some(n) = memchr::memchr(b'\\', &raw[i..end]) {
        let at = i + n;
        i = at + if raw.get(at + 1) == Some(&b'u') { 6 } else { 2 };
        if i >= end {
            end = i;
            break;
        }
    }
    while end < raw.len() && (raw[end] & 0xC0) == 0x80 {
        end -= 1;
    }
    end
}

/// The payload of an event side (`arguments` or `content`), a result's `is_error` (encoded), and
/// where the side's `raw` value starts (None: no raw). Only the short members before the payload
/// are stepped over: its end is `raw_at` (`Event::raw_at`: `,"raw":` or the closing brace), less
/// a result's `,"is_error":...`, so the payload itself, the largest member after `raw`, is not
/// read here (re-scanning it was most of this step's time).
fn payload_of(side: &[u8], raw_at: usize, is_call: bool) -> Option<(&[u8], &[u8], Option<usize>)> {
    let want: &[u8] = if is_call { b"arguments" } else { b"content" };
    let mut p = 1;
    let start = loop {
        let key_end = scan::string(side, p)?;
        let key = side.get(p + 1..key_end - 1)?;
        if key == want {
            break key_end + 1;
        }
        let end = scan::skip(side, key_end + 1)?;
        match side.get(end)? {
            b',' => p = end + 1,
            _ => return None,
        }
    };
    let raw = side
        .get(raw_at..)?
        .starts_with(b",\"raw\":")
        .then_some(raw_at + 7);
    let tail = side.get(start..raw_at)?;
    if is_call {
        return (!tail.is_empty()).then_some((tail, &b"null"[..], raw));
    }
    [
        &b",\"is_error\":null"[..],
        b",\"is_error\":true",
        b",\"is_error\":false",
    ]
    .into_iter()
    .find_map(|s| Some((tail.strip_suffix(s)?, &s[12..], raw)))
}

/// An OpenAI custom tool's call: its input is free-form text, never "undecodable JSON".
fn freeform(side: &[u8], raw: Option<usize>) -> bool {
    let Some(raw) = raw.filter(|r| side[*r] == b'{') else {
        return false;
    };
    scan::members(side, raw).is_some_and(|rm| {
        get(&rm, b"type").is_some_and(|t| {
            // A JSON string (quotes included) equal to one of the types: no escapes to decode.
            let ty = &side[t.start..t.end];
            ty.len() >= 2
                && ty[0] == b'"'
                && FREEFORM_CALL_TYPES
                    .iter()
                    .any(|f| f.as_bytes() == &ty[1..ty.len() - 1])
        })
    })
}

/// A structural hash of the canonical JSON value at `pos` and where it ends: equal for equal
/// values whatever the order of object keys. In canonical (orjson) form a string, number or
/// literal has exactly one spelling, so scalars hash their bytes (1, 1.0, true and "1" differ,
/// as in the Python tagger's fingerprint); objects hash their members' hashes sorted.
pub fn value_hash(s: &HashState, b: &[u8], pos: usize) -> (u64, usize) {
    let mut h = s.build_hasher();
    match b.get(pos) {
        Some(b'{') => {
            let mut members: Vec<u64> = Vec::new();
            let mut p = pos + 1;
            if b.get(p) == Some(&b'}') {
                p += 1;
            } else {
                loop {
                    let key_end = scan::string(b, p).unwrap_or(b.len());
                    let (vh, end) = value_hash(s, b, key_end + 1);
                    let mut mh = s.build_hasher();
                    mh.write(&b[p..key_end]);
                    mh.write_u64(vh);
                    members.push(mh.finish());
                    p = end + 1;
                    if b.get(end) != Some(&b',') {
                        break;
                    }
                }
            }
            members.sort_unstable();
            h.write_u8(b'{');
            for x in members {
                h.write_u64(x);
            }
            (h.finish(), p)
        }
        Some(b'[') => {
            h.write_u8(b'[');
            let mut p = pos + 1;
            if b.get(p) == Some(&b']') {
                return (h.finish(), p + 1);
            }
            loop {
                let (vh, end) = value_hash(s, b, p);
                h.write_u64(vh);
                p = end + 1;
                if b.get(end) != Some(&b',') {
                    break;
                }
            }
            (h.finish(), p)
        }
        Some(b'"') => {
            let end = scan::string(b, pos).unwrap_or(b.len());
            h.write(&b[pos..end]);
            (h.finish(), end)
        }
        Some(_) => {
            let end = b[pos..]
                .iter()
                .position(|c| matches!(c, b',' | b']' | b'}'))
                .map_or(b.len(), |i| pos + i);
            h.write_u8(b'#');
            h.write(&b[pos..end]);
            (h.finish(), end)
        }
        None => (h.finish(), b.len()),
    }
}
