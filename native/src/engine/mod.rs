//! The pairing engine: a line-by-line port of stream_pairer/core/engine.py + state.py.
//!
//! The Python engine is the executable specification (tests/core/test_native_differential.py compares
//! the output bytes of both); the docstrings there explain the rules, the comments here only say
//! where the Rust data structures differ from the Python ones. Events arrive as pre-encoded JSON
//! fragments (`Event::side`), so an output record is a concatenation of bytes.
//!
//! Split by responsibility, each child module an `impl Engine` block over this module's state:
//! `held` (the state's data types), `rules` (what an arriving call or result does), `state`
//! (holding and releasing, the conversation LRU, the closed-id memory, the bounds and both kinds
//! of timers), `emit` (the output records and their counters), `changes` (checkpoint deltas) and
//! `memory` (container sizes for the benchmarks), `carry` (what `pair --state` carries besides held
//! events), with `byname` (a conversation's held events by
//! tool name, for FIFO pairing without a scan). This module keeps the configuration, the engine
//! itself and its entry points. The children depend on `held`, `emit` and `byname`, never on each
//! other.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap};

/// The maps here are keyed by conversation and call ids, which come from untrusted log data: the
/// hasher is keyed with a random seed per map (foldhash's fast variant), so ids crafted to collide
/// cannot make lookups linear (HashDoS), as they could with the unkeyed Fx hash. Not SipHash: it
/// cost 5 % of the loop. Output order never follows these maps' iteration order.
type Keyed = foldhash::fast::RandomState;
type HashMap<K, V> = std::collections::HashMap<K, V, Keyed>;
type IndexMap<K, V> = indexmap::IndexMap<K, V, Keyed>;

use crate::event::Event;
use crate::tagging::Tagger;

mod byname;
mod carry;
mod changes;
mod emit;
mod held;
mod memory;
mod rules;
mod state;

pub use emit::{Meta, Out};
use held::{Conv, HeldMap, Timer, NIL};

pub struct Config {
    pub call_timeout_ms: f64,
    pub result_grace_ms: f64,
    pub conversation_ttl_ms: f64,
    pub max_conversations: usize,
    pub max_calls_per_conversation: usize,
    pub max_held_bytes: i64,
    pub max_closed_ids_per_conversation: usize,
    pub max_closed_ids: usize,
    pub held_bytes_per_input_byte: f64,
    pub held_bytes_per_event: i64,
}

/// `engine.held_cost`, with the same float arithmetic so both engines evict at the same event; its
/// two constants come from engine.py (`Core(held_cost=...)`), never copied here.
fn held_cost(cfg: &Config, size: usize) -> i64 {
    (size as f64 * cfg.held_bytes_per_input_byte) as i64 + cfg.held_bytes_per_event
}

