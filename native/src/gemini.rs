//! The fast path for Gemini `Content` objects: `{role, parts: [{functionCall: {name, args, id?}} |
//! {functionResponse: {name, response, id?}} | {text} ...]}`, both as a bare or wrapped message
//! and inside a `generateContent` response (`candidates[].content`). Mirrors `gemini.parts` and
//! `_candidates` of stream_pairer/core/formats (gemini.py, __init__.py): the REST API's camelCase
//! and the Python SDK's snake_case spellings, ids optional (id-less results pair FIFO by name).
//! A value Python would refuse (a dead letter) returns Err, so Python words the dead letter.

use crate::fields::{as_id, as_name, field, get, present, scalar, Part};
use crate::scan::{self, Member};

/// `gemini.parts(content)`: the tool events of a content object's `parts` (absent/null: none).
pub fn parts<'a>(b: &'a [u8], content: &[Member<'a>]) -> Result<Vec<Part<'a>>, &'static str> {
    let Some(items) = present(content, b, b"parts") else {
        return Ok(Vec::new());
    };
    if b[items.start] != b'[' {
        return Err("field_type");
    }
    let mut out = Vec::new();
    for (s, e) in scan::elements(b, items.start).ok_or("not_canonical")? {
        if b[s] != b'{' {
            return Err("field_type");
        }
        let pm = scan::members(b, s).ok_or("not_canonical")?;
        // Python: `p.get("functionCall")`, and the snake_case key only when that is None.
        let call = present(&pm, b, b"functionCall").or_else(|| present(&pm, b, b"function_call"));
        if let Some(fc) = call {
            if b[fc.start] != b'{' {
                return Err("field_type");
            }
            let fm = scan::members(b, fc.start).ok_or("not_canonical")?;
            out.push(Part {
                is_call: true,
                id: as_id(scalar(b, get(&fm, b"id")))?,
                name: as_name(scalar(b, get(&fm, b"name")), true)?,
                payload: field(b, &fm, b"args").into(),
                is_error: b"",
                block: &b[s..e],
                format: b"gemini",
            });
            continue;
        }
        let response =
            present(&pm, b, b"functionResponse").or_else(|| present(&pm, b, b"function_response"));
        if let Some(fr) = response {
            if b[fr.start] != b'{' {
                return Err("field_type");
            }
            let fm = scan::members(b, fr.start).ok_or("not_canonical")?;
            let response = get(&fm, b"response");
            let payload = field(b, &fm, b"response");
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
                id: as_id(scalar(b, get(&fm, b"id")))?,
                name: as_name(scalar(b, get(&fm, b"name")), false)?,
                payload: payload.into(),
                is_error,
                block: &b[s..e],
                format: b"gemini",
            });
        }
    }
    Ok(out)
}

/// `_candidates`: the parts of every candidate's `content` (a candidate without one, e.g.
/// blocked by a safety filter, has none).
pub fn candidates<'a>(b: &'a [u8], c: &Member) -> Result<Vec<Part<'a>>, &'static str> {
    if b[c.start] != b'[' {
        return Err("field_type");
    }
    let mut out = Vec::new();
    for (s, _) in scan::elements(b, c.start).ok_or("not_canonical")? {
        if b[s] != b'{' {
            return Err("field_type");
        }
        let cm = scan::members(b, s).ok_or("not_canonical")?;
        let Some(content) = present(&cm, b, b"content") else {
            continue;
        };
        if b[content.start] != b'{' {
            return Err("field_type");
        }
        let ctm = scan::members(b, content.start).ok_or("not_canonical")?;
        out.extend(parts(b, &ctm)?);
    }
    Ok(out)
}
