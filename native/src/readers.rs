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
use pyo3::types::{PyList, PyTuple};

use crate::fields::decline::Decline;
use crate::fields::Part;
use crate::messages::Args;
use crate::scan::{self, Member};

/// The parts `shape`'s reader finds in `data` (one JSON object in orjson's form; `prefix[index]`
/// is its JSON path in the record, for the dead letter's wording, as formats/common.py `where`): a list of `(is_call, id, name,
/// payload JSON, is_error, (block start, block end), format)`, or `(reason, detail)` when the
/// object is a dead letter. ValueError: an unknown shape, or data that is not such an object.
#[pyfunction]
#[pyo3(signature = (shape, data, prefix, index=None))]
fn read_parts<'py>(
    py: Python<'py>,
    shape: &str,
    data: &[u8],
    prefix: &str,
    index: Option<usize>,
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
        "bedrock" => crate::bedrock::block(data, &m, whole, prefix, index).map(Vec::from_iter),
        "anthropic" | "claude_code" => {
            let fmt: &'static [u8] = if shape == "anthropic" {
                b"anthropic"
            } else {
                b"claude_code"
            };
            let found = crate::messages::anthropic::block(data, &m, whole, prefix, index, fmt);
            found.map(Vec::from_iter)
        }
        "gemini" => crate::gemini::parts(data, &m, prefix),
        // `{"content": [...]}` / `{"output": [...]}`: an array walked (messages/walk.rs); `prefix`
        // is the array's path, and a Vercel AI SDK part comes back with format "" (read by Python).
        "anthropic_content" | "claude_code_content" => {
            let fmt: &'static [u8] = if shape == "anthropic_content" {
                b"anthropic"
            } else {
                b"claude_code"
            };
            match crate::fields::present(&m, data, b"content") {
                Some(c) if data[c.start] == b'[' => {
                    crate::messages::walk::content(data, c, prefix, fmt)
                }
                _ => Err(Decline::Pass("other_format")),
            }
        }
        "openai_responses_output" => match crate::fields::present(&m, data, b"output") {
            Some(o) if data[o.start] == b'[' => {
                crate::messages::walk::output(data, o, prefix, Args::AsGiven)
            }
            _ => Err(Decline::Pass("other_format")),
        },
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
            crate::messages::responses::item(data, &m, whole, prefix, index, Args::AsGiven)
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
            let list = PyList::empty(py);
            let mut path = Path {
                spans: vec![whole],
                steps: Vec::new(),
            };
            for p in parts {
                let is_error: Option<bool> = match p.is_error {
                    b"true" => Some(true),
                    b"false" => Some(false),
                    _ => None,
                };
                if matches!(p.payload, std::borrow::Cow::Owned(_)) {
                    return Err(PyValueError::new_err("a payload not read from the object"));
                }
                let at = within(data, p.block).unwrap_or(whole);
                let block = PyTuple::new(py, path.to(py, data, at)?)?;
                let payload = match within(data, &p.payload) {
                    Some(v) => Some(PyTuple::new(py, path.to(py, data, v)?)?),
                    None => None, // an absent member: null
                };
                let format = std::str::from_utf8(p.format).unwrap_or("");
                let item = (p.is_call, p.id, p.name, payload, is_error, block, format);
                list.append(item.into_pyobject(py)?)?;
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

/// Where `part` lies in `data`, if it is a slice of it.
fn within(data: &[u8], part: &[u8]) -> Option<(usize, usize)> {
    let (base, at) = (data.as_ptr() as usize, part.as_ptr() as usize);
    (at >= base && at + part.len() <= base + data.len())
        .then(|| (at - base, at - base + part.len()))
}

/// The path (member keys and element indexes) from the object read to a value in it, for Python
/// to take that value from the object it holds instead of decoding it again. The last path found
/// is kept (`spans[k]`: where its first k steps lead): the parts of one array share their
/// steps down to it, which are then not found again.
struct Path<'py> {
    spans: Vec<(usize, usize)>,
    steps: Vec<Bound<'py, PyAny>>,
}

impl<'py> Path<'py> {
    fn to(
        &mut self,
        py: Python<'py>,
        data: &[u8],
        target: (usize, usize),
    ) -> PyResult<&[Bound<'py, PyAny>]> {
        let lost = || PyValueError::new_err("a part outside the object read");
        let inside = |(a, z): (usize, usize)| a <= target.0 && target.1 <= z;
        let k = self
            .spans
            .iter()
            .rposition(|&x| inside(x))
            .ok_or_else(lost)?;
        self.spans.truncate(k + 1);
        self.steps.truncate(k);
        let (mut s, mut e) = self.spans[k];
        while (s, e) != target {
            match data[s] {
                b'{' => {
                    let m = scan::members(data, s).ok_or_else(lost)?;
                    let x = m
                        .iter()
                        .find(|x| inside((x.start, x.end)))
                        .ok_or_else(lost)?;
                    let key = scan::unescape(x.key).into_pyobject(py)?.into_any();
                    self.steps.push(key);
                    (s, e) = (x.start, x.end);
                }
                b'[' => {
                    let el = scan::elements(data, s).ok_or_else(lost)?;
                    let i = el.iter().position(|&x| inside(x)).ok_or_else(lost)?;
                    self.steps.push(i.into_pyobject(py)?.into_any());
                    (s, e) = el[i];
                }
                _ => return Err(lost()),
            }
            self.spans.push((s, e));
        }
        Ok(&self.steps)
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(read_parts, m)?)?;
    Ok(())
}
