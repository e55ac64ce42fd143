//! `stream_pairer._native`: the compiled pairing core (see README "Compiled core").
//!
//! Python sees one class, `Core`: raw record bytes in, encoded output records (bytes) out. A
//! record the fast path does not read returns None from `feed`; the Python format layer then
//! parses it and passes each event to `process` as pre-encoded JSON fragments, so both paths
//! share one pairing state.

mod batch;
mod bedrock;
mod canonical;
mod engine;
mod envelope;
mod event;
mod fields;
mod gemini;
mod mcp;
mod messages;
mod out;
mod pairid;
mod probes;
mod pycarry;
mod pyout;
mod pytag;
mod readers;
mod scan;
mod tagging;
#[cfg(test)]
mod tests;
mod text;
mod verdict;
mod vocab;

use indexmap::IndexMap;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};
use rustc_hash::{FxHashMap, FxHashSet};

use pyout::{consumed_offset, counter};

use engine::{Config, Engine, Out};
use event::Event;
use fields::FormatCfg;

#[pyclass(unsendable, module = "stream_pairer._native")]
struct Core {
    engine: Engine,
    fmt: FormatCfg,
    fast_records: u64,
    fallthrough: IndexMap<&'static str, u64>,
    events: IndexMap<&'static str, u64>,
    events_by_format: IndexMap<String, u64>,
    /// Reused between calls: one buffer for all output records of a call.
    out: Out,
    records: u64,
    /// Whether call / result sides carry `raw` (`EngineConfig.raw`, decided by vocab.RawMode).
    raw_sides: (bool, bool),
    fallback: Option<PyObject>,
    dumps: PyObject,
    /// Set (with the engine's tagger) by `set_tagging`: tagging is on.
    tag_hooks: Option<pytag::TagHooks>,
    /// `OutputMeta` (core/model.py) when routed (`set_routing`): each output is then returned as
    /// `(record bytes, kind, conversation id, OutputMeta)`, so the sidecar never decodes it.
    meta_cls: Option<PyObject>,
    /// The PipelineObserver's bound methods (`set_observer`): records read, evictions.
    on_read: Option<PyObject>,
    on_evict: Option<PyObject>,
    /// The pipeline's RecordInfo, and whether the Python path left anything in it: a record read
    /// here carries no markers (no events means the Python path), so it only has to be cleared.
    info: Option<PyObject>,
    #[pyo3(get, set)]
    info_dirty: bool,
}

