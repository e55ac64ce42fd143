//! AWS Bedrock Converse content blocks: `{"toolUse": {toolUseId, name, input}}` and
//! `{"toolResult": {toolUseId, content, status}}` in a message's `content` array (bare, wrapped,
//! or in a Converse response's `output.message`). `block` is the one reader of a Bedrock block
//! (issue 23): the fast path calls it, and so does the Python format layer (formats/bedrock.py,
//! through readers.rs) for the blocks it meets; its refusals are worded dead letters. Bedrock
//! blocks have no `type`, which is how they are told from Anthropic blocks in the same position;
//! `blocks` mirrors the untyped-block branch of `anthropic.blocks`: a content array mixing both
//! kinds, or a value Python would refuse, returns Err (read by Python).

use crate::fields::decline::{self, wrong_type, Decline};
use crate::fields::{field, get, present, Part};
use crate::scan::{self, Member};

/// What messages.rs's Anthropic reader returns on a block without a string `type`: the content
/// array is then read here.
pub const UNTYPED: &str = "untyped_block";

/// `anthropic.blocks(content)` for an array of untyped (Bedrock) blocks.
pub fn blocks<'a>(b: &'a [u8], content: &Member) -> Result<Vec<Part<'a>>, &'static str> {
    let mut out = Vec::new();
    for (s, e) in scan::elements(b, content.start).ok_or("not_canonical")? {
        if b[s] != b'{' {
            return Err("field_type");
        }
        let bm = scan::members(b, s).ok_or("not_canonical")?;
        match get(&bm, b"type").map(|t| b[t.start]) {
            None | Some(b'n') => {}
            Some(b'"') => return Err("mixed_blocks"), // an Anthropic block beside Bedrock ones
            Some(_) => return Err("field_type"),
        }
        if let Some(part) = block(b, &bm, (s, e), "", None).map_err(Decline::reason)? {
            out.push(part);
        }
    }
    Ok(out)
}

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