pub struct Engine {
    pub cfg: Config,
    slab: Vec<Option<Conv>>,
    free: Vec<usize>,
    by_id: HashMap<String, usize>,
    lru_head: usize,
    lru_tail: usize,
    held: HeldMap,
    // Processing-time timers (p_deadline, seq); empty until the first `advance`.
    heap: BinaryHeap<Reverse<Timer>>,
    closed: BTreeMap<u64, (usize, String)>,
    stamp: u64,
    seq: u64,
    pub processing_ms: f64,
    p_origin_ms: f64,
    next_sweep_ms: f64,
    pub held_bytes: i64,
    /// Characters of the conversation ids and closed call ids kept (engine.py `id_bytes`): input
    /// can make them large and they outlive their events, so they count against max_held_bytes.
    pub id_bytes: i64,
    pub open_calls: i64,
    pub pending_results: i64,
    pub evictions: IndexMap<&'static str, u64>,
    /// Output records by Summary label: "pair:id", "pair:fifo:name", "orphan_call:timeout", ...
    pub counts: IndexMap<String, u64>,
    label: String,
    /// Failure tagging (engine.py `tagger`): None when off.
    pub tagger: Option<Tagger>,
    /// Each eviction as it happened, (events, limit), for the pipeline's observer (the Python
    /// engine's `on_evict` calls); drained by the caller, kept only while `log_evictions`.
    pub evict_log: Vec<(u64, &'static str)>,
    pub log_evictions: bool,
    /// The input offset of the record being processed (set by the caller), stored with what it holds.
    pub current_offset: Option<i64>,
    /// Conversation clocks from a checkpoint, applied when the conversation is first seen again.
    restored_clocks: HashMap<String, f64>,
    /// Changes since the last checkpoint mark (changes.rs).
    changes: changes::Changes,
    /// What an imported memory keeps until `end_restore` (carry.rs).
    restore: carry::Restore,
}

impl Engine {
    pub fn new(cfg: Config) -> Self {
        Engine {
            cfg,
            slab: Vec::new(),
            free: Vec::new(),
            by_id: HashMap::default(),
            lru_head: NIL,
            lru_tail: NIL,
            held: HeldMap::default(),
            heap: BinaryHeap::new(),
            closed: BTreeMap::new(),
            stamp: 0,
            seq: 0,
            processing_ms: f64::NEG_INFINITY,
            p_origin_ms: f64::NEG_INFINITY,
            next_sweep_ms: f64::NEG_INFINITY,
            held_bytes: 0,
            id_bytes: 0,
            open_calls: 0,
            pending_results: 0,
            evictions: IndexMap::default(),
            counts: IndexMap::default(),
            label: String::new(),
            tagger: None,
            evict_log: Vec::new(),
            log_evictions: false,
            current_offset: None,
            restored_clocks: HashMap::default(),
            changes: changes::Changes::default(),
            restore: carry::Restore::default(),
        }
    }

    // ------------------------------------------------------------------ entry points

    pub fn process(&mut self, ev: Event, now_ms: Option<f64>, out: &mut Out) {
        let mut ts = ev.ts_ms.or(now_ms);
        let conv = self.conversation(&ev.conversation_id, out);
        self.note_touch(conv);
        let clock = self.conv(conv).clock_ms;
        if ts.is_none() {
            // A replayed held event without a time takes the one it had when first read (carry.rs).
            let carried = if self.restore.undated.is_empty() {
                None
            } else {
                self.carried_time(conv, &ev)
            };
            match carried {
                Some(t) => ts = t,
                None if clock != f64::NEG_INFINITY => ts = Some(clock),
                None => {}
            }
        }
        if ev.is_call {
            self.on_call(conv, ev, ts, out);
        } else {
            self.on_result(conv, ev, ts, out);
        }
        self.enforce_bytes(out);
        if let Some(ts) = ts {
            let c = self.conv_mut(conv);
            if ts > c.clock_ms {
                c.clock_ms = ts;
                if matches!(c.timers.peek(), Some(Reverse(Timer(d, _))) if *d <= ts) {
                    self.fire_conversation(conv, ts, out);
                }
            }
        }
    }

    pub fn flush(&mut self, reason: &str, result_reason: Option<&str>, out: &mut Out) {
        let seqs: Vec<u64> = self.held.seqs().collect();
        for seq in seqs {
            if let Some(h) = self.held.get(&seq) {
                let r = match result_reason {
                    Some(rr) if !h.ev.is_call => rr,
                    _ => reason,
                };
                self.emit_orphan_seq(seq, r, out);
            }
        }
        self.restored_clocks = HashMap::default();
        self.clear_convs();
    }

    /// engine.py `restore_clock`: a checkpointed conversation clock, set before its held events
    /// are replayed; fires nothing.
    pub fn restore_clock(&mut self, cid: &str, clock_ms: f64) {
        if let Some(&i) = self.by_id.get(cid) {
            let c = self.conv_mut(i);
            c.clock_ms = c.clock_ms.max(clock_ms);
            self.note_touch(i);
        } else {
            let e = self
                .restored_clocks
                .entry(cid.to_owned())
                .or_insert(f64::NEG_INFINITY);
            *e = e.max(clock_ms);
        }
    }

    pub fn end_restore(&mut self) {
        self.restored_clocks = HashMap::default();
        self.end_carry();
    }

    /// The oldest held event's input offset (None: nothing held, or held without an offset).
    pub fn oldest_held_offset(&mut self) -> Option<Option<i64>> {
        let seq = self.held.oldest()?;
        Some(self.held.get(&seq).and_then(|h| h.offset))
    }

