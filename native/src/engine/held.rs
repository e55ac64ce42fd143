//! The engine's held state: a held event (`Held`), its timers, a conversation (`Conv`) and the map of
//! every held event in arrival order (`HeldMap`). Plain data with the few operations that touch
//! only itself; the rules that change it live in rules.rs and state.rs.

use std::cmp::{Ordering, Reverse};
use std::collections::{BTreeSet, BinaryHeap, VecDeque};

use super::byname::ByName;
use super::{HashMap, IndexMap};
use crate::event::Event;
use crate::tagging::ConvTags;

/// `state.Held`: `ts_ms` None when no event time is known (then on no event-time timer),
/// `deadline_ms` fired by the conversation's clock, `p_deadline_ms` by processing time.
pub(super) struct Held {
    pub(super) ev: Box<Event>,
    pub(super) ts_ms: Option<f64>,
    pub(super) deadline_ms: f64,
    pub(super) p_deadline_ms: f64,
    pub(super) conv: usize,
    /// The input offset the event was consumed at (`Engine::current_offset` when it was held):
    /// what the sidecar's commit rule and checkpoint read of held events.
    pub(super) offset: Option<i64>,
}

impl Held {
    pub(super) fn bare(ev: Event, ts_ms: Option<f64>, conv: usize) -> Held {
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
pub(super) struct Timer(pub(super) f64, pub(super) u64);
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
pub(super) enum Closed {
    ById,
    ByFifo,
    Orphaned,
}

pub(super) struct Conv {
    pub(super) cid: String,
    pub(super) calls_by_id: HashMap<String, u64>,
    pub(super) open_calls: BTreeSet<u64>,
    // Results waiting for their call, by id. Nothing reads this map in order (eviction and flush
    // go by seq), so a released id is swap-removed: O(1), where `shift_remove` moved every later
    // entry and made 100,000 unknown-id results in one conversation quadratic (issue 27).
    pub(super) pending: IndexMap<String, Vec<u64>>,
    // How many seqs `pending` holds in all: `held_count` runs on every held event, so it must not
    // sum the lists (issue 27: that scan was the other quadratic part).
    pub(super) pending_n: usize,
    // id -> (how it closed, stamp in the engine-wide order). Its order is not read: the oldest is
    // the first of `closed_order`, so an id leaves by swap_remove, O(1), where shift_remove moved
    // every later id (O(--max-closed-ids-per-conversation) per closed call past the cap).
    pub(super) closed: IndexMap<String, (Closed, u64)>,
    // The stamps of `closed`, oldest first (the id of a stamp is in `Engine::closed`).
    pub(super) closed_order: BTreeSet<u64>,
    // Id-less results that came before any call they could pair with, by seq (arrival order).
    pub(super) early: BTreeSet<u64>,
    // `open_calls` and `early` by tool name: FIFO pairing without a scan (byname.rs).
    pub(super) open_by_name: ByName,
    pub(super) early_by_name: ByName,
    // The newest event time seen in this conversation; it alone fires `timers`.
    pub(super) clock_ms: f64,
    pub(super) timers: BinaryHeap<Reverse<Timer>>,
    // Processing time of its last event: the TTL counts from it.
    pub(super) last_p_ms: f64,
    // LRU list links (slab indices; usize::MAX = none)
    pub(super) prev: usize,
    pub(super) next: usize,
    // The failure tagger's state (tagging.py `Conversation.tags`): dropped with the conversation.
    pub(super) tags: Option<Box<ConvTags>>,
    // Its clock entry in the last checkpoint, and whether it is in `changes.dirty` (changes.rs).
    pub(super) ck: Ck,
    pub(super) ck_dirty: bool,
}

/// A held event's position: (consumed offset, block).
pub(super) type Pos = (Option<i64>, i64);

/// A conversation's clock entry as the last checkpoint carries it: (mark, position, clock); kept
/// by changes.rs.
pub(super) type Ck = Option<(u64, Pos, f64)>;

pub(super) const NIL: usize = usize::MAX;
pub(super) const TIMERS_REBUILD_OVER: usize = 32;

impl Conv {
    pub(super) fn holds_nothing(&self) -> bool {
        self.open_calls.is_empty() && self.pending.is_empty() && self.early.is_empty()
    }
    pub(super) fn held_count(&self) -> usize {
        self.open_calls.len() + self.pending_n + self.early.len()
    }
    pub(super) fn held_seqs(&self) -> Vec<u64> {
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
pub(super) struct HeldMap {
    pub(super) map: HashMap<u64, Held>,
    pub(super) order: VecDeque<u64>,
}

impl HeldMap {
    pub(super) fn insert(&mut self, seq: u64, h: Held) {
        self.map.insert(seq, h);
        self.order.push_back(seq);
    }
    pub(super) fn get(&self, seq: &u64) -> Option<&Held> {
        self.map.get(seq)
    }
    pub(super) fn remove(&mut self, seq: &u64) -> Option<Held> {
        let h = self.map.remove(seq)?;
        if self.order.len() > 2 * self.map.len() + 1024 {
            let map = &self.map;
            self.order.retain(|s| map.contains_key(s));
        }
        Some(h)
    }
    pub(super) fn oldest(&mut self) -> Option<u64> {
        while let Some(&s) = self.order.front() {
            if self.map.contains_key(&s) {
                return Some(s);
            }
            self.order.pop_front();
        }
        None
    }
    /// The held seqs, oldest first.
    pub(super) fn seqs(&self) -> impl Iterator<Item = u64> + '_ {
        self.order
            .iter()
            .copied()
            .filter(|s| self.map.contains_key(s))
    }
    pub(super) fn len(&self) -> usize {
        self.map.len()
    }
    pub(super) fn clear(&mut self) {
        self.map.clear();
        self.order.clear();
    }
}
