//! Gemini `Content` objects: `{role, parts: [{functionCall: {name, args, id?}} |
//! {functionResponse: {name, response, id?}} | {text} ...]}`, both as a bare or wrapped message
//! and inside a `generateContent` response (`candidates[].content`): the REST API's camelCase and
//! the Python SDK's snake_case (`model_dump()`) spellings, ids optional (id-less results pair FIFO
//! by name). The one reader of these shapes (issue 23): the fast path calls it, and so does the
//! Python format layer (formats/gemini.py, through readers.rs) for every content object and
//! response it meets; its refusals are worded dead letters (decline.rs).

use crate::fields::decline::{self, wrong_type, Decline};
use crate::fields::{field, get, present, Part};
use crate::scan::{self, Member};

/// (key, snake_case key, id path, name path) of each spelling, as Python words error paths.
type Keys = (&'static [u8], &'static [u8], &'static [u8]);
const CALL: Keys = (b"functionCall", b"functionCall.id", b"functionCall.name");
const CALL_SNAKE: Keys = (b"function_call", b"function_call.id", b"function_call.name");
const RESPONSE: Keys = (
    b"functionResponse",
    b"functionResponse.id",
    b"functionResponse.name",
);
const RESPONSE_SNAKE: Keys = (
    b"function_response",
    b"function_response.id",
    b"function_response.name",
);

/// The member named by the first spelling, or by the second when the first is absent or null.
fn either<'m>(
    pm: &'m [Member<'m>],
    b: &[u8],
    camel: Keys,
    snake: Keys,
) -> Option<(&'m Member<'m>, Keys)> {
    present(pm, b, camel.0)
        .map(|m| (m, camel))
        .or_else(|| present(pm, b, snake.0).map(|m| (m, snake)))
}

/// `gemini.parts(content, prefix)`: the tool events of a content object's `parts` (absent/null:
/// none); `prefix` is the content object's JSON path in the record ("" or ending with ".").
pub fn parts<'a>(
    b: &'a [u8],
    content: &[Member<'a>],
    prefix: &str,
) -> Result<Vec<Part<'a>>, Decline> {
    let Some(items) = present(content, b, b"parts") else {
        return Ok(Vec::new());
    };
    if b[items.start] != b'[' {
        let v = &b[items.start..items.end];
        return Err(wrong_type(v, prefix, None, b"parts", "an array"));
    }
    let path = format!("{prefix}parts");
    let mut out = Vec::new();
    for (i, (s, e)) in scan::elements(b, items.start)
        .ok_or("not_canonical")?
        .into_iter()
        .enumerate()
    {
        let at = Some(i);
        if b[s] != b'{' {
            return Err(wrong_type(&b[s..e], &path, at, b"", "a part object"));
        }
        let pm = scan::members(b, s).ok_or("not_canonical")?;
        // Python: `p.get("functionCall")`, and the snake_case key only when that is None.
        if let Some((fc, keys)) = either(&pm, b, CALL, CALL_SNAKE) {
            if b[fc.start] != b'{' {
                let v = &b[fc.start..fc.end];
                return Err(wrong_type(v, &path, at, keys.0, "an object"));
            }
            let fm = scan::members(b, fc.start).ok_or("not_canonical")?;
            out.push(Part {
                is_call: true,
                id: decline::id(b, get(&fm, b"id"), &path, at, keys.1)?,
                name: decline::name(b, get(&fm, b"name"), &path, at, keys.2, true)?,
                payload: field(b, &fm, b"args").into(),
                is_error: b"",
                block: &b[s..e],
                format: b"gemini",
            });
            continue;
        }
        let Some((fr, keys)) = either(&pm, b, RESPONSE, RESPONSE_SNAKE) else {
            continue;
        };
        if b[fr.start] != b'{' {
            let v = &b[fr.start..fr.end];
            return Err(wrong_type(v, &path, at, keys.0, "an object"));
        }
        let fm = scan::members(b, fr.start).ok_or("not_canonical")?;
        let response = get(&fm, b"response");
        // Gemini's convention: {"output": ...} on success, {"error": ...} on failure.
        let is_error: &[u8] = match response {
            Some(r) if b[r.start] == b'{' => {
                let rm = scan::members(b, r.start).ok_or("not_canonical")?;
                if present(&rm, b, b"error").is_some() {
                    b"true"
                } else {
                    b"false"
                }
            }
            _ => b"false",
        };
        out.push(Part {
            is_call: false,
            id: decline::id(b, get(&fm, b"id"), &path, at, keys.1)?,
            name: decline::name(b, get(&fm, b"name"), &path, at, keys.2, false)?,
            payload: field(b, &fm, b"response").into(),
            is_error,
            block: &b[s..e],
            format: b"gemini",
        });
    }
    Ok(out)
}

/// `_candidates(candidates, prefix)`: the parts of every candidate's `content` (a candidate
/// without one, e.g. blocked by a safety filter, has none); `c` is the `candidates` member of
/// the object at `prefix`.
pub fn candidates<'a>(b: &'a [u8], c: &Member, prefix: &str) -> Result<Vec<Part<'a>>, Decline> {
    if b[c.start] != b'[' {
        let v = &b[c.start..c.end];
        return Err(wrong_type(v, prefix, None, b"candidates", "an array"));
    }
    let path = format!("{prefix}candidates");
    let mut out = Vec::new();
    for (i, (s, e)) in scan::elements(b, c.start)
        .ok_or("not_canonical")?
        .into_iter()
        .enumerate()
    {
        if b[s] != b'{' {
            return Err(wrong_type(
                &b[s..e],
                &path,
                Some(i),
                b"",
                "a candidate object",
            ));
        }
        let cm = scan::members(b, s).ok_or("not_canonical")?;
        let Some(content) = present(&cm, b, b"content") else {
            continue;
        };
        if b[content.start] != b'{' {
            let v = &b[content.start..content.end];
            return Err(wrong_type(v, &path, Some(i), b"content", "an object"));
        }
        let ctm = scan::members(b, content.start).ok_or("not_canonical")?;
        out.extend(parts(b, &ctm, &format!("{path}[{i}].content."))?);
    }
    Ok(out)
}
