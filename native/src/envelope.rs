//! The fast path for records that are not wrapped (no `message` object): a bare chat message
//! (`{conversation_id, role, content | parts | tool_calls ...}`), a Bedrock Converse response
//! (`output.message`), a Gemini `generateContent` response (`candidates`), and a bare MCP
//! JSON-RPC message. Mirrors the top-level branch of `_dispatch` (stream_pairer/core/formats/
//! __init__.py) for records with no `type`; the shapes whose dispatch or timestamp depends on
//! other members (`request`, OTLP exports, gemini-cli headers, Responses `output` arrays, Chat
//! Completions `choices`) return Err and are read by Python.

use crate::canonical::{get, FormatCfg, Part};
use crate::engine::Event;
use crate::scan::{self, Member};

/// A member whose value is not null (Python's `d.get(k) is not None`).
pub fn present<'a>(m: &'a [Member<'a>], b: &[u8], key: &[u8]) -> Option<&'a Member<'a>> {
    get(m, key).filter(|x| b[x.start] != b'n')
}

/// `d.get(k)` as JSON bytes (absent: null).
pub fn field<'a>(b: &'a [u8], m: &[Member], key: &[u8]) -> &'a [u8] {
    get(m, key).map_or(b"null", |x| &b[x.start..x.end])
}

/// `{"message": {...}}` of a Bedrock Converse response's `output` (`_message(output.message)`);
/// any other `output` (a Responses item array, an object without `message`) goes to Python.
pub fn output<'a>(b: &'a [u8], o: &Member) -> Result<Vec<Part<'a>>, &'static str> {
    if b[o.start] != b'{' {
        return Err("other_format");
    }
    let om = scan::members(b, o.start).ok_or("not_canonical")?;
    let m = get(&om, b"message").ok_or("other_format")?;
    if b[m.start] != b'{' {
        return Err("field_type");
    }
    let mm = scan::members(b, m.start).ok_or("not_canonical")?;
    crate::messages::message(b, &mm, m, b"anthropic")
}

/// A top-level record without a `message` object (see the module comment).
pub fn parse(
    raw: &[u8],
    top: &[Member],
    source: &[u8],
    key: Option<&str>,
    cfg: &FormatCfg,
) -> Result<Vec<Event>, &'static str> {
    match get(top, b"type").map(|t| raw[t.start]) {
        None | Some(b'n') => {}
        _ => return Err("other_format"),
    }
    let has = |k: &[u8]| get(top, k).is_some();
    if has(b"message")
        || has(b"request")
        || has(b"resourceSpans")
        || has(b"resourceLogs")
        || (has(b"sessionId") && has(b"projectHash"))
        || has(b"step_number")
    {
        // a message that is not an object, a wire exchange (or a timestamp read from
        // `request`), an OTLP export, a gemini-cli session header, a smolagents step
        return Err("other_format");
    }
    let is_ws = |c: &u8| matches!(c, b' ' | b'\t' | b'\n' | b'\r');
    let start = raw.iter().position(|c| !is_ws(c)).ok_or("empty")?;
    let end = raw.iter().rposition(|c| !is_ws(c)).ok_or("empty")? + 1;
    let parts = if has(b"jsonrpc") {
        crate::mcp::parse(raw, top, (start, end))?
    } else if let Some(o) = present(top, raw, b"output") {
        output(raw, o)?
    } else if present(top, raw, b"choices").is_some() {
        return Err("other_format");
    } else if let Some(c) = present(top, raw, b"candidates") {
        crate::gemini::candidates(raw, c)?
    } else {
        let record = Member {
            key: b"",
            start,
            end,
        };
        crate::messages::message(raw, top, &record, b"anthropic")?
    };
    crate::messages::events(raw, top, None, parts, source, key, cfg)
}
