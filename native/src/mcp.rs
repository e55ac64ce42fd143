//! The one reader of MCP JSON-RPC messages (issue 23): `tools/call` requests (calls, by request
//! `id`) and their responses (results: `result.content` / `isError` / `structuredContent`, or an
//! `error` member, a failed result). The fast path calls it on a record's bytes; the Python
//! format layer (formats/mcp.py) on every MCP message it meets, through readers.rs.
//!
//! A response does not name its method, so it is a tool result when it looks like one: `result`
//! holds a `content` array, `isError` or `structuredContent`. Results of other methods
//! (`initialize`, `tools/list`, `ping`, a sampling response whose `content` is a single object)
//! and requests other than `tools/call` (including notifications) carry no tool event: no part.
//! An `error` response is a failed result (is_error true, payload = the error object): it is not
//! possible to tell from the response alone that its request was not a `tools/call`; if it was
//! not, it ends as an orphan result, never silently dropped. Refusals are worded dead letters.

use crate::fields::decline::{self, missing, wrong_type, Decline};
use crate::fields::{field, get, present, Part};
use crate::scan::{self, Member};
use crate::vocab::dead_letter_reason::{MISSING_FIELD, UNKNOWN_SHAPE};

/// The parts of one JSON-RPC message: `mm` its members, `msg` its byte range (every event's
/// block is the whole message), `prefix` its JSON path in the record ("" or "message.").
pub fn parse<'a>(
    b: &'a [u8],
    mm: &[Member<'a>],
    msg: (usize, usize),
    prefix: &str,
) -> Result<Vec<Part<'a>>, Decline> {
    let block = &b[msg.0..msg.1];
    let id = |at: Option<&Member>| decline::id(b, at, prefix, None, b"id");
    if let Some(method) = present(mm, b, b"method") {
        if &b[method.start..method.end] != b"\"tools/call\"" {
            return Ok(Vec::new());
        }
        let Some(params) = present(mm, b, b"params") else {
            let what = "a tools/call request needs params.name";
            return Err(missing(MISSING_FIELD, prefix, None, b"params", what));
        };
        if b[params.start] != b'{' {
            return Err(wrong_type(
                &b[params.start..params.end],
                prefix,
                None,
                b"params",
                "an object",
            ));
        }
        let pm = scan::members(b, params.start).ok_or("not_canonical")?;
        return Ok(vec![Part {
            is_call: true,
            id: id(get(mm, b"id"))?,
            name: decline::name(b, get(&pm, b"name"), prefix, None, b"params.name", true)?,
            payload: field(b, &pm, b"arguments").into(),
            is_error: b"",
            block,
            format: b"mcp",
        }]);
    }
    if let Some(error) = present(mm, b, b"error") {
        return Ok(vec![Part {
            is_call: false,
            id: id(get(mm, b"id"))?,
            name: None,
            payload: (&b[error.start..error.end]).into(),
            is_error: b"true",
            block,
            format: b"mcp",
        }]);
    }
    let Some(result) = get(mm, b"result") else {
        let detail = format!(
            "{} is a JSON-RPC message with none of method, result, error",
            decline::at(prefix, None, b"")
        );
        return Err(Decline::Dead(UNKNOWN_SHAPE, UNKNOWN_SHAPE, detail));
    };
    if b[result.start] != b'{' {
        return Ok(Vec::new()); // `"result" in m`: a response of another method
    }
    let rm = scan::members(b, result.start).ok_or("not_canonical")?;
    let content = get(&rm, b"content");
    let is_list = content.is_some_and(|c| b[c.start] == b'[');
    let is_error_member = get(&rm, b"isError");
    if !(is_list || is_error_member.is_some() || get(&rm, b"structuredContent").is_some()) {
        return Ok(Vec::new()); // initialize, tools/list, a sampling response ...
    }
    let is_error: &[u8] = match decline::flag(b, is_error_member, prefix, None, b"result.isError")?
    {
        b"true" => b"true",
        _ => b"false", // bool(None) is False
    };
    let payload = match present(&rm, b, b"content") {
        Some(c) => &b[c.start..c.end],
        None => field(b, &rm, b"structuredContent"),
    };
    Ok(vec![Part {
        is_call: false,
        id: id(get(mm, b"id"))?,
        name: None,
        payload: payload.into(),
        is_error,
        block,
        format: b"mcp",
    }])
}
