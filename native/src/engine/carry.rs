//! The engine's memory carried from one file-mode run to the next (`pair --state`, issue 26): what
//! one run over both inputs still knows at the cut besides the events it holds. The held events
//! themselves are carried as their input records and replayed (adapters/state.py); this is the
//! rest, so that two runs give exactly the records of one:
//!
//! * every conversation, in LRU order, with its event-time clock (an undated event takes it, a
//!   new event's timeout counts from it, the oldest conversation is the one evicted);
//! * the closed-id memory, in its engine-wide order (a result re-sent after its call was paired is
//!   a `duplicate_result`, after it timed out a `late_result`, not a `no_call`);
//! * the failure tagger's state: each conversation's request counters (the tool-call and time
//!   caps), its remembered (tool, arguments) for the repeat check with the hash seed, the
//!   engine-wide queue that bounds them (stale items included: they count against the bound),
//!   the request starts of conversations not seen yet, and the failure points each held call
//!   was given when it arrived (a replayed call is not tagged again: it was counted once);
//! * the time each held event without a timestamp took when it arrived (`undated`).
//!
//! Put back through the engine's own operations (`conversation`, `close_id`, the tagger's
//! bounded inserts), so a run configured with smaller limits than the last keeps to its own.
//! Encoded as compact JSON with its own version (`MEMORY_VERSION`); floats as their IEEE bits,
//! so clocks come back bit for bit.

use std::collections::VecDeque;
use std::io::Write;

use serde_json::Value;

use super::emit::Out;
use super::held::{Closed, NIL};
use super::{Engine, HashMap};
use crate::out::{write_opt_str, write_str};
use crate::tagging::{point_index, EventTag, SeenOut, POINTS};

pub const MEMORY_VERSION: u64 = 1;

/// A held call's carried failure points (indexes into `POINTS`) and the first one's detail.
type CarriedTag = (Vec<usize>, Option<String>);

/// What a restore keeps until `end_restore`: the failure points of the held calls being replayed,
/// by (conversation, call id), in arrival order, and the LRU order to put back after the replay.
#[derive(Default)]
pub(super) struct Restore {
    tags: HashMap<(String, Option<String>), VecDeque<CarriedTag>>,
    lru: Vec<String>,
    /// The time each held event without a timestamp took when it arrived (its conversation's
    /// clock then, or none), by (conversation, id, is_call), in arrival order: replayed, it takes
    /// that time again, not the clock at the cut (issue 26: a call read at 00:00:00 and held
    /// across a cut came back at 00:00:09, so it paired where one run timed it out).
    pub(super) undated: HashMap<(String, Option<String>, bool), VecDeque<Option<f64>>>,
}

impl Restore {
    /// Whether replayed calls may still take carried tags (one check per call on the hot path).
    #[inline]
    pub(super) fn active(&self) -> bool {
        !self.tags.is_empty()
    }
}

fn bits(out: &mut Vec<u8>, x: Option<f64>) {
    match x {
        Some(x) if x != f64::NEG_INFINITY => {
            let _ = write!(out, "{}", x.to_bits());
        }
        _ => out.extend_from_slice(b"null"),
    }
}

fn sep(out: &mut Vec<u8>, first: &mut bool) {
    if !std::mem::take(first) {
        out.push(b',');
    }
}

