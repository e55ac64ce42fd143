//! What the core hands Python: its output records (bytes, or routed tuples with their metadata),
//! counters as dicts, the events' lineage encoded as orjson would, and the observer's eviction
//! calls. The conversions between the engine's Rust values and Python objects, kept apart from
//! the `Core` class (lib.rs) that decides when to make them.

use indexmap::IndexMap;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyInt, PyList, PyString, PyTuple};

use crate::engine::{self, Out};
use crate::vocab::event_type::{TOOL_CALL, TOOL_RESULT};
use crate::{out, Core};

/// The offset a record was consumed at: `source["via"]["offset"]` under --repartition, else
/// `source["offset"]` (None for sources without one: file lines).
pub(crate) fn consumed_offset(source: &Bound<'_, PyAny>) -> Option<i64> {
    let d = source.downcast::<PyDict>().ok()?;
    let at = match d.get_item("via").ok().flatten() {
        Some(via) if !via.is_none() => via.downcast_into::<PyDict>().ok()?,
        _ => d.clone(),
    };
    at.get_item("offset").ok().flatten()?.extract::<i64>().ok()
}

fn to_list<'py>(py: Python<'py>, out: &Out) -> PyResult<Bound<'py, PyList>> {
    PyList::new(
        py,
        out.records()
            .collect::<Vec<_>>()
            .into_iter()
            .map(|r| PyBytes::new(py, r)),
    )
}

pub(crate) fn counter<'py, K: AsRef<str>, S>(
    py: Python<'py>,
    m: &IndexMap<K, u64, S>,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for (k, v) in m {
        d.set_item(k.as_ref(), *v)?;
    }
    Ok(d)
}

impl Core {
    /// The outputs of one entry point for Python: bytes, or routed tuples (see `meta_cls`).
    pub(crate) fn emit<'py>(&self, py: Python<'py>, out: &Out) -> PyResult<Bound<'py, PyList>> {
        let Some(cls) = &self.meta_cls else {
            return to_list(py, out);
        };
        let cls = cls.bind(py);
        let mut items = Vec::with_capacity(out.ends.len());
        for (rec, m) in out.records().zip(out.metas.iter()) {
            let meta = cls.call1((
                m.kind,
                m.label.as_str(),
                m.fifo_by.as_deref(),
                m.tool.as_deref(),
                m.outcome.as_deref(),
                m.failure.as_deref(),
                m.latency_ms,
            ))?;
            items.push(PyTuple::new(
                py,
                [
                    PyBytes::new(py, rec).into_any(),
                    PyString::new(py, m.kind).into_any(),
                    PyString::new(py, &m.conversation_id).into_any(),
                    meta,
                ],
            )?);
        }
        PyList::new(py, items)
    }

    /// Tells the observer of the evictions logged since the last call, in order.
    pub(crate) fn report_evictions(&mut self, py: Python<'_>) -> PyResult<()> {
        if self.engine.evict_log.is_empty() {
            return Ok(());
        }
        let log = std::mem::take(&mut self.engine.evict_log);
        if let Some(f) = &self.on_evict {
            for (n, limit) in log {
                f.bind(py).call1((n, limit))?;
            }
        }
        Ok(())
    }

    /// The source dict as orjson encodes it: written here for the usual lineage dicts (string
    /// keys, string or integer values), by orjson.dumps for anything else.
    pub(crate) fn encode_source(&self, source: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
        if let Ok(d) = source.downcast_exact::<PyDict>() {
            let mut v = Vec::with_capacity(64);
            v.push(b'{');
            let mut plain = true;
            for (i, (k, val)) in d.iter().enumerate() {
                let Ok(k) = k.downcast_exact::<PyString>() else {
                    plain = false;
                    break;
                };
                if i > 0 {
                    v.push(b',');
                }
                out::write_str(&mut v, k.to_str()?);
                v.push(b':');
                if let Ok(s) = val.downcast_exact::<PyString>() {
                    out::write_str(&mut v, s.to_str()?);
                } else if let (true, Ok(n)) =
                    (val.is_exact_instance_of::<PyInt>(), val.extract::<i64>())
                {
                    v.extend_from_slice(n.to_string().as_bytes());
                } else {
                    plain = false;
                    break;
                }
            }
            if plain {
                v.push(b'}');
                return Ok(v);
            }
        }
        let py = source.py();
        let encoded = self.dumps.bind(py).call1((source,))?;
        Ok(encoded.downcast::<PyBytes>()?.as_bytes().to_vec())
    }

    pub(crate) fn keeps_raw(&self, is_call: bool) -> bool {
        if is_call {
            self.raw_sides.0
        } else {
            self.raw_sides.1
        }
    }

    pub(crate) fn count_event(&mut self, is_call: bool, format: &str) {
        *self
            .events
            .entry(if is_call { TOOL_CALL } else { TOOL_RESULT })
            .or_insert(0) += 1;
        if let Some(n) = self.events_by_format.get_mut(format) {
            *n += 1;
        } else {
            self.events_by_format.insert(format.to_owned(), 1);
        }
    }

    pub(crate) fn memory_rows(&self) -> Vec<(&'static str, usize, usize, usize)> {
        let mut v: Vec<_> = self
            .engine
            .memory()
            .into_iter()
            .map(|u| (u.name, u.len, u.capacity, u.bytes))
            .collect();
        let o = &self.out;
        v.push(("out.buf", o.buf.len(), o.buf.capacity(), o.buf.capacity()));
        v.push((
            "out.ends",
            o.ends.len(),
            o.ends.capacity(),
            o.ends.capacity() * 8,
        ));
        v.push((
            "out.metas",
            o.metas.len(),
            o.metas.capacity(),
            o.metas.capacity() * std::mem::size_of::<engine::Meta>(),
        ));
        v
    }
}
