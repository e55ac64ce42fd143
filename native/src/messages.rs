//! The fast path for wrapped chat messages: `{conversation_id, ts, message: {...}}` logging
//! wrappers and Claude Code session lines (`type: assistant|user`), holding an Anthropic
//! message (`content: [blocks]`), an OpenAI Chat assistant message (`tool_calls`) or an OpenAI
//! Chat tool result (`role: tool`), or (read by gemini.rs, bedrock.rs, mcp.rs) Gemini parts or
//! candidates, Bedrock blocks, a Converse `output.message`, an MCP JSON-RPC message. Mirrors
//! `_dispatch` / `_message` of stream_pairer/core/formats/__init__.py, anthropic.py and openai.py
//! for those shapes; any other shape, or a value whose reading is not certain here, returns Err
//! and goes to Python. Records without a `message` object are read by envelope.rs.

pub mod anthropic;
pub mod chat;
pub mod responses;
pub mod walk;

use std::borrow::Cow;

use crate::event::Event;
use crate::fields::decline::Decline;
use crate::fields::{conversation_id, get, present, record_ts, top_ts, FormatCfg, Part};
use crate::scan::{self, Member};

fn is_obj(b: &[u8], x: &Member) -> bool {
    b[x.start] == b'{'
}

/// A top-level OpenAI Responses tool item (`openai.responses_item`, responses.rs).
pub fn responses_item(
    raw: &[u8],
    top: &[Member],
    block: (usize, usize),
    source: &[u8],
    key: Option<&str>,
    cfg: &FormatCfg,
) -> Result<Vec<Event>, &'static str> {
    if get(top, b"message").is_some() {
        return Err("other_format"); // its timestamp may come from the message: left to Python
    }
    let parts = responses::item(raw, top, block, "", None, Args::Decode);
    let parts = parts.map_err(Decline::reason)?;
    events(raw, top, None, parts, source, key, cfg)
}

pub fn parse(
    raw: &[u8],
    top: &[Member],
    source: &[u8],
    key: Option<&str>,
    cfg: &FormatCfg,
) -> Result<Vec<Event>, &'static str> {
    // canonical.rs calls envelope.rs for a record that is not wrapped: never reached with one.
    let Some(msg) = get(top, b"message").filter(|x| is_obj(raw, x)) else {
        return Err("other_format");
    };
    let mm = scan::members(raw, msg.start).ok_or("not_canonical")?;
    let parts = match get(top, b"type").map(|t| &raw[t.start..t.end]) {
        None | Some(b"null") => {
            if get(top, b"jsonrpc").is_some()
                || get(top, b"resourceSpans").is_some()
                || get(top, b"resourceLogs").is_some()
                || (present(top, raw, b"request").is_some() && get(top, b"response").is_some())
            {
                return Err("other_format"); // MCP, an OTLP export, an HTTP wire exchange
            }
            dispatch_inner(raw, &mm, msg)?
        }
        Some(b"\"assistant\"" | b"\"user\"") => message(raw, &mm, msg, b"claude_code")?,
        _ => return Err("other_format"),
    };
    events(raw, top, Some(&mm), parts, source, key, cfg)
}

/// The events of a record's parts, each stamped with the record's conversation id and time (the
/// top level's, else `inner`'s: a wrapped message's own timestamp, or without one a `request`
/// object's) and an equal share of its size. Shared by the wrapped (`parse`), unwrapped
/// (envelope.rs) and Responses item readers; no parts is Err
/// `no_events` (Python counts the record as skipped, or marks a request start).
pub fn events(
    raw: &[u8],
    top: &[Member],
    inner: Option<&[Member]>,
    parts: Vec<Part>,
    source: &[u8],
    key: Option<&str>,
    cfg: &FormatCfg,
) -> Result<Vec<Event>, &'static str> {
    if parts.is_empty() {
        return Err("no_events");
    }
    let conversation_id = conversation_id(raw, top, cfg, key)?;
    let ts_ms = match inner {
        Some(inner) => match record_ts(raw, top)? {
            Some(ts) => Some(ts),
            None => record_ts(raw, inner)?,
        },
        None => top_ts(raw, top)?, // (envelope.rs hands over records with a `request` first)
    };
    let size = (raw.len() / parts.len()).max(1);
    Ok(parts
        .into_iter()
        .enumerate()
        .map(|(i, p)| p.event(conversation_id.clone(), ts_ms, source, i as i64, size))
        .collect())
}

/// `_dispatch(message, "message.", top=False)` for the shapes read here.
fn dispatch_inner<'a>(
    b: &'a [u8],
    mm: &[Member<'a>],
    msg: &Member,
) -> Result<Vec<Part<'a>>, &'static str> {
    match get(mm, b"type").map(|t| &b[t.start..t.end]) {
        None | Some(b"null") => {}
        Some(b"\"message\"") if get(mm, b"content").is_some() => {
            return message(b, mm, msg, b"anthropic")
        }
        _ => return Err("other_format"),
    }
    if get(mm, b"jsonrpc").is_some() {
        return crate::mcp::parse(b, mm, (msg.start, msg.end), "message.").map_err(Decline::reason);
    }
    if let Some(o) = present(mm, b, b"output") {
        return output(b, o);
    }
    if present(mm, b, b"choices").is_some() {
        return Err("other_format");
    }
    if let Some(c) = present(mm, b, b"candidates") {
        return crate::gemini::candidates(b, c, "").map_err(Decline::reason);
    }
    message(b, mm, msg, b"anthropic")
}

