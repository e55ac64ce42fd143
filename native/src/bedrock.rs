//! The fast path for AWS Bedrock Converse content blocks: `{"toolUse": {toolUseId, name, input}}`
//! and `{"toolResult": {toolUseId, content, status}}` in a message's `content` array (bare,
//! wrapped, or in a Converse response's `output.message`). Mirrors `bedrock.block` and the
//! untyped-block branch of `anthropic.blocks` (stream_pairer/core/formats): Bedrock blocks have
//! no `type`, which is how they are told from Anthropic blocks in the same position. A content
//! array mixing both kinds, or a value Python would refuse, returns Err (read by Python).

use crate::fields::{as_id, as_name, field, get, present, scalar, Part};
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
        if let Some(u) = present(&bm, b, b"toolUse") {
            if b[u.start] != b'{' {
                return Err("field_type");
            }
            let um = scan::members(b, u.start).ok_or("not_canonical")?;
            out.push(Part {
                is_call: true,
                id: as_id(scalar(b, get(&um, b"toolUseId")))?,
                name: as_name(scalar(b, get(&um, b"name")), true)?,
                payload: field(b, &um, b"input").into(),
                is_error: b"",
                block: &b[s..e],
                format: b"bedrock",
            });
        } else if let Some(r) = present(&bm, b, b"toolResult") {
            if b[r.start] != b'{' {
                return Err("field_type");
            }
            let rm = scan::members(b, r.start).ok_or("not_canonical")?;
            let is_error: &[u8] = match get(&rm, b"status").map(|x| &b[x.start..x.end]) {
                None | Some(b"null") => b"null",
                Some(b"\"error\"") => b"true",
                Some(st) if st[0] == b'"' => b"false",
                Some(_) => return Err("field_type"),
            };
            out.push(Part {
                is_call: false,
                id: as_id(scalar(b, get(&rm, b"toolUseId")))?,
                name: None,
                payload: field(b, &rm, b"content").into(),
                is_error,
                block: &b[s..e],
                format: b"bedrock",
            });
        }
    }
    Ok(out)
}