impl Engine {
    /// The memory as JSON (see the module doc); `seed` is the tagger's hash seed.
    pub fn export_memory(&self, seed: Option<u64>) -> Vec<u8> {
        let mut ci = vec![NIL; self.slab.len()];
        let mut lru = Vec::new();
        let mut i = self.lru_head;
        while i != NIL {
            ci[i] = lru.len();
            lru.push(i);
            i = self.conv(i).next;
        }
        let mut o = Vec::with_capacity(64 + 48 * (lru.len() + self.closed.len()));
        let _ = write!(o, "{{\"memory\":{MEMORY_VERSION},\"seed\":");
        match seed {
            Some(s) => {
                let _ = write!(o, "{s}");
            }
            None => o.extend_from_slice(b"null"),
        }
        o.extend_from_slice(b",\"convs\":[");
        let mut first = true;
        for &s in &lru {
            sep(&mut o, &mut first);
            o.push(b'[');
            write_str(&mut o, &self.conv(s).cid);
            o.push(b',');
            bits(&mut o, Some(self.conv(s).clock_ms));
            o.push(b']');
        }
        o.extend_from_slice(b"],\"closed\":[");
        first = true;
        for (slot, id) in self.closed.values() {
            let how = match self.conv(*slot).closed.get(id).map(|v| v.0) {
                Some(Closed::ById) => 0,
                Some(Closed::ByFifo) => 1,
                _ => 2,
            };
            sep(&mut o, &mut first);
            let _ = write!(o, "[{},", ci[*slot]);
            write_str(&mut o, id);
            let _ = write!(o, ",{how}]");
        }
        o.extend_from_slice(b"],\"tags\":[");
        first = true;
        for &s in &lru {
            let Some(t) = self.conv(s).tags.as_deref() else {
                continue;
            };
            let (calls, first_ts, cc, tc) = t.counters();
            sep(&mut o, &mut first);
            let _ = write!(o, "[{},{calls},", ci[s]);
            bits(&mut o, first_ts);
            let _ = write!(o, ",{cc},{tc},[");
            let mut f2 = true;
            for ((key, id, n, times), _) in t.seen_entries() {
                sep(&mut o, &mut f2);
                let _ = write!(o, "[{key},");
                write_opt_str(&mut o, id.as_deref());
                let _ = write!(o, ",{n},{times}]");
            }
            o.extend_from_slice(b"]]");
        }
        o.extend_from_slice(b"],\"queue\":[");
        first = true;
        if let Some(tagger) = &self.tagger {
            for (slot, uid, key, serial) in tagger.queue_items() {
                sep(&mut o, &mut first);
                let live = self
                    .slab
                    .get(slot)
                    .and_then(Option::as_ref)
                    .and_then(|c| c.tags.as_deref())
                    .is_some_and(|t| t.uid() == uid && t.holds(key, serial));
                if live {
                    let _ = write!(o, "[{},{key}]", ci[slot]);
                } else {
                    o.extend_from_slice(b"null");
                }
            }
        }
        o.extend_from_slice(b"],\"pending\":[");
        first = true;
        if let Some(tagger) = &self.tagger {
            for (cid, ts) in tagger.pending_requests() {
                sep(&mut o, &mut first);
                o.push(b'[');
                write_str(&mut o, &cid);
                o.push(b',');
                bits(&mut o, ts);
                o.push(b']');
            }
        }
        o.extend_from_slice(b"],\"held\":[");
        first = true;
        for s in self.held.seqs() {
            let Some(h) = self.held.get(&s) else { continue };
            let Some(EventTag::Call {
                failures, detail, ..
            }) = h.ev.tag.as_deref()
            else {
                continue;
            };
            sep(&mut o, &mut first);
            o.push(b'[');
            write_str(&mut o, &self.conv(h.conv).cid);
            o.push(b',');
            write_opt_str(&mut o, h.ev.id.as_deref());
            o.extend_from_slice(b",[");
            let mut f2 = true;
            for p in failures {
                sep(&mut o, &mut f2);
                write_str(&mut o, POINTS[*p]);
            }
            o.extend_from_slice(b"],");
            write_opt_str(&mut o, detail.as_deref());
            o.push(b']');
        }
        o.extend_from_slice(b"],\"undated\":[");
        first = true;
        for s in self.held.seqs() {
            let Some(h) = self.held.get(&s) else { continue };
            if h.ev.ts_ms.is_some() {
                continue; // a dated event takes its own time again
            }
            sep(&mut o, &mut first);
            o.push(b'[');
            write_str(&mut o, &self.conv(h.conv).cid);
            o.push(b',');
            write_opt_str(&mut o, h.ev.id.as_deref());
            let _ = write!(o, ",{},", h.ev.is_call);
            bits(&mut o, h.ts_ms);
            o.push(b']');
        }
        o.extend_from_slice(b"]}");
        o
    }

