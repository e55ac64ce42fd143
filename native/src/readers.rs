//! The compiled readers, called from the Python format layer (issue 23: each shape has one reader).
//!
//! The fast path reads a record straight from its bytes; a record it leaves to Python (a wrapped
//! event, bytes orjson would re-encode, a record-level field it does not read, a dead letter to
//! word) still holds shapes only the compiled readers know. `read_parts` hands such a shape's
//! object to its reader as canonical JSON (`orjson.dumps` of the decoded object: a
//! normalisation, not a reader) and returns what the reader found, for formats/native_parts.py
//! to turn into the format layer's `Part` tuples.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyTuple};

use crate::fields::decline::Decline;
use crate::fields::Part;
use crate::messages::Args;
use crate::scan::{self, Member};

/// The parts `shape`'s reader finds in `data` (one JSON object in orjson's form; `prefix` is its
/// JSON path in the record, for the dead letter's wording): a list of `(is_call, id, name,
/// payload JSON, is_error, (block start, block end), format)`, or `(reason, detail)` when the
/// object is a dead letter. ValueError: an unknown shape, or data that is not such an object.
#[pyfunction]
fn read_parts<'py>(
    py: Python<'py>,
    shape: &str,
    data: &[u8],
    prefix: &str,
) -> PyResult<Bound<'py, PyAny>> {
    if data.first() != Some(&b'{') {
        return Err(PyValueError::new_err("read_parts reads one JSON object"));
    }
    let mut m: Vec<Member> = Vec::with_capacity(16);
    let (end, _index) = scan::value_indexed(data, 0, Some(&mut m));
    if end.is_none() {
        // Nested deeper than the fast path reads: the members, unchecked (the bytes are
        // orjson's), for the fields a reader looks at; the format layer refuses the block.
        m = scan::members(data, 0).ok_or_else(|| PyValueError::new_err("unreadable object"))?;
    }
    let whole = (0, data.len());
    let found: Result<Vec<Part>, Decline> = match shape {
        "canonical" => crate::canonical::part(data, &m, data, prefix).map(|p| vec![p]),
        "mcp" => crate::mcp::parse(data, &m, whole, prefix),
        "bedrock" => crate::bedrock::block(data, &m, whole, prefix, None).map(Vec::from_iter),
        "anthropic" | "claude_code" => {
            let fmt: &'static [u8] = if shape == "anthropic" {
                b"anthropic"
            } else {
                b"claude_code"
            };
            let found = crate::messages::anthropic::block(data, &m, whole, prefix, None, fmt);
            found.map(Vec::from_iter)
        }
        "gemini" => crate::gemini::parts(data, &m, prefix),
        "openai_chat_calls" => match crate::fields::present(&m, data, b"tool_calls") {
            Some(tc) => crate::messages::chat::calls(data, tc, prefix, Args::AsGiven),
            None => Ok(Vec::new()),
        },
        "openai_chat_result" => crate::messages::chat::result(data, &m, whole, prefix),
        "openai_legacy_call" => match crate::fields::present(&m, data, b"function_call") {
            Some(fc) => crate::messages::chat::legacy_call(data, fc, whole, prefix, Args::AsGiven),
            None => Ok(Vec::new()),
        },
        "openai_legacy_result" => crate::messages::chat::legacy_result(data, &m, whole, prefix),
        "openai_responses" => {
            crate::messages::responses::item(data, &m, whole, prefix, None, Args::AsGiven)
        }
        "gemini_candidates" => match crate::fields::present(&m, data, b"candidates") {
            Some(c) => crate::gemini::candidates(data, c, prefix),
            None => Ok(Vec::new()),
        },
        _ => {
            return Err(PyValueError::new_err(format!(
                "no compiled reader of {shape:?}"
            )))
        }
    };
    match found {
        Ok(parts) => {
            let base = data.as_ptr() as usize;
            let items = parts.into_iter().map(|p| {
                let at = p.block.as_ptr() as usize - base;
                let is_error: Option<bool> = match p.is_error {
                    b"true" => Some(true),
                    b"false" => Some(false),
                    _ => None,
                };
                let payload = PyBytes::new(py, &p.payload);
                let format = std::str::from_utf8(p.format).unwrap_or("");
                (
                    p.is_call,
                    p.id,
                    p.name,
                    payload,
                    is_error,
                    (at, at + p.block.len()),
                    format,
                )
                    .into_pyobject(py)
            });
            let list = PyList::empty(py);
            for item in items {
                list.append(item?)?;
            }
            Ok(list.into_any())
        }
        Err(Decline::Dead(_, reason, detail)) => {
            Ok(PyTuple::new(py, [reason, &detail])?.into_any())
        }
        Err(Decline::Pass(reason)) => Err(PyValueError::new_err(format!(
            "not a {shape} object the reader claims ({reason})"
        ))),
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(read_parts, m)?)?;
    Ok(())
}