    /// (offset, block) of every held event, oldest first.
    pub fn held_positions(&self) -> Vec<(Option<i64>, i64)> {
        self.held
            .seqs()
            .filter_map(|s| self.held.get(&s))
            .map(|h| (h.offset, h.ev.block))
            .collect()
    }

    /// engine.py `held_clocks`, as (offset, block, clock) of each conversation's first held event.
    pub fn held_clocks(&self) -> Vec<(Option<i64>, i64, f64)> {
        let mut first: IndexMap<usize, (Option<i64>, i64)> = IndexMap::default();
        let mut rebuilt: BTreeSet<usize> = BTreeSet::new();
        for s in self.held.seqs() {
            let Some(h) = self.held.get(&s) else { continue };
            first.entry(h.conv).or_insert((h.offset, h.ev.block));
            if h.ts_ms == Some(self.conv(h.conv).clock_ms) {
                rebuilt.insert(h.conv);
            }
        }
        first
            .into_iter()
            .filter(|(c, _)| !rebuilt.contains(c))
            .map(|(c, (o, b))| (o, b, self.conv(c).clock_ms))
            .filter(|(_, _, clock)| *clock != f64::NEG_INFINITY)
            .collect()
    }

    fn evicted(&mut self, n: u64, limit: &'static str) {
        *self.evictions.entry(limit).or_insert(0) += n;
        if self.log_evictions {
            self.evict_log.push((n, limit));
        }
    }

    pub fn discard(&mut self) -> usize {
        self.restored_clocks = HashMap::default();
        let n = self.held.len();
        self.held.clear();
        self.clear_convs();
        self.held_bytes = 0;
        self.id_bytes = 0;
        self.open_calls = 0;
        self.pending_results = 0;
        n
    }

    fn clear_convs(&mut self) {
        for c in std::mem::take(&mut self.slab).into_iter().flatten() {
            self.note_removed(&c);
        }
        self.id_bytes = 0;
        self.slab.clear();
        self.free.clear();
        self.by_id.clear();
        self.lru_head = NIL;
        self.lru_tail = NIL;
        self.closed.clear();
        self.heap.clear();
        self.restore = carry::Restore::default();
    }

    /// engine.py `mark_request`: a new request starts in this conversation (the tagger's loop caps
    /// count from here); one the engine does not hold yet is remembered by the tagger.
    pub fn mark_request(&mut self, conversation_id: &str, ts_ms: Option<f64>) {
        let Some(tagger) = self.tagger.as_mut() else {
            return;
        };
        match self.by_id.get(conversation_id) {
            Some(&i) => {
                let c = self.slab[i].as_mut().expect("live conversation");
                tagger.on_request(&mut c.tags, ts_ms);
            }
            None => tagger.on_pending_request(conversation_id, ts_ms),
        }
    }

    /// The tagger's `on_call`, first thing when a call arrives (engine.py `_on_call`).
    fn tag_call(&mut self, conv: usize, call: &mut Event) {
        if self.tagger.is_none() {
            return;
        }
        let Some(tag) = call.tag.as_deref_mut() else {
            return;
        };
        if self.restore.active() && self.carried_tag(conv, call.id.as_deref(), tag) {
            return; // a replayed held call (`pair --state`): tagged when it first arrived
        }
        let Some(tagger) = self.tagger.as_mut() else {
            return;
        };
        let c = self.slab[conv].as_mut().expect("live conversation");
        let forget = tagger.on_call(
            &mut c.tags,
            conv,
            &c.cid,
            call.id.as_deref(),
            call.ts_ms,
            tag,
        );
        if forget {
            if let Some(f) = tagger.pop_oldest() {
                let tags = self.slab.get_mut(f.slot).and_then(Option::as_mut);
                if let Some(t) = tags.and_then(|c| c.tags.as_deref_mut()) {
                    t.forget(&f);
                }
            }
        }
    }

    pub fn open_conversations(&self) -> usize {
        self.by_id.len()
    }
    pub fn closed_ids(&self) -> usize {
        self.closed.len()
    }
    pub fn held_count(&self) -> usize {
        self.held.len()
    }
}
