//! Why a reader refuses a record, worded as the dead letter says it.
//!
//! A reader that owns a shape (canonical.rs, mcp.rs) is the only reader of it (issue 23): the
//! fast path and the Python format layer (through `readers.rs`) both call it. Its refusals carry
//! the dead letter's reason and detail, worded as formats/common.py words every other reader's
//! (`wrong_type`, `missing`, JSON paths relative to the record); `Pass` is a record the reader
//! does not claim at all (another shape, or a value the fast path leaves to Python).

use super::{as_id, as_name, scalar};
use crate::scan::Member;
use crate::vocab::dead_letter_reason::{MISSING_FIELD, WRONG_TYPE};

pub enum Decline {
    /// Not this reader's record (the fast path counts the reason in `fallthrough`).
    Pass(&'static str),
    /// A dead letter of this reader's shape: (the fast path's name for it in `fallthrough`, the
    /// dead letter's reason, its detail).
    Dead(&'static str, &'static str, String),
}

impl From<&'static str> for Decline {
    fn from(reason: &'static str) -> Self {
        Decline::Pass(reason)
    }
}

impl Decline {
    /// The reason alone: what the fast path counts before it hands the record to Python.
    pub fn reason(self) -> &'static str {
        match self {
            Decline::Pass(r) | Decline::Dead(r, _, _) => r,
        }
    }
}

/// `common.json_type` of a canonical JSON value: its type's name, with the article.
pub fn json_type(v: &[u8]) -> &'static str {
    match v.first() {
        None | Some(b'n') => "null",
        Some(b't' | b'f') => "a boolean",
        Some(b'"') => "a string",
        Some(b'[') => "an array",
        Some(b'{') => "an object",
        _ if v.iter().any(|c| matches!(c, b'.' | b'e' | b'E')) => "a number",
        _ => "an integer",
    }
}

/// `common.where(prefix, index, field)`: the JSON path of the offending value; `field` is the
/// member's name as bytes (the readers' spelling of it). The helpers below take Python's
/// `(prefix, index, field)` too, and build the path only when they refuse.
pub fn at(prefix: &str, index: Option<usize>, field: &[u8]) -> String {
    let field = String::from_utf8_lossy(field);
    let mut p = prefix.strip_suffix('.').unwrap_or(prefix).to_owned();
    if let Some(i) = index {
        p = format!("{p}[{i}]");
    }
    if !field.is_empty() {
        p = if p.is_empty() {
            field.into_owned()
        } else {
            format!("{p}.{field}")
        };
    }
    if p.is_empty() {
        "the record".to_owned()
    } else {
        p
    }
}

/// `common.wrong_type(value, prefix, index, field, expected)`.
pub fn wrong_type(
    v: &[u8],
    prefix: &str,
    index: Option<usize>,
    field: &[u8],
    expected: &str,
) -> Decline {
    let detail = format!(
        "{} is {}, expected {expected}",
        at(prefix, index, field),
        json_type(v)
    );
    Decline::Dead("field_type", WRONG_TYPE, detail)
}

/// `common.missing(prefix, index, field, what)`; `pass` names it in `fallthrough`.
pub fn missing(
    pass: &'static str,
    prefix: &str,
    index: Option<usize>,
    field: &[u8],
    what: &str,
) -> Decline {
    let detail = format!("{} is missing: {what}", at(prefix, index, field));
    Decline::Dead(pass, MISSING_FIELD, detail)
}

fn value<'a>(b: &'a [u8], m: Option<&Member>) -> &'a [u8] {
    m.map_or(b"null", |x| &b[x.start..x.end])
}

/// `common.as_id(value, prefix, index, field)`, worded.
pub fn id(
    b: &[u8],
    m: Option<&Member>,
    prefix: &str,
    index: Option<usize>,
    field: &[u8],
) -> Result<Option<String>, Decline> {
    as_id(scalar(b, m)).map_err(|_| wrong_type(value(b, m), prefix, index, field, "a string id"))
}

/// `common.as_name(value, prefix, index, field, required)`, worded.
pub fn name(
    b: &[u8],
    m: Option<&Member>,
    prefix: &str,
    index: Option<usize>,
    field: &[u8],
    required: bool,
) -> Result<Option<String>, Decline> {
    match as_name(scalar(b, m), required) {
        Ok(n) => Ok(n),
        Err("missing_name") => Err(missing(
            "missing_name",
            prefix,
            index,
            field,
            "a tool call needs a tool name",
        )),
        Err(_) => Err(wrong_type(
            value(b, m),
            prefix,
            index,
            field,
            "a string tool name",
        )),
    }
}

/// `common.as_flag(value, prefix, index, field)` as encoded JSON (`null`, `true`, `false`).
pub fn flag(
    b: &[u8],
    m: Option<&Member>,
    prefix: &str,
    index: Option<usize>,
    field: &[u8],
) -> Result<&'static [u8], Decline> {
    match value(b, m) {
        b"null" => Ok(b"null"),
        b"true" => Ok(b"true"),
        b"false" => Ok(b"false"),
        v => Err(wrong_type(v, prefix, index, field, "a boolean")),
    }
}
