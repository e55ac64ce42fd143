//! Anthropic Messages content blocks (also the inner messages of Claude Code session lines).
//!
//! Calls: `tool_use` (client tools), `server_tool_use` and `mcp_tool_use` (tools Anthropic runs,
//! whose results come back in the same assistant message). Results: `tool_result` with
//! `tool_use_id`, plus the server-side `*_tool_result` / `mcp_tool_result` blocks, which report
//! failure as a `*_error` content object instead of `is_error`. `block` is the one reader of a
//! typed block (issue 23): the fast path's content scan (messages.rs) calls it, and so does the
//! Python format layer's (formats/anthropic.py, through readers.rs); its refusals are worded
//! dead letters. Blocks without a `type` are Bedrock's (bedrock.rs); the Vercel AI SDK's
//! `tool-call` / `tool-result` parts, which may sit in the same array, are read by Python.

use crate::fields::decline::{self, Decline};
use crate::fields::{field, get, Part};
use crate::scan::{self, Member};

pub const CALL_TYPES: [&[u8]; 3] = [b"\"tool_use\"", b"\"server_tool_use\"", b"\"mcp_tool_use\""];
/// The Vercel AI SDK's model-message parts (formats/vercel_ai.py `PART_TYPES`).
pub const VERCEL_TYPES: [&[u8]; 2] = [b"\"tool-call\"", b"\"tool-result\""];

/// `bt` (a `type` value's JSON) names a result block: `tool_result` or `*_tool_result`.
fn is_result(bt: &[u8]) -> bool {
    bt == b"\"tool_result\"" || (bt[0] == b'"' && bt.ends_with(b"_tool_result\""))
}

/// The event of one typed block (members `bm`, bytes `at`; `prefix[index]` its JSON path), if
/// it is a tool block; `fmt` is `anthropic`, or `claude_code` inside a Claude Code line.
pub fn block<'a>(
    b: &'a [u8],
    bm: &[Member],
    at: (usize, usize),
    prefix: &str,
    index: Option<usize>,
    fmt: &'static [u8],
) -> Result<Option<Part<'a>>, Decline> {
    let Some(t) = get(bm, b"type") else {
        return Ok(None);
    };
    let bt = &b[t.start..t.end];
    if CALL_TYPES.contains(&bt) {
        return Ok(Some(Part {
            is_call: true,
            id: decline::id(b, get(bm, b"id"), prefix, index, b"id")?,
            name: decline::name(b, get(bm, b"name"), prefix, index, b"name", true)?,
            payload: field(b, bm, b"input").into(),
            is_error: b"",
            block: &b[at.0..at.1],
            format: fmt,
        }));
    }
    if !is_result(bt) {
        return Ok(None);
    }
    let content = get(bm, b"content");
    let mut is_error = decline::flag(b, get(bm, b"is_error"), prefix, index, b"is_error")?;
    if is_error == b"null" {
        is_error = match content {
            Some(c) if b[c.start] == b'{' => {
                let cm = scan::members(b, c.start).ok_or("not_canonical")?;
                match get(&cm, b"type") {
                    Some(t) if b[t.start] == b'"' => {
                        let text = scan::unescape(&b[t.start + 1..t.end - 1]);
                        if text.ends_with("_error") {
                            b"true"
                        } else {
                            b"false"
                        }
                    }
                    _ => b"false",
                }
            }
            _ => b"false",
        };
    }
    Ok(Some(Part {
        is_call: false,
        id: decline::id(b, get(bm, b"tool_use_id"), prefix, index, b"tool_use_id")?,
        name: None,
        payload: field(b, bm, b"content").into(),
        is_error,
        block: &b[at.0..at.1],
        format: fmt,
    }))
}
