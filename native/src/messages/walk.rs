//! The walks over a record's arrays of tool blocks: a message's `content` array (Anthropic
//! blocks, Bedrock blocks, the Vercel AI SDK's parts) and a Responses response's `output` array.
//!
//! Each walk exists once (issue 23): the fast path (messages.rs, envelope.rs) calls it on a
//! record's bytes, and the Python format layer (formats/anthropic.py `blocks`, formats/openai.py
//! `responses_output`, through readers.rs) on an array it meets, so both decide alike which
//! element is refused, skipped or read, and by which reader. Refusals are worded as
//! formats/common.py words them (`prefix` is the array's JSON path in the record).

use super::{anthropic, responses, Args};
use crate::fields::decline::{wrong_type, Decline};
use crate::fields::{get, Part};
use crate::scan::{self, Member};

/// The `format` of a part the walk does not read: a Vercel AI SDK part (`tool-call` /
/// `tool-result`), whose reader is Python's (formats/vercel_ai.py); its `block` is the part.
pub const ELSEWHERE: &[u8] = b"";

/// The tool events of a `content` array (member `content`, an array), in order: typed blocks
/// by the Anthropic reader (`fmt`: `anthropic`, or `claude_code` in a Claude Code line),
/// untyped ones by the Bedrock reader, Vercel parts left to Python (`ELSEWHERE`).
pub fn content<'a>(
    b: &'a [u8],
    content: &Member,
    prefix: &str,
    fmt: &'static [u8],
) -> Result<Vec<Part<'a>>, Decline> {
    let mut out = Vec::new();
    let items = scan::elements(b, content.start).ok_or("not_canonical")?;
    for (i, (s, e)) in items.into_iter().enumerate() {
        if b[s] != b'{' {
            let expected = "a content block object";
            return Err(wrong_type(&b[s..e], prefix, Some(i), b"", expected));
        }
        let bm = scan::members(b, s).ok_or("not_canonical")?;
        let found = match get(&bm, b"type").map(|t| &b[t.start..t.end]) {
            None | Some(b"null") => crate::bedrock::block(b, &bm, (s, e), prefix, Some(i))?,
            Some(bt) if bt[0] != b'"' => {
                return Err(wrong_type(bt, prefix, Some(i), b"type", "a string"))
            }
            Some(bt) if anthropic::VERCEL_TYPES.contains(&bt) => Some(Part {
                is_call: false,
                id: None,
                name: None,
                payload: (&b"null"[..]).into(),
                is_error: b"",
                block: &b[s..e],
                format: ELSEWHERE,
            }),
            Some(_) => anthropic::block(b, &bm, (s, e), prefix, Some(i), fmt)?,
        };
        out.extend(found);
    }
    Ok(out)
}

/// The tool events of a Responses `output` array (member `output`, an array): each item of a
/// tool type by the Responses item reader (`args` as it says), other items skipped.
pub fn output<'a>(
    b: &'a [u8],
    output: &Member,
    prefix: &str,
    args: Args,
) -> Result<Vec<Part<'a>>, Decline> {
    let mut out = Vec::new();
    let items = scan::elements(b, output.start).ok_or("not_canonical")?;
    for (i, (s, e)) in items.into_iter().enumerate() {
        if b[s] != b'{' {
            return Err(wrong_type(&b[s..e], prefix, Some(i), b"", "an item object"));
        }
        let im = scan::members(b, s).ok_or("not_canonical")?;
        let typ = get(&im, b"type").map(|t| &b[t.start..t.end]);
        if typ.is_some_and(|t| responses::TOOL_ITEMS.contains(&t)) {
            out.extend(responses::item(b, &im, (s, e), prefix, Some(i), args)?);
        }
    }
    Ok(out)
}
