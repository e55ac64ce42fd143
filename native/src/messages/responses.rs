//! OpenAI Responses API tool items: `function_call` `{call_id, name, arguments}` /
//! `function_call_output` `{call_id, output}`, the `custom_tool_call` pair (`input`, plain text),
//! and `mcp_call` (a remote MCP call that holds its own output: one call and one result event
//! with the same id, the result failed when `error` is set). `item` is the one reader of an item
//! (issue 23): the fast path calls it on a top-level item, the Python format layer
//! (formats/openai.py `responses_item`, through readers.rs) on every item it meets (in an
//! `output` array, a wire exchange, a Codex or OpenAI Agents line); its refusals are worded.

use std::borrow::Cow;

use super::{call_arguments, Args};
use crate::fields::decline::{self, Decline};
use crate::fields::{field, get, present, Part};
use crate::scan::Member;

/// The item types that hold a tool event (`openai.RESPONSES_TOOL_ITEMS`), as JSON.
pub const TOOL_ITEMS: [&[u8]; 5] = [
    b"\"function_call\"",
    b"\"function_call_output\"",
    b"\"custom_tool_call\"",
    b"\"custom_tool_call_output\"",
    b"\"mcp_call\"",
];

/// The events of one item of a tool type (members `im`, bytes `at`; `prefix[index]` its JSON
/// path in the record); an item of another type is not claimed (`Decline::Pass`).
pub fn item<'a>(
    b: &'a [u8],
    im: &[Member],
    at: (usize, usize),
    prefix: &str,
    index: Option<usize>,
    args: Args,
) -> Result<Vec<Part<'a>>, Decline> {
    let block = &b[at.0..at.1];
    let t = get(im, b"type").map_or(&b"null"[..], |t| &b[t.start..t.end]);
    let arguments = |m: Option<&Member>| call_arguments(b, m, args);
    let call = |payload: Cow<'a, [u8]>, id, name| Part {
        is_call: true,
        id,
        name,
        payload,
        is_error: b"",
        block,
        format: b"openai_responses",
    };
    let id_of = |key: &[u8]| decline::id(b, get(im, key), prefix, index, key);
    let name = || decline::name(b, get(im, b"name"), prefix, index, b"name", true);
    match t {
        b"\"function_call\"" => {
            let id = id_of(b"call_id")?;
            let name = name()?;
            Ok(vec![call(arguments(get(im, b"arguments"))?, id, name)])
        }
        b"\"custom_tool_call\"" => {
            let id = id_of(b"call_id")?;
            let name = name()?;
            Ok(vec![call(field(b, im, b"input").into(), id, name)])
        }
        b"\"function_call_output\"" | b"\"custom_tool_call_output\"" => Ok(vec![Part {
            is_call: false,
            id: id_of(b"call_id")?,
            name: None,
            payload: field(b, im, b"output").into(),
            is_error: b"null",
            block,
            format: b"openai_responses",
        }]),
        b"\"mcp_call\"" => {
            let id = id_of(b"id")?;
            let name = name()?;
            let mut out = vec![call(
                arguments(get(im, b"arguments"))?,
                id.clone(),
                name.clone(),
            )];
            let result = match present(im, b, b"error") {
                Some(e) => Some((e, &b"true"[..])),
                None => present(im, b, b"output").map(|o| (o, &b"false"[..])),
            };
            if let Some((r, is_error)) = result {
                out.push(Part {
                    is_call: false,
                    id,
                    name,
                    payload: (&b[r.start..r.end]).into(),
                    is_error,
                    block,
                    format: b"openai_responses",
                });
            }
            Ok(out)
        }
        _ => Err(Decline::Pass("other_format")),
    }
}
