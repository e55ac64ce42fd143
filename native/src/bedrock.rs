//! AWS Bedrock Converse content blocks: `{"toolUse": {toolUseId, name, input}}` and
//! `{"toolResult": {toolUseId, content, status}}` in a message's `content` array (bare, wrapped,
//! or in a Converse response's `output.message`). `block` is the one reader of a Bedrock block
//! (issue 23): the content walk (messages/walk.rs) calls it for each block without a `type`
//! (which is how Bedrock blocks are told from Anthropic blocks in the same array), for the fast
//! path and for the Python format layer alike; its refusals are worded dead letters.

use crate::fields::decline::{self, wrong_type, Decline};
use crate::fields::{field, get, present, Part};
use crate::scan::{self, Member};

/// `bedrock.block(b, prefix, i)`: the event of one block (members `bm`, bytes `at`), if it holds
/// one (`toolUse` or `toolResult` present); `prefix[index]` is its JSON path in the record.
pub fn block<'a>(
    b: &'a [u8],
    bm: &[Member],
    at: (usize, usize),
    prefix: &str,
    index: Option<usize>,
) -> Result<Option<Part<'a>>, Decline> {
    let blk = &b[at.0..at.1];
    if let Some(u) = present(bm, b, b"toolUse") {
        if b[u.start] != b'{' {
            let v = &b[u.start..u.end];
            return Err(wrong_type(v, prefix, index, b"toolUse", "an object"));
        }
        let um = scan::members(b, u.start).ok_or("not_canonical")?;
        return Ok(Some(Part {
            is_call: true,
            id: decline::id(
                b,
                get(&um, b"toolUseId"),
                prefix,
                index,
                b"toolUse.toolUseId",
            )?,
            name: decline::name(b, get(&um, b"name"), prefix, index, b"toolUse.name", true)?,
            payload: field(b, &um, b"input").into(),
            is_error: b"",
            block: blk,
            format: b"bedrock",
        }));
    }
    let Some(r) = present(bm, b, b"toolResult") else {
        return Ok(None);
    };
    if b[r.start] != b'{' {
        let v = &b[r.start..r.end];
        return Err(wrong_type(v, prefix, index, b"toolResult", "an object"));
    }
    let rm = scan::members(b, r.start).ok_or("not_canonical")?;
    let is_error: &[u8] = match get(&rm, b"status").map(|x| &b[x.start..x.end]) {
        None | Some(b"null") => b"null",
        Some(b"\"error\"") => b"true",
        Some(st) if st[0] == b'"' => b"false",
        Some(st) => {
            let expected = "\"success\" or \"error\"";
            return Err(wrong_type(
                st,
                prefix,
                index,
                b"toolResult.status",
                expected,
            ));
        }
    };
    Ok(Some(Part {
        is_call: false,
        id: decline::id(
            b,
            get(&rm, b"toolUseId"),
            prefix,
            index,
            b"toolResult.toolUseId",
        )?,
        name: None,
        payload: field(b, &rm, b"content").into(),
        is_error,
        block: blk,
        format: b"bedrock",
    }))
}