    /// Puts a memory written by `export_memory` back, before the held events are replayed.
    /// Returns the tagger's hash seed it carried; what the limits of this run evict goes to `out`.
    pub fn import_memory(&mut self, data: &[u8], out: &mut Out) -> Result<Option<u64>, String> {
        let v: Value = serde_json::from_slice(data).map_err(|e| e.to_string())?;
        let version = v.get("memory").and_then(Value::as_u64);
        if version != Some(MEMORY_VERSION) {
            return Err(format!(
                "engine memory version {} is not {MEMORY_VERSION}",
                version.map_or("none".to_owned(), |n| n.to_string())
            ));
        }
        let bad = |what: &str| format!("engine memory: a malformed {what} entry");
        let list = |k: &str| -> Result<&Vec<Value>, String> {
            v.get(k).and_then(Value::as_array).ok_or_else(|| bad(k))
        };
        let mut slots = Vec::new();
        let mut cids = Vec::new();
        for c in list("convs")? {
            let cid = c
                .get(0)
                .and_then(Value::as_str)
                .ok_or_else(|| bad("convs"))?;
            let slot = self.conversation(cid, out);
            if let Some(clock) = float(c.get(1)) {
                let conv = self.conv_mut(slot);
                conv.clock_ms = conv.clock_ms.max(clock);
            }
            slots.push(slot);
            cids.push(cid.to_owned());
        }
        // A conversation the limits evicted again while importing is gone: None.
        let live = |e: &Engine, ci: usize| -> Option<usize> {
            let s = *slots.get(ci)?;
            (e.slab.get(s)?.as_ref()?.cid == cids[ci]).then_some(s)
        };
        for c in list("closed")? {
            let (ci, id, how) = (
                uint(c.get(0)),
                c.get(1).and_then(Value::as_str),
                uint(c.get(2)),
            );
            let (Some(ci), Some(id), Some(how)) = (ci, id, how) else {
                return Err(bad("closed"));
            };
            let how = [Closed::ById, Closed::ByFifo, Closed::Orphaned][how.min(2) as usize];
            if let Some(slot) = live(self, ci as usize) {
                self.close_id(slot, id, how);
            }
        }
        self.import_tags(list("tags")?, list("queue")?, &live)?;
        if let Some(tagger) = self.tagger.as_mut() {
            for p in list("pending")? {
                let cid = p
                    .get(0)
                    .and_then(Value::as_str)
                    .ok_or_else(|| bad("pending"))?;
                tagger.on_pending_request(cid, float(p.get(1)));
            }
        }
        for h in list("held")? {
            let cid = h
                .get(0)
                .and_then(Value::as_str)
                .ok_or_else(|| bad("held"))?;
            let id = h.get(1).and_then(Value::as_str).map(str::to_owned);
            let points = h
                .get(2)
                .and_then(Value::as_array)
                .ok_or_else(|| bad("held"))?;
            let points: Vec<usize> = points
                .iter()
                .filter_map(Value::as_str)
                .map(point_index)
                .filter(|&p| p < POINTS.len())
                .collect();
            let detail = h.get(3).and_then(Value::as_str).map(str::to_owned);
            let key = (cid.to_owned(), id);
            self.restore
                .tags
                .entry(key)
                .or_default()
                .push_back((points, detail));
        }
        // Absent from a memory written before it was carried: those undated events take the clock.
        for u in v
            .get("undated")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let (Some(cid), Some(is_call)) = (
                u.get(0).and_then(Value::as_str),
                u.get(2).and_then(Value::as_bool),
            ) else {
                return Err(bad("undated"));
            };
            let id = u.get(1).and_then(Value::as_str).map(str::to_owned);
            let key = (cid.to_owned(), id, is_call);
            self.restore
                .undated
                .entry(key)
                .or_default()
                .push_back(float(u.get(3)));
        }
        self.restore.lru = cids;
        Ok(v.get("seed").and_then(Value::as_u64))
    }

    fn import_tags(
        &mut self,
        tags: &[Value],
        queue: &[Value],
        live: &dyn Fn(&Engine, usize) -> Option<usize>,
    ) -> Result<(), String> {
        if self.tagger.is_none() {
            return Ok(()); // tagging is off in this run: nothing reads the counters
        }
        let bad = || "engine memory: a malformed tags entry".to_owned();
        let mut entries: Vec<(usize, Vec<SeenOut>)> = Vec::new();
        for t in tags {
            let Some(slot) = uint(t.get(0)).and_then(|ci| live(self, ci as usize)) else {
                continue;
            };
            let counters = (
                uint(t.get(1)).ok_or_else(bad)?,
                float(t.get(2)),
                t.get(3).and_then(Value::as_bool).ok_or_else(bad)?,
                t.get(4).and_then(Value::as_bool).ok_or_else(bad)?,
            );
            let mut seen = Vec::new();
            for e in t.get(5).and_then(Value::as_array).ok_or_else(bad)? {
                let id = e.get(1).and_then(Value::as_str).map(str::to_owned);
                let (Some(key), Some(n), Some(times)) =
                    (uint(e.get(0)), uint(e.get(2)), uint(e.get(3)))
                else {
                    return Err(bad());
                };
                seen.push((key, id, n, times));
            }
            let tagger = self.tagger.as_mut().expect("tagging on");
            self.slab[slot].as_mut().expect("live conversation").tags =
                Some(tagger.carried_state(counters));
            entries.push((slot, seen));
        }
        let mut serials: HashMap<(usize, u64), u64> = HashMap::default();
        for q in queue {
            let item = match (uint(q.get(0)), uint(q.get(1))) {
                (Some(ci), Some(key)) => live(self, ci as usize).and_then(|slot| {
                    let uid = self.conv(slot).tags.as_deref()?.uid();
                    Some((slot, uid, key))
                }),
                _ => None,
            };
            let tagger = self.tagger.as_mut().expect("tagging on");
            let serial = tagger.push_carried(item);
            if let Some((slot, _, key)) = item {
                serials.insert((slot, key), serial);
            }
        }
        let max_hashes = self.tagger.as_ref().expect("tagging on").cfg.max_hashes;
        for (slot, seen) in entries {
            for e in seen {
                let serial = match serials.get(&(slot, e.0)) {
                    Some(&s) => s,
                    None => {
                        let uid = self.conv(slot).tags.as_deref().map_or(0, |t| t.uid());
                        let tagger = self.tagger.as_mut().expect("tagging on");
                        tagger.push_carried(Some((slot, uid, e.0)))
                    }
                };
                let c = self.slab[slot].as_mut().expect("live conversation");
                if let Some(t) = c.tags.as_deref_mut() {
                    t.put_seen(e, serial, max_hashes);
                }
            }
        }
        while self.tagger.as_ref().is_some_and(|t| t.over_total()) {
            let f = self.tagger.as_mut().and_then(|t| t.pop_oldest());
            let Some(f) = f else { break };
            let tags = self.slab.get_mut(f.slot).and_then(Option::as_mut);
            if let Some(t) = tags.and_then(|c| c.tags.as_deref_mut()) {
                t.forget(&f);
            }
        }
        Ok(())
    }

    /// A replayed held call takes the failure points it was given when it first arrived; false
    /// when none were carried for it (it is then tagged as any call).
    pub(super) fn carried_tag(
        &mut self,
        conv: usize,
        id: Option<&str>,
        tag: &mut EventTag,
    ) -> bool {
        let key = (self.conv(conv).cid.clone(), id.map(str::to_owned));
        let Some(queue) = self.restore.tags.get_mut(&key) else {
            return false;
        };
        let Some((points, carried)) = queue.pop_front() else {
            return false;
        };
        if queue.is_empty() {
            self.restore.tags.remove(&key);
        }
        if let EventTag::Call {
            failures, detail, ..
        } = tag
        {
            *failures = points;
            *detail = carried;
        }
        true
    }

    /// The time a replayed undated event took when it first arrived: Some(time, or None for no
    /// time), or None when none was carried for it (it then takes its conversation's clock).
    pub(super) fn carried_time(
        &mut self,
        conv: usize,
        ev: &crate::event::Event,
    ) -> Option<Option<f64>> {
        let key = (self.conv(conv).cid.clone(), ev.id.clone(), ev.is_call);
        let queue = self.restore.undated.get_mut(&key)?;
        let t = queue.pop_front()?;
        if queue.is_empty() {
            self.restore.undated.remove(&key);
        }
        Some(t)
    }

    /// The end of a restore: the conversations take the LRU order they had at the cut (replaying
    /// the held events moved theirs to the end), and uncollected carried tags are dropped.
    pub(super) fn end_carry(&mut self) {
        self.restore.tags = HashMap::default();
        self.restore.undated = HashMap::default();
        for cid in std::mem::take(&mut self.restore.lru) {
            if let Some(&i) = self.by_id.get(&cid) {
                self.lru_unlink(i);
                self.lru_push_back(i);
            }
        }
    }
}

fn uint(v: Option<&Value>) -> Option<u64> {
    v.and_then(Value::as_u64)
}

/// A float carried as its IEEE bits (None: null or absent).
fn float(v: Option<&Value>) -> Option<f64> {
    uint(v).map(f64::from_bits)
}
