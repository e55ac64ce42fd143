//! The pairing engine: a line-by-line port of stream_pairer/core/engine.py + state.py.
//!
//! The Python engine is the executable specification (tests/test_native_differential.py compares
//! the output bytes of both); the docstrings there explain the rules, the comments here only say
//! where the Rust data structures differ from the Python ones. Events arrive as pre-encoded JSON
//! fragments (`Event::side`), so an output record is a concatenation of bytes.

use std::cmp::{Ordering, Reverse};
use std::collections::{BTreeMap, BTreeSet, BinaryHeap, VecDeque};

/// The maps here are keyed by conversation and call ids, which come from untrusted log data: the
/// hasher is keyed with a random seed per map (foldhash's fast variant), so ids crafted to collide
/// cannot make lookups linear (HashDoS), as they could with the unkeyed Fx hash. Not SipHash: it
/// cost 5 % of the loop. Output order never follows these maps' iteration order.
type Keyed = foldhash::fast::RandomState;
type HashMap<K, V> = std::collections::HashMap<K, V, Keyed>;
type IndexMap<K, V> = indexmap::IndexMap<K, V, Keyed>;

use crate::out::{write_f64, write_opt_str, write_str, write_ts};
use crate::pairid::pair_id;
use crate::tagging::{ConvTags, EventTag, Tagger};

#[path = "byname.rs"]
mod byname;
#[path = "changes.rs"]
mod changes;
#[path = "engine_memory.rs"]
mod memory;

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

const IDLE_SWEEP_EVERY_MS: f64 = 1_000.0;
/// `engine.held_cost`, with the same float arithmetic so both engines evict at the same event; its
/// two constants come from engine.py (`Core(held_cost=...)`), never copied here.
fn held_cost(cfg: &Config, size: usize) -> i64 {
    (size as f64 * cfg.held_bytes_per_input_byte) as i64 + cfg.held_bytes_per_event
}

/// One normalized event. `side` is the encoded `ToolEvent.to_side()` object, `source` the encoded
/// lineage dict: both are fixed when the event is read.
pub struct Event {
    pub is_call: bool,
    pub conversation_id: String,
    pub id: Option<String>,
    pub name: Option<String>,
    pub ts_ms: Option<f64>,
    pub size: usize,
    pub block: i64,
    pub side: Vec<u8>,
    /// Where `,"raw":` starts in `side`: `without_raw` cuts the side there (`--raw`).
    pub raw_at: usize,
    pub source: Vec<u8>,
    /// The fast path's format name (for the events-by-format count); "" from `process`.
    pub format: &'static str,
    /// What the failure tagger knows of this event alone (None when tagging is off).
    pub tag: Option<Box<EventTag>>,
}

impl Event {
    /// Drop the side's `raw` (`ToolEvent.to_side(with_raw=False)`): what `--raw call|omit` asks for.
    pub fn without_raw(&mut self) {
        if self.raw_at < self.side.len() {
            self.side.truncate(self.raw_at);
            self.side.push(b'}');
            self.side.shrink_to_fit(); // a held call must not keep the raw block's room
            self.raw_at = self.side.len();
        }
    }
}

/// `state.Held`: `ts_ms` None when no event time is known (then on no event-time timer),
/// `deadline_ms` fired by the conversation's clock, `p_deadline_ms` by processing time.
struct Held {
    ev: Box<Event>,
    ts_ms: Option<f64>,
    deadline_ms: f64,
    p_deadline_ms: f64,
    conv: usize,
    /// The input offset the event was consumed at (`Engine::current_offset` when it was held):
    /// what the sidecar's commit rule and checkpoint read of held events.
    offset: Option<i64>,
}

impl Held {
    fn bare(ev: Event, ts_ms: Option<f64>, conv: usize) -> Held {
        Held {
            ev: Box::new(ev),
            ts_ms,
            deadline_ms: f64::INFINITY,
            p_deadline_ms: f64::INFINITY,
            conv,
            offset: None,
        }
    }
}

