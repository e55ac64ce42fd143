//! What changed in the held state since the last checkpoint mark: engine.py `mark_clocks` and
//! `held_changes`, so a delta checkpoint costs O(changes) instead of O(held). A child module of
//! engine/mod.rs (it reads the engine's private state); the engine calls the `note_*` hooks as it
//! holds and releases events and touches conversations, which do nothing until the first mark.

use super::held::{Conv, Pos};
use super::{Engine, HashMap};

type ClockAt = (Option<i64>, i64, f64);

#[derive(Default)]
pub(super) struct Changes {
    on: bool,
    /// Bumped by every mark: a conversation's `ck` from an older mark counts as none.
    mark: u64,
    /// position -> held (true) or released (false), the last change winning.
    held: HashMap<Pos, bool>,
    /// Slab indices of conversations touched since (a reused slot may appear twice: harmless).
    dirty: Vec<usize>,
    /// Clock entries of conversations removed since (their slot may be reused before the drain).
    unclocked: Vec<Pos>,
}

impl Engine {
    #[inline]
    pub(super) fn note_touch(&mut self, i: usize) {
        if self.changes.on {
            let c = self.slab[i].as_mut().expect("live conversation");
            if !c.ck_dirty {
                c.ck_dirty = true;
                self.changes.dirty.push(i);
            }
        }
    }

    #[inline]
    pub(super) fn note_held(&mut self, pos: Pos, held: bool) {
        if self.changes.on {
            self.changes.held.insert(pos, held);
        }
    }

    /// A conversation leaves the slab: the drain can no longer find it by index.
    pub(super) fn note_removed(&mut self, c: &Conv) {
        if let Some((mark, pos, _)) = c.ck {
            if self.changes.on && mark == self.changes.mark {
                self.changes.unclocked.push(pos);
            }
        }
    }

    /// engine.py `_clock_entry`: a conversation's first held event and clock, unless replaying
    /// its held events rebuilds the clock (or it holds nothing, or has no clock).
    fn clock_entry(&self, i: usize) -> Option<(Pos, f64)> {
        let c = self.conv(i);
        let clock = c.clock_ms;
        if clock == f64::NEG_INFINITY {
            return None;
        }
        let mut first: Option<u64> = None;
        for s in c.held_seqs() {
            let h = self.held.get(&s)?;
            if h.ts_ms == Some(clock) {
                return None;
            }
            if first.is_none_or(|f| s < f) {
                first = Some(s);
            }
        }
        let h = self.held.get(&first?)?;
        Some(((h.offset, h.ev.block), clock))
    }

    /// engine.py `mark_clocks`: `held_clocks`, taken as the base of the next `held_changes`.
    pub fn mark_clocks(&mut self) -> Vec<ClockAt> {
        for i in std::mem::take(&mut self.changes.dirty) {
            // Not drained: their flags must not keep them out of the next delta's dirty list.
            if let Some(c) = self.slab.get_mut(i).and_then(Option::as_mut) {
                c.ck_dirty = false;
            }
        }
        let ch = &mut self.changes;
        ch.on = true;
        ch.mark += 1;
        ch.held.clear();
        ch.unclocked.clear();
        let mark = ch.mark;
        let mut first: Vec<(usize, u64)> = Vec::new(); // (conversation, its first held seq)
        let mut seen: HashMap<usize, ()> = HashMap::default();
        for s in self.held.seqs() {
            let Some(h) = self.held.get(&s) else { continue };
            if seen.insert(h.conv, ()).is_none() {
                first.push((h.conv, s));
            }
        }
        let mut out = Vec::new();
        for (i, _) in first {
            let entry = self.clock_entry(i);
            let c = self.slab[i].as_mut().expect("live conversation");
            c.ck_dirty = false;
            c.ck = entry.map(|(pos, clock)| (mark, pos, clock));
            if let Some(((o, b), clock)) = entry {
                out.push((o, b, clock));
            }
        }
        out
    }

    /// engine.py `held_changes`: (held, released, clocks set, clocks dropped) since the last mark
    /// or drain; O(changes).
    #[allow(clippy::type_complexity)]
    pub fn held_changes(&mut self) -> (Vec<Pos>, Vec<Pos>, Vec<ClockAt>, Vec<Pos>) {
        let held = std::mem::take(&mut self.changes.held);
        let dirty = std::mem::take(&mut self.changes.dirty);
        let mut unclocked = std::mem::take(&mut self.changes.unclocked);
        let mark = self.changes.mark;
        let (mut on, mut off) = (Vec::new(), Vec::new());
        for (pos, h) in held {
            if h {
                on.push(pos)
            } else {
                off.push(pos)
            }
        }
        let mut clocks = Vec::new();
        for i in dirty {
            let Some(c) = self.slab.get(i).and_then(Option::as_ref) else {
                continue;
            };
            let old = c.ck.filter(|(m, _, _)| *m == mark);
            let new = self.clock_entry(i).map(|(pos, clock)| (mark, pos, clock));
            let c = self.slab[i].as_mut().expect("live conversation");
            c.ck_dirty = false;
            if new == old {
                continue;
            }
            if let Some((_, old_pos, _)) = old {
                if new.is_none_or(|(_, p, _)| p != old_pos) {
                    unclocked.push(old_pos);
                }
            }
            if let Some((_, (o, b), clock)) = new {
                clocks.push((o, b, clock));
            }
            c.ck = new;
        }
        (on, off, clocks, unclocked)
    }
}