#[pymethods]
impl Core {
    #[new]
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (*, call_timeout_ms, result_grace_ms, conversation_ttl_ms, max_conversations,
        max_calls_per_conversation, max_held_bytes, max_closed_ids_per_conversation, max_closed_ids,
        conversation_fields, max_record_bytes, held_cost, max_id_bytes=vocab::DEFAULT_MAX_ID_BYTES,
        raw_sides=(true, true)))]
    fn new(
        call_timeout_ms: f64,
        result_grace_ms: f64,
        conversation_ttl_ms: f64,
        max_conversations: usize,
        max_calls_per_conversation: usize,
        max_held_bytes: i64,
        max_closed_ids_per_conversation: usize,
        max_closed_ids: usize,
        conversation_fields: Vec<String>,
        max_record_bytes: usize,
        held_cost: (f64, i64),
        max_id_bytes: usize,
        raw_sides: (bool, bool),
        py: Python<'_>,
    ) -> PyResult<Self> {
        let dumps = py.import("orjson")?.getattr("dumps")?.unbind();
        let conversation_paths = conversation_fields
            .iter()
            .map(|f| {
                let mut parts = f.split('.').map(str::to_owned);
                let first = parts.next().unwrap_or_default();
                (first, parts.collect())
            })
            .collect();
        Ok(Core {
            engine: Engine::new(Config {
                call_timeout_ms,
                result_grace_ms,
                conversation_ttl_ms,
                max_conversations,
                max_calls_per_conversation,
                max_held_bytes,
                max_closed_ids_per_conversation,
                max_closed_ids,
                held_bytes_per_input_byte: held_cost.0,
                held_bytes_per_event: held_cost.1,
            }),
            fmt: FormatCfg {
                conversation_paths,
                max_record_bytes,
                max_id_bytes,
            },
            fast_records: 0,
            fallthrough: IndexMap::new(),
            events: IndexMap::new(),
            events_by_format: IndexMap::new(),
            out: Out::default(),
            records: 0,
            raw_sides,
            fallback: None,
            dumps,
            tag_hooks: None,
            meta_cls: None,
            on_read: None,
            on_evict: None,
            info: None,
            info_dirty: false,
        })
    }

    /// One raw record: `Pipeline.feed`'s signature, the encoded output records as the result.
    /// A record the fast path does not read is counted in `fallthrough` by reason and passed,
    /// with its encoded source, to the fallback set by `set_fallback` (the Python format layer),
    /// whose result is returned. The whole call runs here: no Python frame on the fast path.
    ///
    /// `replay_blocks` / `replay_clocks` are `Pipeline.feed`'s replay mode (a checkpointed
    /// rebuild): only the events at those blocks are processed again, each after its
    /// conversation's checkpointed clock is restored, and nothing about the input is counted.
    #[pyo3(signature = (raw, source, *, key=None, arrival_ms=None, replay_blocks=None, replay_clocks=None))]
    #[allow(clippy::too_many_arguments)]
    fn feed<'py>(
        slf: &Bound<'py, Self>,
        raw: &[u8],
        source: &Bound<'py, PyAny>,
        key: Option<&str>,
        arrival_ms: Option<f64>,
        replay_blocks: Option<Bound<'py, PyAny>>,
        replay_clocks: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        let replay = match &replay_blocks {
            Some(b) if !b.is_none() => {
                let blocks: FxHashSet<i64> = b.extract()?;
                let clocks: FxHashMap<i64, f64> = match &replay_clocks {
                    Some(c) if !c.is_none() => c.extract()?,
                    _ => FxHashMap::default(),
                };
                Some((blocks, clocks))
            }
            _ => None,
        };
        let (reason, src) = {
            let mut me = slf.borrow_mut();
            if replay.is_none() {
                me.records += 1;
            }
            me.engine.current_offset = if me.meta_cls.is_some() {
                consumed_offset(source)
            } else {
                None
            };
            let src = me.encode_source(source)?;
            // An id, tool name or conversation id over --max-id-bytes is the Python layer's dead
            // letter (formats._check_id_lengths): hand such a record over rather than re-word it.
            let parsed = canonical::parse(raw, &src, key, &me.fmt).and_then(|events| {
                let limit = me.fmt.max_id_bytes;
                let long = events.iter().any(|ev| {
                    ev.conversation_id.len() > limit
                        || ev.id.as_ref().is_some_and(|x| x.len() > limit)
                        || ev.name.as_ref().is_some_and(|x| x.len() > limit)
                });
                if long {
                    Err("long_id")
                } else {
                    Ok(events)
                }
            });
            match parsed {
                Ok(mut events) => {
                    if me.info_dirty {
                        if let Some(info) = &me.info {
                            info.bind(py).call_method0("clear")?;
                        }
                        me.info_dirty = false;
                    }
                    if let Some(hooks) = &me.tag_hooks {
                        for ev in &mut events {
                            pytag::prepare(py, ev, hooks, None)?; // the side still has its raw
                        }
                    }
                    let mut out = std::mem::take(&mut me.out);
                    out.clear();
                    let (mut calls, mut results, mut fmt) = (0usize, 0usize, "");
                    if let Some((blocks, clocks)) = &replay {
                        for mut ev in events {
                            if blocks.contains(&ev.block) {
                                if !me.keeps_raw(ev.is_call) {
                                    ev.without_raw();
                                }
                                if let Some(&c) = clocks.get(&ev.block) {
                                    me.engine.restore_clock(&ev.conversation_id, c);
                                }
                                me.engine.process(ev, arrival_ms, &mut out);
                            }
                        }
                    } else {
                        me.fast_records += 1;
                        for mut ev in events {
                            if !me.keeps_raw(ev.is_call) {
                                ev.without_raw();
                            }
                            me.count_event(ev.is_call, ev.format);
                            if ev.is_call {
                                calls += 1;
                            } else {
                                results += 1;
                            }
                            fmt = ev.format;
                            me.engine.process(ev, arrival_ms, &mut out);
                        }
                    }
                    let list = me.emit(py, &out);
                    me.out = out;
                    me.report_evictions(py)?;
                    if replay.is_none() {
                        if let Some(f) = &me.on_read {
                            f.bind(py).call1((fmt, calls, results))?;
                        }
                    }
                    return Ok(list?.into_any());
                }
                Err(reason) => (reason, src),
            }
        };
        let fallback = {
            let mut me = slf.borrow_mut();
            if replay.is_none() {
                *me.fallthrough.entry(reason).or_insert(0) += 1;
            }
            me.fallback.as_ref().map(|f| f.clone_ref(py))
        };
        match fallback {
            Some(f) => f.bind(py).call1((
                PyBytes::new(py, raw),
                source,
                key,
                arrival_ms,
                PyBytes::new(py, &src),
                replay_blocks,
                replay_clocks,
            )),
            None => Err(pyo3::exceptions::PyRuntimeError::new_err(
                "no fallback set for records the fast path does not read",
            )),
        }
    }

    /// The callable for records the fast path does not read: `fallback(raw, source, key,
    /// arrival_ms, encoded_source, replay_blocks, replay_clocks) -> list` (what `feed` returns).
    fn set_fallback(&mut self, fallback: PyObject) {
        self.fallback = Some(fallback);
    }

    /// Routed outputs: every entry point returns `(bytes, kind, conversation id, meta_cls(...))`
    /// per output, and held events keep their consumed offset for the commit rule.
    fn set_routing(&mut self, meta_cls: PyObject) {
        self.meta_cls = Some(meta_cls);
        self.out.with_meta = true;
    }

    /// A PipelineObserver: told of each record the fast path reads and of each eviction.
    fn set_observer(&mut self, observer: &Bound<'_, PyAny>) -> PyResult<()> {
        self.on_read = Some(observer.getattr("observe_record_read")?.unbind());
        self.on_evict = Some(observer.getattr("observe_eviction")?.unbind());
        self.engine.log_evictions = true;
        Ok(())
    }

    /// The RecordInfo the Python path fills; the fast path clears it when `info_dirty`.
    fn set_info(&mut self, info: PyObject) {
        self.info = Some(info);
    }

    /// Evictions logged since the last call, (events, limit), oldest first (the Python path).
    fn take_evictions(&mut self) -> Vec<(u64, &'static str)> {
        std::mem::take(&mut self.engine.evict_log)
    }

    fn restore_clock(&mut self, conversation_id: &str, clock_ms: f64) {
        self.engine.restore_clock(conversation_id, clock_ms);
    }

    fn end_restore(&mut self) {
        self.engine.end_restore();
    }

    /// The oldest held event's consumed offset (None: nothing held).
    fn oldest_held_offset(&mut self) -> Option<Option<i64>> {
        self.engine.oldest_held_offset()
    }

    /// (consumed offset, block) of every held event, oldest first.
    fn held_positions(&self) -> Vec<(Option<i64>, i64)> {
        self.engine.held_positions()
    }

    /// (consumed offset, block, clock): engine.py `held_clocks` by position.
    fn held_clocks(&self) -> Vec<(Option<i64>, i64, f64)> {
        self.engine.held_clocks()
    }

    /// engine.py `mark_clocks` by position: `held_clocks`, and the base of `held_changes`.
    fn mark_clocks(&mut self) -> Vec<(Option<i64>, i64, f64)> {
        self.engine.mark_clocks()
    }

    /// engine.py `held_changes` by position: (held, released, clocks set, clocks dropped) since
    /// the last mark or call.
    #[allow(clippy::type_complexity)]
    fn held_changes(
        &mut self,
    ) -> (
        Vec<(Option<i64>, i64)>,
        Vec<(Option<i64>, i64)>,
        Vec<(Option<i64>, i64, f64)>,
        Vec<(Option<i64>, i64)>,
    ) {
        self.engine.held_changes()
    }

    /// One event read by the Python format layer; payload, raw block and source come encoded
    /// (`raw` is ignored, and may be empty, on a side that does not keep it: `raw_sides`; with
    /// tagging on, a call's `raw` is always given: the tagger reads a custom tool call's type).
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (is_call, conversation_id, id, name, ts_ms, format, block, is_error, size,
        payload, raw, source, arrival_ms=None, count=true))]
    fn process<'py>(
        &mut self,
        py: Python<'py>,
        is_call: bool,
        conversation_id: String,
        id: Option<String>,
        name: Option<String>,
        ts_ms: Option<f64>,
        format: &str,
        block: i64,
        is_error: Option<bool>,
        size: usize,
        payload: &[u8],
        raw: &[u8],
        source: &[u8],
        arrival_ms: Option<f64>,
        count: bool,
    ) -> PyResult<Bound<'py, PyList>> {
        let mut side = Vec::with_capacity(payload.len() + raw.len() + source.len() + 160);
        fields::side_prefix(
            &mut side,
            id.as_deref(),
            name.as_deref(),
            format.as_bytes(),
            ts_ms,
            source,
            block,
        );
        if is_call {
            side.extend_from_slice(b",\"arguments\":");
            side.extend_from_slice(payload);
        } else {
            side.extend_from_slice(b",\"content\":");
            side.extend_from_slice(payload);
            side.extend_from_slice(match is_error {
                None => b",\"is_error\":null",
                Some(true) => b",\"is_error\":true",
                Some(false) => b",\"is_error\":false",
            });
        }
        let raw_at = side.len();
        if self.keeps_raw(is_call) {
            side.extend_from_slice(b",\"raw\":");
            side.extend_from_slice(raw);
        }
        side.push(b'}');
        if count {
            self.count_event(is_call, format);
        }
        let ev = Event {
            is_call,
            conversation_id,
            id,
            name,
            ts_ms,
            size,
            block,
            side,
            raw_at,
            source: source.to_vec(),
            format: "",
            tag: None,
        };
        let mut ev = ev;
        if let Some(hooks) = &self.tag_hooks {
            pytag::prepare(py, &mut ev, hooks, Some(raw))?;
        }
        let mut out = std::mem::take(&mut self.out);
        out.clear();
        self.engine.process(ev, arrival_ms, &mut out);
        let list = self.emit(py, &out);
        self.out = out;
        list
    }

    fn advance<'py>(&mut self, py: Python<'py>, now_ms: f64) -> PyResult<Bound<'py, PyList>> {
        let mut out = std::mem::take(&mut self.out);
        out.clear();
        self.engine.advance(now_ms, &mut out);
        let list = self.emit(py, &out);
        self.out = out;
        self.report_evictions(py)?;
        list
    }

    #[pyo3(signature = (reason=vocab::orphan_reason::SHUTDOWN, result_reason=None))]
    fn flush<'py>(
        &mut self,
        py: Python<'py>,
        reason: &str,
        result_reason: Option<&str>,
    ) -> PyResult<Bound<'py, PyList>> {
        let mut out = std::mem::take(&mut self.out);
        out.clear();
        self.engine.flush(reason, result_reason, &mut out);
        let list = self.emit(py, &out);
        self.out = out;
        self.report_evictions(py)?;
        list
    }

    /// Turns failure tagging on (tagging.FailureTagger's settings; see pytag.rs for the hooks).
    #[pyo3(signature = (*, max_calls, max_ms, max_hashes, max_total, decode_arguments, schema_check=None))]
    fn set_tagging(
        &mut self,
        max_calls: u64,
        max_ms: f64,
        max_hashes: usize,
        max_total: usize,
        decode_arguments: PyObject,
        schema_check: Option<PyObject>,
    ) {
        self.engine.tagger = Some(tagging::Tagger::new(tagging::Cfg {
            max_calls,
            max_ms,
            max_hashes,
            max_total,
        }));
        self.tag_hooks = Some(pytag::TagHooks {
            decode_arguments,
            schema_check,
            hasher: pytag::HashState::default(),
        });
    }

    /// A request start read by the Python format layer (`RecordInfo.requests`).
    #[pyo3(signature = (conversation_id, ts_ms=None))]
    fn mark_request(&mut self, conversation_id: &str, ts_ms: Option<f64>) {
        self.engine.mark_request(conversation_id, ts_ms);
    }

    /// Loop-cap crossings by cap ("calls", "time"): FailureTagger.crossings.
    #[getter]
    fn crossings<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        match &self.engine.tagger {
            Some(t) => counter(py, &t.crossings),
            None => Ok(PyDict::new(py)),
        }
    }
    /// Tagged output records by outcome and by failure (Summary.outcomes / failures).
    #[getter]
    fn outcomes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        match &self.engine.tagger {
            Some(t) => counter(py, &t.outcomes),
            None => Ok(PyDict::new(py)),
        }
    }
    #[getter]
    fn failures<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        match &self.engine.tagger {
            Some(t) => counter(py, &t.failures),
            None => Ok(PyDict::new(py)),
        }
    }
    /// FailureTagger.remembered_calls (0 when tagging is off).
    #[getter]
    fn remembered_calls(&self) -> usize {
        self.engine
            .tagger
            .as_ref()
            .map_or(0, tagging::Tagger::remembered_calls)
    }

    /// (container, entries, capacity, estimated table bytes) of every container the core keeps,
    /// per-conversation ones summed (engine_memory.rs), and the reused output buffers: for the
    /// memory benchmarks, to tell a container that keeps capacity it no longer needs from a bound.
    fn memory(&self) -> Vec<(&'static str, usize, usize, usize)> {
        self.memory_rows()
    }

    fn discard(&mut self) -> usize {
        self.engine.discard()
    }

    #[getter]
    fn held_bytes(&self) -> i64 {
        self.engine.held_bytes
    }
    #[getter]
    fn open_calls(&self) -> i64 {
        self.engine.open_calls
    }
    #[getter]
    fn pending_results(&self) -> i64 {
        self.engine.pending_results
    }
    #[getter]
    fn open_conversations(&self) -> usize {
        self.engine.open_conversations()
    }
    #[getter]
    fn closed_ids(&self) -> usize {
        self.engine.closed_ids()
    }
    #[getter]
    fn held_count(&self) -> usize {
        self.engine.held_count()
    }
    #[getter]
    fn processing_ms(&self) -> f64 {
        self.engine.processing_ms
    }
    #[getter]
    fn records(&self) -> u64 {
        self.records
    }
    #[getter]
    fn fast_records(&self) -> u64 {
        self.fast_records
    }
    #[getter]
    fn evictions<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        counter(py, &self.engine.evictions)
    }
    /// Output records by Summary label ("pair:id", "pair:fifo:name", "orphan_call:timeout", ...).
    #[getter]
    fn outputs<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        counter(py, &self.engine.counts)
    }
    /// Records handed to the Python format layer, by why the fast path did not read them.
    #[getter]
    fn fallthrough<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        counter(py, &self.fallthrough)
    }
    #[getter]
    fn events<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        counter(py, &self.events)
    }
    #[getter]
    fn events_by_format<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        counter(py, &self.events_by_format)
    }
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Core>()?;
    probes::register(m)?;
    batch::register(m)?;
    pycarry::register(m)?;
    Ok(())
}