/// A timer (deadline, seq), ordered as Python orders the tuple (deadlines are never NaN).
struct Timer(f64, u64);
impl PartialEq for Timer {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for Timer {}
impl PartialOrd for Timer {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Timer {
    fn cmp(&self, o: &Self) -> Ordering {
        // As Python compares floats (-0.0 == 0.0), not total_cmp.
        self.0
            .partial_cmp(&o.0)
            .unwrap_or(Ordering::Equal)
            .then(self.1.cmp(&o.1))
    }
}

/// How a remembered closed id ended (engine.py `Conversation.closed` values): a later result
/// carrying it is a `duplicate_result` (paired by id), a `fifo_conflict` (paired by position with an
/// id-less result, so that FIFO pair is probably wrong) or a `late_result` (emitted as an orphan).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Closed {
    ById,
    ByFifo,
    Orphaned,
}

struct Conv {
    cid: String,
    calls_by_id: HashMap<String, u64>,
    open_calls: BTreeSet<u64>,
    // Results waiting for their call, by id. Nothing reads this map in order (eviction and flush
    // go by seq), so a released id is swap-removed: O(1), where `shift_remove` moved every later
    // entry and made 100,000 unknown-id results in one conversation quadratic (issue 27).
    pending: IndexMap<String, Vec<u64>>,
    // How many seqs `pending` holds in all: `held_count` runs on every held event, so it must not
    // sum the lists (issue 27: that scan was the other quadratic part).
    pending_n: usize,
    // id -> (how it closed, stamp in the engine-wide order). Its order is not read: the oldest is
    // the first of `closed_order`, so an id leaves by swap_remove, O(1), where shift_remove moved
    // every later id (O(--max-closed-ids-per-conversation) per closed call past the cap).
    closed: IndexMap<String, (Closed, u64)>,
    // The stamps of `closed`, oldest first (the id of a stamp is in `Engine::closed`).
    closed_order: BTreeSet<u64>,
    // Id-less results that came before any call they could pair with, by seq (arrival order).
    early: BTreeSet<u64>,
    // `open_calls` and `early` by tool name: FIFO pairing without a scan (byname.rs).
    open_by_name: byname::ByName,
    early_by_name: byname::ByName,
    // The newest event time seen in this conversation; it alone fires `timers`.
    clock_ms: f64,
    timers: BinaryHeap<Reverse<Timer>>,
    // Processing time of its last event: the TTL counts from it.
    last_p_ms: f64,
    // LRU list links (slab indices; usize::MAX = none)
    prev: usize,
    next: usize,
    // The failure tagger's state (tagging.py `Conversation.tags`): dropped with the conversation.
    tags: Option<Box<ConvTags>>,
    // Its clock entry in the last checkpoint, and whether it is in `changes.dirty` (changes.rs).
    ck: changes::Ck,
    ck_dirty: bool,
}

const NIL: usize = usize::MAX;
const TIMERS_REBUILD_OVER: usize = 32;

impl Conv {
    fn holds_nothing(&self) -> bool {
        self.open_calls.is_empty() && self.pending.is_empty() && self.early.is_empty()
    }
    fn held_count(&self) -> usize {
        self.open_calls.len() + self.pending_n + self.early.len()
    }
    fn held_seqs(&self) -> Vec<u64> {
        let mut v: Vec<u64> = self.open_calls.iter().copied().collect();
        for w in self.pending.values() {
            v.extend_from_slice(w);
        }
        v.extend(self.early.iter().copied());
        v
    }
}

/// Every held event by seq, oldest first: the Python engine's `_held` dict (insertion order = seq
/// order). A hash map for lookups plus the seqs in arrival order; a released seq stays in the order
/// until it reaches the front or a compaction (when dead entries outnumber live ones), so each
/// operation is O(1) amortized instead of a B-tree's O(log n) cache misses at a million entries.
#[derive(Default)]
struct HeldMap {
    map: HashMap<u64, Held>,
    order: VecDeque<u64>,
}

impl HeldMap {
    fn insert(&mut self, seq: u64, h: Held) {
        self.map.insert(seq, h);
        self.order.push_back(seq);
    }
    fn get(&self, seq: &u64) -> Option<&Held> {
        self.map.get(seq)
    }
    fn remove(&mut self, seq: &u64) -> Option<Held> {
        let h = self.map.remove(seq)?;
        if self.order.len() > 2 * self.map.len() + 1024 {
            let map = &self.map;
            self.order.retain(|s| map.contains_key(s));
        }
        Some(h)
    }
    fn oldest(&mut self) -> Option<u64> {
        while let Some(&s) = self.order.front() {
            if self.map.contains_key(&s) {
                return Some(s);
            }
            self.order.pop_front();
        }
        None
    }
    /// The held seqs, oldest first.
    fn seqs(&self) -> impl Iterator<Item = u64> + '_ {
        self.order
            .iter()
            .copied()
            .filter(|s| self.map.contains_key(s))
    }
    fn len(&self) -> usize {
        self.map.len()
    }
    fn clear(&mut self) {
        self.map.clear();
        self.order.clear();
    }
}