/// A response's `output`: a Responses item array (walk.rs), or `{"message": {...}}` of a
/// Bedrock Converse response (`_message(output.message)`); any other `output` goes to Python.
pub fn output<'a>(b: &'a [u8], o: &Member) -> Result<Vec<Part<'a>>, &'static str> {
    if b[o.start] == b'[' {
        return walk::output(b, o, "output", Args::Decode).map_err(Decline::reason);
    }
    if b[o.start] != b'{' {
        return Err("other_format");
    }
    let om = scan::members(b, o.start).ok_or("not_canonical")?;
    let m = get(&om, b"message").ok_or("other_format")?;
    if b[m.start] != b'{' {
        return Err("field_type");
    }
    let mm = scan::members(b, m.start).ok_or("not_canonical")?;
    message(b, &mm, m, b"anthropic")
}

/// `_message`: Gemini parts, tool_calls, role tool, or Anthropic / Bedrock content blocks.
pub fn message<'a>(
    b: &'a [u8],
    mm: &[Member<'a>],
    msg: &Member,
    anthropic_format: &'static [u8],
) -> Result<Vec<Part<'a>>, &'static str> {
    if get(mm, b"parts").is_some() {
        return crate::gemini::parts(b, mm, "").map_err(Decline::reason);
    }
    let at = (msg.start, msg.end);
    let decode = Args::Decode;
    if let Some(tc) = present(mm, b, b"tool_calls") {
        return chat::calls(b, tc, "", decode).map_err(Decline::reason);
    }
    if let Some(fc) = present(mm, b, b"function_call") {
        return chat::legacy_call(b, fc, at, "", decode).map_err(Decline::reason);
    }
    let role = get(mm, b"role").map(|r| &b[r.start..r.end]);
    if role == Some(b"\"tool\"") {
        if get(mm, b"tool_call_id").is_none()
            && get(mm, b"content").is_some_and(|c| b[c.start] == b'[')
        {
            return Err("other_format"); // the Vercel AI SDK's `tool-result` parts: read in Python
        }
        return chat::result(b, mm, at, "").map_err(Decline::reason);
    }
    if role == Some(b"\"function\"") {
        return chat::legacy_result(b, mm, at, "").map_err(Decline::reason);
    }
    match get(mm, b"content") {
        Some(c) if b[c.start] == b'[' => {
            let parts = walk::content(b, c, "content", anthropic_format);
            let parts = parts.map_err(Decline::reason)?;
            if parts.iter().any(|p| p.format == walk::ELSEWHERE) {
                return Err("other_format"); // a Vercel AI SDK part: read in Python
            }
            Ok(parts)
        }
        _ => Err("other_format"),
    }
}

/// How a call's `arguments` (a JSON text) reach the event: decoded here (the fast path:
/// `messages::arguments`, which leaves what it cannot decode exactly to Python) or as they are
/// (readers.rs: Python's `decode_arguments` then decodes them, as it does for every format).
#[derive(Clone, Copy, PartialEq)]
pub enum Args {
    Decode,
    AsGiven,
}

/// A call's `arguments` member as `args` says (absent: null).
pub fn call_arguments<'a>(
    b: &'a [u8],
    m: Option<&Member>,
    args: Args,
) -> Result<Cow<'a, [u8]>, Decline> {
    match args {
        Args::Decode => Ok(arguments(b, m)?),
        Args::AsGiven => Ok(m.map_or(&b"null"[..], |x| &b[x.start..x.end]).into()),
    }
}

/// `decode_arguments(value)` of an `arguments` member (absent: null).
pub fn arguments<'a>(b: &'a [u8], a: Option<&Member>) -> Result<Cow<'a, [u8]>, &'static str> {
    Ok(match a {
        None => Cow::Borrowed(b"null"),
        Some(a) if b[a.start] == b'"' => Cow::Owned(decode_arguments(&b[a.start + 1..a.end - 1])?),
        Some(a) => Cow::Borrowed(&b[a.start..a.end]),
    })
}

/// `decode_arguments` of a JSON-encoded object: its text, when that text is exactly what orjson
/// would write for the decoded object. Anything else (text that is not JSON, another value, a
/// spelling orjson would change) is left to Python, which decides between decoding and keeping.
fn decode_arguments(escaped: &[u8]) -> Result<Vec<u8>, &'static str> {
    let inner = scan::unescape(escaped).into_owned().into_bytes();
    if inner.first() == Some(&b'{') && scan::value(&inner, 0, 0, None) == Some(inner.len()) {
        return Ok(inner);
    }
    Err("arguments")
}
