//! The fast path: a canonical-format record (`type` tool_call / tool_result at the top level)
//! read straight from its bytes. Only the fields pairing needs are decoded; `arguments`/`content`
//! and the record itself (the event's `raw`) are spliced into the output as they are.
//!
//! `part` is the one reader of a canonical event (issue 23): the fast path calls it on the record's
//! bytes, the Python format layer on a canonical event it meets (a wrapped one, a record whose
//! bytes orjson would re-encode, one whose record-level fields are left to Python) through
//! readers.rs. Its refusals are worded dead letters (decline.rs); the record-level checks here
//! (conversation id, timestamp) mirror formats/common.py for the spellings they accept and
//! return `Err(reason)` otherwise, handing the record to the Python layer, which words them.

use crate::event::Event;
use crate::fields::decline::{self, Decline};
use crate::fields::{conversation_id, get, top_ts, FormatCfg, Part};
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
    match get(&m, b"type").map(|t| &raw[t.start..t.end]) {
        Some(b"\"tool_call\"" | b"\"tool_result\"") => {}
        Some(t) if crate::messages::responses::TOOL_ITEMS.contains(&t) => {
            return crate::messages::responses_item(raw, &m, (start, end), source, key, cfg)
        }
        // A wrapped message (`message` an object) or a record without one (envelope.rs).
        _ if get(&m, b"message").is_some_and(|x| raw[x.start] == b'{') => {
            return crate::messages::parse(raw, &m, source, key, cfg)
        }
        _ => return crate::envelope::parse(raw, &m, source, key, cfg),
    }
    if get(&m, b"message").is_some() {
        return Err("other_format"); // its timestamp may come from the message: left to Python
    }
    let part = part(raw, &m, &raw[start..end], "").map_err(Decline::reason)?;
    let conversation_id = conversation_id(raw, &m, cfg, key)?;
    let ts_ms = top_ts(raw, &m)?;
    Ok(vec![part.event(
        conversation_id,
        ts_ms,
        source,
        0,
        raw.len().max(1),
    )])
}

/// One canonical event (`type` tool_call / tool_result) of the object whose members are `m`;
/// `block` is the object's bytes, `prefix` its JSON path in the record ("" or "message.").
/// On a result `call_id` wins over `id` (it can only mean the call answered, whereas logs often
/// give every event an `id` of its own); on a call `id` wins.
pub fn part<'a>(
    b: &'a [u8],
    m: &[Member],
    block: &'a [u8],
    prefix: &str,
) -> Result<Part<'a>, Decline> {
    let is_call = match get(m, b"type").map(|t| &b[t.start..t.end]) {
        Some(b"\"tool_call\"") => true,
        Some(b"\"tool_result\"") => false,
        _ => return Err(Decline::Pass("other_format")),
    };
    let (mut field, other): (&[u8], &[u8]) = if is_call {
        (b"id", b"call_id")
    } else {
        (b"call_id", b"id")
    };
    let id_mem = match get(m, field) {
        Some(x) if b[x.start] != b'n' => Some(x),
        _ => {
            field = other;
            get(m, other)
        }
    };
    let id = decline::id(b, id_mem, prefix, None, field)?;
    let name = decline::name(b, get(m, b"name"), prefix, None, b"name", is_call)?;
    let is_error: &[u8] = if is_call {
        b""
    } else {
        decline::flag(b, get(m, b"is_error"), prefix, None, b"is_error")?
    };
    let payload: &[u8] = match get(m, if is_call { b"arguments" } else { b"content" }) {
        Some(x) => &b[x.start..x.end],
        None => b"null",
    };
    Ok(Part {
        is_call,
        id,
        name,
        payload: payload.into(),
        is_error,
        block,
        format: b"canonical",
    })
}
