//! `export_memory` / `import_memory`: the engine's memory (engine/carry.rs) across the Python
//! boundary, for `pair --state` (adapters/state.py). Module functions over a `Core`, not methods,
//! so lib.rs keeps its size; the tagger's hash seed travels with the memory (pytag.rs `HashState`).

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};

use crate::pytag::HashState;
use crate::Core;

/// The memory of `core` as JSON bytes (call it before `flush`, which forgets it).
#[pyfunction]
fn export_memory<'py>(core: &Bound<'py, Core>) -> Bound<'py, PyBytes> {
    let c = core.borrow();
    let seed = c.tag_hooks.as_ref().map(|h| h.hasher.seed());
    PyBytes::new(core.py(), &c.engine.export_memory(seed))
}

/// Puts an exported memory back into `core` before the held events are replayed (and before any
/// new input); `end_restore` finishes it. Returns the records this run's limits evict doing so
/// (none when they are the previous run's). ValueError: not a memory this core reads.
#[pyfunction]
fn import_memory<'py>(core: &Bound<'py, Core>, data: &[u8]) -> PyResult<Bound<'py, PyList>> {
    let py = core.py();
    let mut c = core.borrow_mut();
    let mut out = std::mem::take(&mut c.out);
    out.clear();
    let seed = c.engine.import_memory(data, &mut out);
    let list = seed.map_err(PyValueError::new_err).and_then(|seed| {
        if let (Some(seed), Some(hooks)) = (seed, c.tag_hooks.as_mut()) {
            hooks.hasher = HashState::with_seed(seed);
        }
        c.emit(py, &out)
    });
    c.out = out;
    c.report_evictions(py)?;
    list
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(export_memory, m)?)?;
    m.add_function(wrap_pyfunction!(import_memory, m)?)?;
    Ok(())
}
