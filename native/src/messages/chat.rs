//! OpenAI Chat Completions and the legacy functions API.
//!
//! * Chat: an assistant message's `tool_calls[]` `{id, type: "function", function: {name,
//!   arguments}}` (or `custom: {name, input}`, a free-form grammar tool; or Inspect AI's
//!   `{id, function: "name", arguments}`); results are `role: "tool"` messages with
//!   `tool_call_id` (Inspect AI adds `function`, the tool name, and `error`, a failed outcome;
//!   SWE-agent answers several calls at once with `tool_call_ids`).
//! * Legacy: `function_call: {name, arguments}` and `role: "function"` results, without ids
//!   (they pair FIFO by name).
//!
//! The one reader of these shapes (issue 23): the fast path (messages.rs) calls it, and so does
//! the Python format layer (formats/openai.py, through readers.rs); refusals are worded.

use super::{call_arguments, Args};
use crate::fields::decline::{self, missing, wrong_type, Decline};
use crate::fields::{field, get, present, Part};
use crate::scan::{self, Member};
use crate::vocab::dead_letter_reason::MISSING_FIELD;

/// `openai.chat_calls(tool_calls, prefix)`: `tc` is the message's `tool_calls` member.
pub fn calls<'a>(
    b: &'a [u8],
    tc: &Member,
    prefix: &str,
    args: Args,
) -> Result<Vec<Part<'a>>, Decline> {
    if b[tc.start] != b'[' {
        let v = &b[tc.start..tc.end];
        return Err(wrong_type(v, prefix, None, b"tool_calls", "an array"));
    }
    let tp = format!("{prefix}tool_calls");
    let mut out = Vec::new();
    for (i, (s, e)) in scan::elements(b, tc.start)
        .ok_or("not_canonical")?
        .into_iter()
        .enumerate()
    {
        let at = Some(i);
        if b[s] != b'{' {
            return Err(wrong_type(&b[s..e], &tp, at, b"", "a tool call object"));
        }
        let tm = scan::members(b, s).ok_or("not_canonical")?;
        let call = |id, name, payload| Part {
            is_call: true,
            id,
            name,
            payload,
            is_error: b"",
            block: &b[s..e],
            format: b"openai_chat",
        };
        let function = present(&tm, b, b"function");
        if let Some(f) = function.filter(|f| b[f.start] == b'"') {
            // Inspect AI's ToolCall: the name in `function`, arguments already decoded.
            let id = decline::id(b, get(&tm, b"id"), &tp, at, b"id")?;
            let name = decline::name(b, Some(f), &tp, at, b"function", true)?;
            out.push(call(
                id,
                name,
                call_arguments(b, get(&tm, b"arguments"), args)?,
            ));
            continue;
        }
        let (f, key, name_field, args_key): (_, &[u8], &[u8], &[u8]) = match function {
            Some(f) => (f, b"function", b"function.name", b"arguments"),
            None => match present(&tm, b, b"custom") {
                Some(c) => (c, b"custom", b"custom.name", b"input"),
                None => {
                    let what = "a tool call needs function.name";
                    return Err(missing(MISSING_FIELD, &tp, at, b"function", what));
                }
            },
        };
        if b[f.start] != b'{' {
            return Err(wrong_type(&b[f.start..f.end], &tp, at, key, "an object"));
        }
        let fm = scan::members(b, f.start).ok_or("not_canonical")?;
        let id = decline::id(b, get(&tm, b"id"), &tp, at, b"id")?;
        let name = decline::name(b, get(&fm, b"name"), &tp, at, name_field, true)?;
        out.push(call(id, name, call_arguments(b, get(&fm, args_key), args)?));
    }
    Ok(out)
}

/// `openai.chat_result(m, prefix)`: a `role: "tool"` message (members `mm`, bytes `at`).
pub fn result<'a>(
    b: &'a [u8],
    mm: &[Member],
    at: (usize, usize),
    prefix: &str,
) -> Result<Vec<Part<'a>>, Decline> {
    let (name, name_field): (_, &[u8]) = match present(mm, b, b"name") {
        None if get(mm, b"function").is_some() => (get(mm, b"function"), b"function"),
        n => (n, b"name"),
    };
    let name = decline::name(b, name, prefix, None, name_field, false)?;
    let is_error: &[u8] = match get(mm, b"error").map(|x| &b[x.start..x.end]) {
        None | Some(b"null" | b"false") => b"null",
        Some(_) => b"true", // Inspect AI's `error: {type, message}`: the tool failed
    };
    let result = |id| Part {
        is_call: false,
        id,
        name: name.clone(),
        payload: field(b, mm, b"content").into(),
        is_error,
        block: &b[at.0..at.1],
        format: b"openai_chat",
    };
    let call_id = decline::id(b, get(mm, b"tool_call_id"), prefix, None, b"tool_call_id")?;
    if let (None, Some(ids)) = (&call_id, get(mm, b"tool_call_ids")) {
        // SWE-agent's history: one observation answers the ids of the action's calls, in a
        // list. Each id gets its result (the same output): never a FIFO pair when ids are there.
        if b[ids.start] != b'[' {
            let v = &b[ids.start..ids.end];
            return Err(wrong_type(
                v,
                prefix,
                None,
                b"tool_call_ids",
                "an array of ids",
            ));
        }
        let mut kept = Vec::new();
        let elements = scan::elements(b, ids.start).ok_or("not_canonical")?;
        for (i, (start, end)) in elements.into_iter().enumerate() {
            let x = Member {
                key: b"",
                start,
                end,
            };
            let here = format!("tool_call_ids[{i}]");
            kept.extend(decline::id(b, Some(&x), prefix, None, here.as_bytes())?);
        }
        if !kept.is_empty() {
            return Ok(kept.into_iter().map(|id| result(Some(id))).collect());
        }
    }
    Ok(vec![result(call_id)])
}

/// `openai.legacy_call(m, fc, prefix)`: `function_call` (member `fc`) of the message at `at`.
pub fn legacy_call<'a>(
    b: &'a [u8],
    fc: &Member,
    at: (usize, usize),
    prefix: &str,
    args: Args,
) -> Result<Vec<Part<'a>>, Decline> {
    if b[fc.start] != b'{' {
        let v = &b[fc.start..fc.end];
        return Err(wrong_type(v, prefix, None, b"function_call", "an object"));
    }
    let fm = scan::members(b, fc.start).ok_or("not_canonical")?;
    let name = decline::name(
        b,
        get(&fm, b"name"),
        prefix,
        None,
        b"function_call.name",
        true,
    )?;
    Ok(vec![Part {
        is_call: true,
        id: None,
        name,
        payload: call_arguments(b, get(&fm, b"arguments"), args)?,
        is_error: b"",
        block: &b[at.0..at.1],
        format: b"openai_legacy",
    }])
}

/// `openai.legacy_result(m, prefix)`: a `role: "function"` message.
pub fn legacy_result<'a>(
    b: &'a [u8],
    mm: &[Member],
    at: (usize, usize),
    prefix: &str,
) -> Result<Vec<Part<'a>>, Decline> {
    Ok(vec![Part {
        is_call: false,
        id: None,
        name: decline::name(b, get(mm, b"name"), prefix, None, b"name", false)?,
        payload: field(b, mm, b"content").into(),
        is_error: b"null",
        block: &b[at.0..at.1],
        format: b"openai_legacy",
    }])
}