/// What routing and metrics need of one output record (Python's `OutputMeta` plus the
/// conversation id, the output key), kept beside the encoded record when `Out::with_meta` is set,
/// so the sidecar never decodes what the core encoded. `label` is the pair's `match` or the
/// orphan's `reason`; `outcome`/`failure` stay None until failure tagging is ported.
pub struct Meta {
    pub kind: &'static str,
    pub label: String,
    pub fifo_by: Option<String>,
    pub conversation_id: String,
    pub tool: Option<String>,
    pub outcome: Option<String>,
    pub failure: Option<String>,
    pub latency_ms: Option<f64>,
}

/// What one entry point emitted: the encoded records back to back in `buf`, each ending at `ends[i]`
/// (and, with `with_meta`, each one's `Meta` in `metas[i]`).
#[derive(Default)]
pub struct Out {
    pub buf: Vec<u8>,
    pub ends: Vec<usize>,
    pub metas: Vec<Meta>,
    pub with_meta: bool,
}

impl Out {
    pub fn clear(&mut self) {
        self.buf.clear();
        self.ends.clear();
        self.metas.clear();
    }
    /// The encoded records, in order.
    pub fn records(&self) -> impl Iterator<Item = &[u8]> {
        let mut start = 0;
        self.ends.iter().map(move |&e| {
            let r = &self.buf[start..e];
            start = e;
            r
        })
    }
    fn end_record(&mut self) {
        self.ends.push(self.buf.len());
    }
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
        }
    }

    // ------------------------------------------------------------------ entry points

    pub fn process(&mut self, ev: Event, now_ms: Option<f64>, out: &mut Out) {
        let mut ts = ev.ts_ms.or(now_ms);
        let conv = self.conversation(&ev.conversation_id, out);
        self.note_touch(conv);
        let clock = self.conv(conv).clock_ms;
        if ts.is_none() && clock != f64::NEG_INFINITY {
            ts = Some(clock);
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
        let Some(tagger) = self.tagger.as_mut() else {
            return;
        };
        let Some(tag) = call.tag.as_deref_mut() else {
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

    // ------------------------------------------------------------------ rules

    fn on_call(&mut self, conv: usize, mut call: Event, ts: Option<f64>, out: &mut Out) {
        if self.tagger.is_some() {
            self.tag_call(conv, &mut call);
        }
        if let Some(cid) = call.id.clone() {
            let c = self.conv(conv);
            if let Some(&old) = c.calls_by_id.get(&cid) {
                self.emit_orphan_seq(old, "superseded", out);
            }
            let c = self.conv(conv);
            if let Some(waiting) = c.pending.get(&cid) {
                if !waiting.is_empty() {
                    let first = waiting[0];
                    let res = self.release(first).expect("held result");
                    self.next_seq(); // the Python engine numbers the late call's Held too
                    self.emit_pair(Held::bare(call, ts, conv), res, "id", None, out);
                    let dups: Vec<u64> = self
                        .conv(conv)
                        .pending
                        .get(&cid)
                        .cloned()
                        .unwrap_or_default();
                    for d in dups {
                        self.emit_orphan_seq(d, "duplicate_result", out);
                    }
                    return;
                }
            }
            if self.conv(conv).closed.contains_key(&cid) {
                self.drop_closed(conv, &cid);
            }
        }
        if !self.conv(conv).early.is_empty() {
            if let Some((seq, by)) = self.early_candidate(conv, call.name.as_deref()) {
                // Its id-less result came first (written late, or reordered): a FIFO pair.
                let res = self.release(seq).expect("held early result");
                self.next_seq();
                self.emit_pair(Held::bare(call, ts, conv), res, "fifo", Some(by), out);
                return;
            }
        }
        if self.conv(conv).open_calls.len() >= self.cfg.max_calls_per_conversation {
            self.evicted(1, "calls_per_conversation");
            let first = *self.conv(conv).open_calls.iter().next().unwrap();
            self.emit_orphan_seq(first, "evicted", out);
        }
        let id = call.id.clone();
        let name = call.name.clone();
        let seq = self.hold(call, conv, ts, self.cfg.call_timeout_ms);
        let c = self.conv_mut(conv);
        c.open_calls.insert(seq);
        c.open_by_name.insert(name.as_deref(), seq);
        if let Some(id) = id {
            c.calls_by_id.insert(id, seq);
        }
        self.open_calls += 1;
    }

    fn on_result(&mut self, conv: usize, result: Event, ts: Option<f64>, out: &mut Out) {
        if let Some(rid) = result.id.clone() {
            if let Some(&call) = self.conv(conv).calls_by_id.get(&rid) {
                let call_held = self.release(call).expect("held call");
                self.next_seq();
                self.emit_pair(call_held, Held::bare(result, ts, conv), "id", None, out);
                return;
            }
            if let Some(&(how, _)) = self.conv(conv).closed.get(&rid) {
                self.next_seq();
                let res = Held::bare(result, ts, conv);
                let reason = match how {
                    Closed::ById => "duplicate_result",
                    Closed::ByFifo => "fifo_conflict",
                    Closed::Orphaned => "late_result",
                };
                self.emit_orphan(res, reason, out);
                return;
            }
            let seq = self.hold(result, conv, ts, self.cfg.result_grace_ms);
            self.conv_mut(conv)
                .pending
                .entry(rid)
                .or_default()
                .push(seq);
            self.conv_mut(conv).pending_n += 1;
            self.pending_results += 1;
            return;
        }
        if let Some((seq, by)) = self.fifo_candidate(conv, result.name.as_deref()) {
            let call_held = self.release(seq).expect("held call");
            self.next_seq();
            self.emit_pair(
                call_held,
                Held::bare(result, ts, conv),
                "fifo",
                Some(by),
                out,
            );
            return;
        }
        // No call it could pair with yet: wait the grace for one, as a result with an unknown id does.
        let name = result.name.clone();
        let seq = self.hold(result, conv, ts, self.cfg.result_grace_ms);
        let c = self.conv_mut(conv);
        c.early.insert(seq);
        c.early_by_name.insert(name.as_deref(), seq);
        self.pending_results += 1;
    }

    /// The held id-less result a new call takes: the mirror of `fifo_candidate`.
    fn early_candidate(&self, conv: usize, name: Option<&str>) -> Option<(u64, &'static str)> {
        let c = self.conv(conv);
        let first = *c.early.iter().next()?;
        match name {
            None => Some((first, "order")),
            Some(name) => c.early_by_name.candidate(name),
        }
    }

    fn fifo_candidate(&self, conv: usize, name: Option<&str>) -> Option<(u64, &'static str)> {
        let c = self.conv(conv);
        let first = *c.open_calls.iter().next()?;
        match name {
            None => Some((first, "order")),
            Some(name) => c.open_by_name.candidate(name),
        }
    }

    // ------------------------------------------------------------------ state keeping

    fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    fn conv(&self, i: usize) -> &Conv {
        self.slab[i].as_ref().expect("live conversation")
    }
    fn conv_mut(&mut self, i: usize) -> &mut Conv {
        self.slab[i].as_mut().expect("live conversation")
    }

    fn lru_unlink(&mut self, i: usize) {
        let (p, n) = {
            let c = self.conv(i);
            (c.prev, c.next)
        };
        if p == NIL {
            self.lru_head = n
        } else {
            self.conv_mut(p).next = n
        }
        if n == NIL {
            self.lru_tail = p
        } else {
            self.conv_mut(n).prev = p
        }
    }

    fn lru_push_back(&mut self, i: usize) {
        let tail = self.lru_tail;
        {
            let c = self.conv_mut(i);
            c.prev = tail;
            c.next = NIL;
        }
        if tail == NIL {
            self.lru_head = i
        } else {
            self.conv_mut(tail).next = i
        }
        self.lru_tail = i;
    }

    fn remove_conv(&mut self, i: usize) -> Conv {
        self.lru_unlink(i);
        let c = self.slab[i].take().expect("live conversation");
        self.note_removed(&c);
        self.by_id.remove(&c.cid);
        self.free.push(i);
        c
    }

    fn conversation(&mut self, cid: &str, out: &mut Out) -> usize {
        let i = match self.by_id.get(cid) {
            Some(&i) => {
                if self.lru_tail != i {
                    self.lru_unlink(i);
                    self.lru_push_back(i);
                }
                i
            }
            None => {
                if self.by_id.len() >= self.cfg.max_conversations {
                    let lru = self.lru_head;
                    self.evict_conversation(lru, out);
                    self.forget_closed(lru);
                    self.remove_conv(lru);
                }
                self.id_bytes += cid.chars().count() as i64;
                let conv = Conv {
                    cid: cid.to_owned(),
                    calls_by_id: HashMap::default(),
                    open_calls: BTreeSet::new(),
                    open_by_name: byname::ByName::default(),
                    early_by_name: byname::ByName::default(),
                    pending: IndexMap::default(),
                    pending_n: 0,
                    closed: IndexMap::default(),
                    closed_order: BTreeSet::new(),
                    early: BTreeSet::new(),
                    clock_ms: if self.restored_clocks.is_empty() {
                        f64::NEG_INFINITY
                    } else {
                        self.restored_clocks
                            .remove(cid)
                            .unwrap_or(f64::NEG_INFINITY)
                    },
                    timers: BinaryHeap::new(),
                    last_p_ms: f64::NEG_INFINITY,
                    prev: NIL,
                    next: NIL,
                    tags: None,
                    ck: None,
                    ck_dirty: false,
                };
                let i = match self.free.pop() {
                    Some(i) => {
                        self.slab[i] = Some(conv);
                        i
                    }
                    None => {
                        self.slab.push(Some(conv));
                        self.slab.len() - 1
                    }
                };
                self.by_id.insert(cid.to_owned(), i);
                self.lru_push_back(i);
                i
            }
        };
        let p = self.processing_ms;
        self.conv_mut(i).last_p_ms = p;
        i
    }

    /// The Python engine pops the conversation from its LRU map first and emits after; the
    /// conversation stays addressable here until the caller removes it, which emits the same.
    fn evict_conversation(&mut self, i: usize, out: &mut Out) {
        let mut seqs = self.conv(i).held_seqs();
        seqs.sort_unstable();
        if !seqs.is_empty() {
            self.evicted(seqs.len() as u64, "conversations");
        }
        for s in seqs {
            self.emit_orphan_seq(s, "evicted", out);
        }
    }

    /// Keeps an event on two timers of `timeout`: its conversation's event time (from its own
    /// event time) and processing time (from now; none while processing time is unknown).
    fn hold(&mut self, ev: Event, conv: usize, ts: Option<f64>, timeout: f64) -> u64 {
        let seq = self.next_seq();
        let deadline = ts.map_or(f64::INFINITY, |t| t + timeout);
        let p_now = self.processing_ms;
        let p_deadline = if p_now == f64::NEG_INFINITY {
            f64::INFINITY
        } else {
            p_now + timeout
        };
        self.held_bytes += held_cost(&self.cfg, ev.size);
        self.note_held((self.current_offset, ev.block), true);
        self.note_touch(conv);
        self.held.insert(
            seq,
            Held {
                ev: Box::new(ev),
                ts_ms: ts,
                deadline_ms: deadline,
                p_deadline_ms: p_deadline,
                conv,
                offset: self.current_offset,
            },
        );
        if deadline != f64::INFINITY {
            let c = self.slab[conv].as_ref().expect("live conversation");
            if c.timers.len() > TIMERS_REBUILD_OVER && c.timers.len() > 2 * c.held_count() + 8 {
                // Stale entries dominate: keep the heap proportional to what the conversation holds.
                let live: BinaryHeap<Reverse<Timer>> = c
                    .held_seqs()
                    .into_iter()
                    .filter_map(|s| self.held.get(&s).map(|h| (s, h.deadline_ms)))
                    .filter(|(_, d)| *d != f64::INFINITY)
                    .map(|(s, d)| Reverse(Timer(d, s)))
                    .collect();
                self.conv_mut(conv).timers = live;
            }
            self.conv_mut(conv)
                .timers
                .push(Reverse(Timer(deadline, seq)));
        }
        if p_deadline != f64::INFINITY {
            self.heap.push(Reverse(Timer(p_deadline, seq)));
        }
        seq
    }

    /// Removes a held event from every structure that references it; None if it was not held.
    fn release(&mut self, seq: u64) -> Option<Held> {
        let h = self.held.remove(&seq)?;
        self.held_bytes -= held_cost(&self.cfg, h.ev.size);
        self.note_held((h.offset, h.ev.block), false);
        self.note_touch(h.conv);
        let c = self.slab[h.conv].as_mut().expect("live conversation");
        if h.ev.is_call {
            c.open_calls.remove(&seq);
            c.open_by_name.remove(h.ev.name.as_deref(), seq);
            if let Some(id) = &h.ev.id {
                if c.calls_by_id.get(id) == Some(&seq) {
                    c.calls_by_id.remove(id);
                    if c.calls_by_id.is_empty() {
                        // A map keeps its capacity when emptied: replaced, so an idle conversation
                        // keeps no table sized for its busiest moment (the RSS creep the Python
                        // engine's `_release` explains; it clears its dicts for the same reason).
                        c.calls_by_id = HashMap::default();
                    }
                }
            }
            self.open_calls -= 1;
        } else if let Some(id) = &h.ev.id {
            let w = c.pending.get_mut(id).expect("pending list");
            w.retain(|&s| s != seq);
            c.pending_n -= 1;
            if w.is_empty() {
                c.pending.swap_remove(id);
                if c.pending.is_empty() {
                    c.pending = IndexMap::default(); // see calls_by_id above
                }
            }
            self.pending_results -= 1;
        } else {
            c.early.remove(&seq);
            c.early_by_name.remove(h.ev.name.as_deref(), seq);
            self.pending_results -= 1;
        }
        if !c.timers.is_empty() && c.holds_nothing() {
            // All stale: the conversation holds nothing. Replaced, not cleared: `clear` keeps the
            // heap's capacity (see calls_by_id above).
            c.timers = BinaryHeap::new();
        }
        Some(h)
    }

    fn close_id(&mut self, conv: usize, cid: &str, how: Closed) {
        self.stamp += 1;
        let stamp = self.stamp;
        let c = self.slab[conv].as_mut().expect("live conversation");
        if let Some((_, old)) = c.closed.swap_remove(cid) {
            self.closed.remove(&old);
            c.closed_order.remove(&old);
        } else {
            self.id_bytes += cid.chars().count() as i64;
        }
        c.closed.insert(cid.to_owned(), (how, stamp));
        c.closed_order.insert(stamp);
        let over = c.closed.len() > self.cfg.max_closed_ids_per_conversation;
        self.closed.insert(stamp, (conv, cid.to_owned()));
        if over {
            let oldest = *self.conv(conv).closed_order.first().unwrap();
            let first = self.closed[&oldest].1.clone();
            self.drop_closed(conv, &first);
        }
        while self.closed.len() > self.cfg.max_closed_ids {
            let (_, (c, id)) = self
                .closed
                .iter()
                .next()
                .map(|(k, v)| (*k, v.clone()))
                .unwrap();
            self.drop_closed(c, &id);
        }
    }

    fn drop_closed(&mut self, conv: usize, cid: &str) {
        let c = self.slab[conv].as_mut().expect("live conversation");
        if let Some((_, stamp)) = c.closed.swap_remove(cid) {
            self.closed.remove(&stamp);
            c.closed_order.remove(&stamp);
            self.id_bytes -= cid.chars().count() as i64;
        }
        if c.closed.is_empty() {
            c.closed = IndexMap::default();
        } else if c.closed.capacity() > 4 * c.closed.len() {
            // The engine-wide bound takes ids from conversations that once closed many: their
            // tables shrink with them (a map never shrinks by itself; engine_memory.rs measures).
            c.closed.shrink_to_fit();
        }
    }

    fn forget_closed(&mut self, conv: usize) {
        let c = self.conv(conv);
        let stamps: Vec<u64> = c.closed.values().map(|v| v.1).collect();
        let chars: i64 = c
            .closed
            .keys()
            .map(|k| k.chars().count() as i64)
            .sum::<i64>()
            + c.cid.chars().count() as i64;
        for s in stamps {
            self.closed.remove(&s);
        }
        self.id_bytes -= chars;
    }

    fn enforce_bytes(&mut self, out: &mut Out) {
        let limit = self.cfg.max_held_bytes;
        while self.held_bytes + self.id_bytes > limit {
            let Some(first) = self.held.oldest() else {
                break;
            };
            self.evicted(1, "held_bytes");
            self.emit_orphan_seq(first, "evicted", out);
        }
        // Nothing held and still over: forget the least recently used idle conversations' ids.
        while self.id_bytes > limit && self.lru_head != NIL {
            let i = self.lru_head;
            self.forget_closed(i);
            self.remove_conv(i);
        }
    }

    /// Emits what this conversation's clock has passed the event-time deadline of, oldest
    /// deadline first (ties: arrival order).
    fn fire_conversation(&mut self, conv: usize, clock: f64, out: &mut Out) {
        self.fire_due(
            |e| &mut e.conv_mut(conv).timers,
            |h| h.deadline_ms,
            clock,
            out,
        );
    }

    /// Emits the held events whose timer in `timers` is due by `now` (deadline <= now), oldest
    /// deadline first (ties: arrival order), as a timeout (a call) or no_call (a result). Why one
    /// loop: the event-time timers (a conversation's heap, `Held::deadline_ms`) and the processing
    /// timers (the engine's heap, `Held::p_deadline_ms`) fire by the same rule; a timer whose
    /// event was released or re-timed since (its deadline no longer equals the held one) is stale
    /// and only dropped.
    fn fire_due(
        &mut self,
        timers: impl Fn(&mut Self) -> &mut BinaryHeap<Reverse<Timer>>,
        deadline_of: impl Fn(&Held) -> f64,
        now: f64,
        out: &mut Out,
    ) {
        loop {
            let heap = timers(self);
            let Some(&Reverse(Timer(deadline, seq))) = heap.peek() else {
                return;
            };
            if deadline > now {
                return;
            }
            heap.pop();
            let reason = match self.held.get(&seq) {
                Some(h) if deadline_of(h) == deadline => {
                    if h.ev.is_call {
                        "timeout"
                    } else {
                        "no_call"
                    }
                }
                _ => continue, // already paired or emitted: a stale timer
            };
            self.emit_orphan_seq(seq, reason, out);
        }
    }

    /// Processing time P (the sidecar's tick): the first P starts the processing timers of what
    /// is already held; then held events past their processing deadline are emitted.
    pub fn advance(&mut self, now: f64, out: &mut Out) {
        if now <= self.processing_ms {
            return;
        }
        if self.processing_ms == f64::NEG_INFINITY {
            self.p_origin_ms = now;
            let (call_timeout, grace) = (self.cfg.call_timeout_ms, self.cfg.result_grace_ms);
            for h in self.held.map.values_mut() {
                h.p_deadline_ms = now + if h.ev.is_call { call_timeout } else { grace };
            }
            self.heap = self.processing_timers();
        }
        self.processing_ms = now;
        self.fire_due(|e| &mut e.heap, |h| h.p_deadline_ms, now, out);
        if self.heap.len() > 2 * self.held.len() + 1024 {
            self.heap = self.processing_timers();
        }
        if now >= self.next_sweep_ms {
            self.next_sweep_ms = now + IDLE_SWEEP_EVERY_MS;
            self.expire_idle(now);
        }
    }

    /// A processing-timer heap of exactly what is held (one timer each, at its `p_deadline_ms`):
    /// built when processing time starts, and again when stale timers outnumber the live ones.
    fn processing_timers(&self) -> BinaryHeap<Reverse<Timer>> {
        self.held
            .map
            .iter()
            .map(|(s, h)| Reverse(Timer(h.p_deadline_ms, *s)))
            .collect()
    }

    /// Forgets idle conversations whose last event is older than the TTL in processing time.
    fn expire_idle(&mut self, now: f64) {
        let ttl = self.cfg.conversation_ttl_ms;
        let origin = self.p_origin_ms;
        while self.lru_head != NIL {
            let i = self.lru_head;
            let c = self.conv(i);
            if c.last_p_ms.max(origin) + ttl > now || !c.holds_nothing() {
                return;
            }
            self.forget_closed(i);
            self.remove_conv(i);
        }
    }

    // ------------------------------------------------------------------ output records

    fn count(&mut self, label: &str) {
        if let Some(n) = self.counts.get_mut(label) {
            *n += 1;
        } else {
            self.counts.insert(label.to_owned(), 1);
        }
    }

    fn emit_pair(
        &mut self,
        call: Held,
        result: Held,
        how: &str,
        fifo_by: Option<&str>,
        out: &mut Out,
    ) {
        let conv = call.conv;
        if let Some(id) = &call.ev.id {
            let id = id.clone();
            let by = if how == "id" {
                Closed::ById
            } else {
                Closed::ByFifo
            };
            self.close_id(conv, &id, by);
        }
        let (cev, rev) = (&call.ev, &result.ev);
        let cid = &self.slab[conv].as_ref().expect("live conversation").cid;
        let r = &mut out.buf;
        r.extend_from_slice(b"{\"kind\":\"pair\",\"pair_id\":\"");
        r.extend_from_slice(pair_id(cid, cev).as_bytes());
        r.extend_from_slice(b"\",\"match\":\"");
        r.extend_from_slice(how.as_bytes());
        r.extend_from_slice(b"\",\"fifo_by\":");
        match fifo_by {
            Some(b) => write_str(r, b),
            None => r.extend_from_slice(b"null"),
        }
        r.extend_from_slice(b",\"conversation_id\":");
        write_str(r, cid);
        r.extend_from_slice(b",\"tool\":");
        write_opt_str(r, cev.name.as_deref().or(rev.name.as_deref()));
        r.extend_from_slice(b",\"call\":");
        r.extend_from_slice(&cev.side);
        r.extend_from_slice(b",\"result\":");
        r.extend_from_slice(&rev.side);
        r.extend_from_slice(b",\"call_ts\":");
        write_ts(r, call.ts_ms);
        r.extend_from_slice(b",\"result_ts\":");
        write_ts(r, result.ts_ms);
        r.extend_from_slice(b",\"latency_ms\":");
        match (cev.ts_ms, rev.ts_ms) {
            (Some(a), Some(b)) => write_f64(r, b - a),
            _ => r.extend_from_slice(b"null"),
        }
        let (outcome, failure) = match self.tagger.as_mut() {
            Some(t) => t.write(r, cev.tag.as_deref(), rev.tag.as_deref(), false),
            None => (None, None),
        };
        r.push(b'}');
        out.end_record();
        if out.with_meta {
            out.metas.push(Meta {
                kind: "pair",
                label: how.to_owned(),
                fifo_by: fifo_by.map(str::to_owned),
                conversation_id: cid.clone(),
                tool: cev.name.clone().or_else(|| rev.name.clone()),
                outcome: outcome.map(str::to_owned),
                failure: failure.map(str::to_owned),
                latency_ms: match (cev.ts_ms, rev.ts_ms) {
                    (Some(a), Some(b)) => Some(b - a),
                    _ => None,
                },
            });
        }
        let mut label = std::mem::take(&mut self.label);
        label.clear();
        label.push_str("pair:");
        label.push_str(how);
        if let Some(b) = fifo_by {
            label.push(':');
            label.push_str(b);
        }
        self.count(&label);
        self.label = label;
    }

    fn emit_orphan_seq(&mut self, seq: u64, reason: &str, out: &mut Out) {
        if let Some(h) = self.release(seq) {
            self.emit_orphan(h, reason, out);
        }
    }

    fn emit_orphan(&mut self, h: Held, reason: &str, out: &mut Out) {
        let ev = &h.ev;
        if ev.is_call {
            if let Some(id) = &ev.id {
                let id = id.clone();
                self.close_id(h.conv, &id, Closed::Orphaned);
            }
        }
        let ev = &h.ev;
        let kind = if ev.is_call {
            "orphan_call"
        } else {
            "orphan_result"
        };
        let r = &mut out.buf;
        r.extend_from_slice(b"{\"kind\":\"");
        r.extend_from_slice(kind.as_bytes());
        r.extend_from_slice(b"\",\"reason\":");
        write_str(r, reason);
        r.extend_from_slice(b",\"conversation_id\":");
        write_str(r, &self.conv(h.conv).cid);
        r.extend_from_slice(b",\"tool\":");
        write_opt_str(r, ev.name.as_deref());
        r.extend_from_slice(b",\"ts\":");
        write_ts(r, h.ts_ms);
        r.extend_from_slice(b",\"event\":");
        r.extend_from_slice(&ev.side);
        r.extend_from_slice(b",\"source\":");
        r.extend_from_slice(&ev.source);
        let (outcome, failure) = match self.tagger.as_mut() {
            Some(t) if ev.is_call => t.write(r, ev.tag.as_deref(), None, reason == "timeout"),
            Some(t) => t.write(r, None, ev.tag.as_deref(), false),
            None => (None, None),
        };
        r.push(b'}');
        out.end_record();
        if out.with_meta {
            out.metas.push(Meta {
                kind,
                label: reason.to_owned(),
                fifo_by: None,
                conversation_id: self.conv(h.conv).cid.clone(),
                tool: ev.name.clone(),
                outcome: outcome.map(str::to_owned),
                failure: failure.map(str::to_owned),
                latency_ms: None,
            });
        }
        let mut label = std::mem::take(&mut self.label);
        label.clear();
        label.push_str(kind);
        label.push(':');
        label.push_str(reason);
        self.count(&label);
        self.label = label;
    }
}
