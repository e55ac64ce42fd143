//! State keeping: the conversation slab and its LRU list, holding and releasing events, the
//! closed-id memory, the held-bytes bound and the two kinds of timers (event time per
//! conversation, processing time engine-wide) with the idle sweep.

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap};

use super::byname::ByName;
use super::emit::Out;
use super::held::{Closed, Conv, Held, Timer, NIL, TIMERS_REBUILD_OVER};
use super::{held_cost, Engine, HashMap, IndexMap};
use crate::event::Event;
use crate::vocab::eviction_limit::{CONVERSATIONS, HELD_BYTES};
use crate::vocab::orphan_reason::{EVICTED, NO_CALL, TIMEOUT};
use crate::vocab::IDLE_SWEEP_EVERY_MS;

impl Engine {
    // ------------------------------------------------------------------ state keeping

    pub(super) fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    pub(super) fn conv(&self, i: usize) -> &Conv {
        self.slab[i].as_ref().expect("live conversation")
    }
    pub(super) fn conv_mut(&mut self, i: usize) -> &mut Conv {
        self.slab[i].as_mut().expect("live conversation")
    }

    pub(super) fn lru_unlink(&mut self, i: usize) {
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

    pub(super) fn lru_push_back(&mut self, i: usize) {
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

    pub(super) fn remove_conv(&mut self, i: usize) -> Conv {
        self.lru_unlink(i);
        let c = self.slab[i].take().expect("live conversation");
        self.note_removed(&c);
        self.by_id.remove(&c.cid);
        self.free.push(i);
        c
    }

    pub(super) fn conversation(&mut self, cid: &str, out: &mut Out) -> usize {
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
                    pending: IndexMap::default(),
                    pending_n: 0,
                    closed: IndexMap::default(),
                    closed_order: BTreeSet::new(),
                    early: BTreeSet::new(),
                    open_by_name: ByName::default(),
                    early_by_name: ByName::default(),
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
    pub(super) fn evict_conversation(&mut self, i: usize, out: &mut Out) {
        let mut seqs = self.conv(i).held_seqs();
        seqs.sort_unstable();
        if !seqs.is_empty() {
            self.evicted(seqs.len() as u64, CONVERSATIONS);
        }
        for s in seqs {
            self.emit_orphan_seq(s, EVICTED, out);
        }
    }

    /// Keeps an event on two timers of `timeout`: its conversation's event time (from its own
    /// event time) and processing time (from now; none while processing time is unknown).
    pub(super) fn hold(&mut self, ev: Event, conv: usize, ts: Option<f64>, timeout: f64) -> u64 {
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
    pub(super) fn release(&mut self, seq: u64) -> Option<Held> {
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

    pub(super) fn close_id(&mut self, conv: usize, cid: &str, how: Closed) {
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

    pub(super) fn drop_closed(&mut self, conv: usize, cid: &str) {
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
            // tables shrink with them (a map never shrinks by itself; memory.rs measures).
            c.closed.shrink_to_fit();
        }
    }

    pub(super) fn forget_closed(&mut self, conv: usize) {
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

    pub(super) fn enforce_bytes(&mut self, out: &mut Out) {
        let limit = self.cfg.max_held_bytes;
        while self.held_bytes + self.id_bytes > limit {
            let Some(first) = self.held.oldest() else {
                break;
            };
            self.evicted(1, HELD_BYTES);
            self.emit_orphan_seq(first, EVICTED, out);
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
    pub(super) fn fire_conversation(&mut self, conv: usize, clock: f64, out: &mut Out) {
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
    pub(super) fn fire_due(
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
                        TIMEOUT
                    } else {
                        NO_CALL
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
    pub(super) fn processing_timers(&self) -> BinaryHeap<Reverse<Timer>> {
        self.held
            .map
            .iter()
            .map(|(s, h)| Reverse(Timer(h.p_deadline_ms, *s)))
            .collect()
    }

    /// Forgets idle conversations whose last event is older than the TTL in processing time.
    pub(super) fn expire_idle(&mut self, now: f64) {
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
}
