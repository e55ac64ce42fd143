//! Module functions that expose single pieces of the core (the encoder, the canonical check, the
//! result classifier) to the Python tests that pin them to their Python counterparts.

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use crate::vocab::{Value, CONSTANTS, SETS};
use crate::{out, scan, verdict};

/// A float as orjson writes it (exposed for the tests that pin the encoder to orjson).
#[pyfunction]
fn dumps_float<'py>(py: Python<'py>, x: f64) -> Bound<'py, PyBytes> {
    let mut v = Vec::new();
    out::write_f64(&mut v, x);
    PyBytes::new(py, &v)
}

/// Whether `raw` is one JSON value exactly as orjson would re-encode it (tests).
#[pyfunction]
fn is_canonical(raw: &[u8]) -> bool {
    std::str::from_utf8(raw).is_ok() && scan::value(raw, 0, 0, None) == Some(raw.len())
}

/// A string as orjson writes it (tests).
#[pyfunction]
fn dumps_str<'py>(py: Python<'py>, s: &str) -> Bound<'py, PyBytes> {
    let mut v = Vec::new();
    out::write_str(&mut v, s);
    PyBytes::new(py, &v)
}

/// `tagging.classify_result` of a JSON payload, as (outcome, why, text, code) (tests).
#[pyfunction]
#[pyo3(signature = (content, is_error=None))]
fn classify_result(
    content: &[u8],
    is_error: Option<bool>,
) -> PyResult<(&'static str, String, Option<String>, Option<String>)> {
    let value: serde_json::Value = serde_json::from_slice(content)
        .map_err(|e| pyo3::exceptions::PyValueError::new_err(e.to_string()))?;
    let v = verdict::classify_result(&value, is_error);
    Ok((
        v.outcome,
        v.why.into_owned(),
        v.text.map(|t| t.into_owned()),
        v.code,
    ))
}

/// `tagging.input_rejection` of a text result (tests: the rejection patterns against Python's).
#[pyfunction]
fn input_rejection(text: String) -> Option<String> {
    verdict::input_rejection(&verdict::Verdict {
        outcome: crate::vocab::outcome::OK,
        why: std::borrow::Cow::Borrowed(""),
        text: Some(std::borrow::Cow::Owned(text)),
        code: None,
    })
}

/// The vocabulary as this build of the core holds it (build.rs generated it from vocab.json):
/// `{"sets": {name: [values]}, "constants": {name: value}}`, read from the generated Rust
/// constants themselves, so tests can compare what the core uses with the definition.
#[pyfunction]
fn vocabulary(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let sets = PyDict::new(py);
    for (name, values) in SETS {
        sets.set_item(name, values.to_vec())?;
    }
    let constants = PyDict::new(py);
    for (name, value) in CONSTANTS {
        match value {
            Value::Int(n) => constants.set_item(name, n)?,
            Value::Float(x) => constants.set_item(name, x)?,
            Value::Str(s) => constants.set_item(name, s)?,
            Value::List(l) => constants.set_item(name, l.to_vec())?,
        }
    }
    let d = PyDict::new(py);
    d.set_item("sets", sets)?;
    d.set_item("constants", constants)?;
    Ok(d)
}

/// Adds the functions above to the extension module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(dumps_float, m)?)?;
    m.add_function(wrap_pyfunction!(dumps_str, m)?)?;
    m.add_function(wrap_pyfunction!(is_canonical, m)?)?;
    m.add_function(wrap_pyfunction!(classify_result, m)?)?;
    m.add_function(wrap_pyfunction!(input_rejection, m)?)?;
    m.add_function(wrap_pyfunction!(vocabulary, m)?)?;
    crate::readers::register(m) // the compiled readers, for the Python format layer
}
