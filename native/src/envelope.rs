//! The fast path for records that are not wrapped (no `message` object): a bare chat message
//! (`{conversation_id, role, content | parts | tool_calls ...}`), a Bedrock Converse response
//! (`output.message`), a Responses response (`output` array, walked by messages/walk.rs), a
//! Gemini `generateContent` response (`candidates`), and a bare MCP JSON-RPC message. Mirrors
//! the top-level branch of `_dispatch` (stream_pairer/core/formats/__init__.py) for records with
//! no `type`; the shapes whose dispatch or timestamp depends on other members (`request`, OTLP
//! exports, gemini-cli headers, Chat Completions `choices`) return Err and are read by Python.

use crate::event::Event;
use crate::fields::decline::Decline;
use crate::fields::{get, present, FormatCfg};
use crate::scan::Member;

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
        crate::mcp::parse(raw, top, (start, end), "").map_err(Decline::reason)?
    } else if let Some(o) = present(top, raw, b"output") {
        crate::messages::output(raw, o)?
    } else if present(top, raw, b"choices").is_some() {
        return Err("other_format");
    } else if let Some(c) = present(top, raw, b"candidates") {
        crate::gemini::candidates(raw, c, "").map_err(Decline::reason)?
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
