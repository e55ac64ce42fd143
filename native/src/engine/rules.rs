//! The pairing rules: what a call and a result do on arrival (pair by id, by position, hold, or emit
//! an orphan with its reason). engine.py's `_on_call` / `_on_result`, rule for rule.

use std::collections::BTreeSet;

use super::byname::ByName;
use super::emit::Out;
use super::held::{Closed, Held};
use super::Engine;
use crate::event::Event;
use crate::vocab::eviction_limit::CALLS_PER_CONVERSATION;
use crate::vocab::fifo_by::ORDER;
use crate::vocab::orphan_reason::{
    DUPLICATE_RESULT, EVICTED, FIFO_CONFLICT, LATE_RESULT, SUPERSEDED,
};
use crate::vocab::pair_match::{FIFO, ID};

impl Engine {
    // ------------------------------------------------------------------ rules

    pub(super) fn on_call(&mut self, conv: usize, mut call: Event, ts: Option<f64>, out: &mut Out) {
        if self.tagger.is_some() {
            self.tag_call(conv, &mut call);
        }
        if let Some(cid) = call.id.clone() {
            let c = self.conv(conv);
            if let Some(&old) = c.calls_by_id.get(&cid) {
                self.emit_orphan_seq(old, SUPERSEDED, out);
            }
            let c = self.conv(conv);
            if let Some(waiting) = c.pending.get(&cid) {
                if !waiting.is_empty() {
                    let first = waiting[0];
                    let res = self.release(first).expect("held result");
                    self.next_seq(); // the Python engine numbers the late call's Held too
                    self.emit_pair(Held::bare(call, ts, conv), res, ID, None, out);
                    let dups: Vec<u64> = self
                        .conv(conv)
                        .pending
                        .get(&cid)
                        .cloned()
                        .unwrap_or_default();
                    for d in dups {
                        self.emit_orphan_seq(d, DUPLICATE_RESULT, out);
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
                self.emit_pair(Held::bare(call, ts, conv), res, FIFO, Some(by), out);
                return;
            }
        }
        if self.conv(conv).open_calls.len() >= self.cfg.max_calls_per_conversation {
            self.evicted(1, CALLS_PER_CONVERSATION);
            let first = *self.conv(conv).open_calls.iter().next().unwrap();
            self.emit_orphan_seq(first, EVICTED, out);
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

    pub(super) fn on_result(&mut self, conv: usize, result: Event, ts: Option<f64>, out: &mut Out) {
        if let Some(rid) = result.id.clone() {
            if let Some(&call) = self.conv(conv).calls_by_id.get(&rid) {
                let call_held = self.release(call).expect("held call");
                self.next_seq();
                self.emit_pair(call_held, Held::bare(result, ts, conv), ID, None, out);
                return;
            }
            if let Some(&(how, _)) = self.conv(conv).closed.get(&rid) {
                self.next_seq();
                let res = Held::bare(result, ts, conv);
                let reason = match how {
                    Closed::ById => DUPLICATE_RESULT,
                    Closed::ByFifo => FIFO_CONFLICT,
                    Closed::Orphaned => LATE_RESULT,
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
            self.emit_pair(call_held, Held::bare(result, ts, conv), FIFO, Some(by), out);
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
    pub(super) fn early_candidate(
        &self,
        conv: usize,
        name: Option<&str>,
    ) -> Option<(u64, &'static str)> {
        let c = self.conv(conv);
        oldest_by_name(&c.early, &c.early_by_name, name)
    }

    /// The open call an id-less result takes.
    pub(super) fn fifo_candidate(
        &self,
        conv: usize,
        name: Option<&str>,
    ) -> Option<(u64, &'static str)> {
        let c = self.conv(conv);
        oldest_by_name(&c.open_calls, &c.open_by_name, name)
    }
}

/// Of `held` (seqs, oldest first), the oldest with this tool name (`name`), else the oldest without
/// a name, or the oldest of all when the event itself has no name (both `order`). `by_name` indexes
/// `held` by name, so neither case scans it (issue 27: the scan made FIFO pairing quadratic).
fn oldest_by_name(
    held: &BTreeSet<u64>,
    by_name: &ByName,
    name: Option<&str>,
) -> Option<(u64, &'static str)> {
    match name {
        None => held.first().map(|&seq| (seq, ORDER)),
        Some(name) => by_name.candidate(name),
    }
}
