//! The fast path for MCP JSON-RPC messages: `tools/call` requests (calls, by request `id`) and
//! their responses (results: `result.content` / `isError` / `structuredContent`, or an `error`
//! member, a failed result). Mirrors `mcp.parse` (stream_pairer/core/formats/mcp.py). Messages
//! without a tool event (other methods, notifications, other results) return no part and the
//! caller hands the record to Python (which counts it as skipped); a shape Python refuses
//! returns Err.

use crate::fields::{as_id, as_name, field, get, present, scalar, Part};
use crate::scan::{self, Member};

/// `mcp.parse(m)`; `msg` is the message's byte range (every event's block is the whole message).
pub fn parse<'a>(
    b: &'a [u8],
    mm: &[Member<'a>],
    msg: (usize, usize),
) -> Result<Vec<Part<'a>>, &'static str> {
    let block = &b[msg.0..msg.1];
    if let Some(method) = present(mm, b, b"method") {
        if &b[method.start..method.end] != b"\"tools/call\"" {
            return Ok(Vec::new());
        }
        let params = present(mm, b, b"params").ok_or("missing_field")?;
        if b[params.start] != b'{' {
            return Err("field_type");
        }
        let pm = scan::members(b, params.start).ok_or("not_canonical")?;
        return Ok(vec![Part {
            is_call: true,
            id: as_id(scalar(b, get(mm, b"id")))?,
            name: as_name(scalar(b, get(&pm, b"name")), true)?,
            payload: field(b, &pm, b"arguments").into(),
            is_error: b"",
            block,
            format: b"mcp",
        }]);
    }
    if let Some(error) = present(mm, b, b"error") {
        return Ok(vec![Part {
            is_call: false,
            id: as_id(scalar(b, get(mm, b"id")))?,
            name: None,
            payload: (&b[error.start..error.end]).into(),
            is_error: b"true",
            block,
            format: b"mcp",
        }]);
    }
    let Some(result) = get(mm, b"result") else {
        return Err("unknown_shape"); // none of method, result, error: Python's dead letter
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
    let is_error: &[u8] = match is_error_member.map(|x| &b[x.start..x.end]) {
        None | Some(b"null" | b"false") => b"false",
        Some(b"true") => b"true",
        Some(_) => return Err("field_type"),
    };
    let payload = match present(&rm, b, b"content") {
        Some(c) => &b[c.start..c.end],
        None => field(b, &rm, b"structuredContent"),
    };
    Ok(vec![Part {
        is_call: false,
        id: as_id(scalar(b, get(mm, b"id")))?,
        name: None,
        payload: payload.into(),
        is_error,
        block,
        format: b"mcp",
    }])
}
