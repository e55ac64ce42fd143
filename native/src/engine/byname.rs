//! The held events of one conversation by tool name, so that FIFO pairing (an id-less result
//! taking an open call, an id-less call taking an early result) finds its counterpart without a
//! scan (issue 27: 20,000 id-less results of one name, then 20,000 calls of another, cost 37 s,
//! each call scanning every held result; 40,000 did not finish in 300 s).
//!
//! The rule it answers is engine.py's `_fifo_candidate`: the oldest held event with the same
//! name (`fifo_by::NAME`), else the oldest one without a name (`fifo_by::ORDER`). Names come from
//! untrusted input: the map is keyed with a random seed (see mod.rs `Keyed`).

use std::collections::BTreeSet;

use super::HashMap;
use crate::vocab::fifo_by::{NAME, ORDER};

#[derive(Default)]
pub(super) struct ByName {
    named: HashMap<String, BTreeSet<u64>>,
    unnamed: BTreeSet<u64>,
}

impl ByName {
    pub(super) fn insert(&mut self, name: Option<&str>, seq: u64) {
        match name {
            Some(n) => {
                self.named.entry(n.to_owned()).or_default().insert(seq);
            }
            None => {
                self.unnamed.insert(seq);
            }
        }
    }

    pub(super) fn remove(&mut self, name: Option<&str>, seq: u64) {
        match name {
            Some(n) => {
                if let Some(set) = self.named.get_mut(n) {
                    set.remove(&seq);
                    if set.is_empty() {
                        self.named.remove(n);
                        if self.named.is_empty() {
                            // A map keeps its capacity when emptied (see state.rs `release`).
                            self.named = HashMap::default();
                        }
                    }
                }
            }
            None => {
                self.unnamed.remove(&seq);
            }
        }
    }

    /// (names held, the map's capacity, seqs held): for memory.rs.
    pub(super) fn usage(&self) -> (usize, usize, usize) {
        let seqs = self.named.values().map(BTreeSet::len).sum::<usize>() + self.unnamed.len();
        (self.named.len(), self.named.capacity(), seqs)
    }

    /// The held seq a counterpart named `name` takes, and how it was matched.
    pub(super) fn candidate(&self, name: &str) -> Option<(u64, &'static str)> {
        if let Some(&seq) = self.named.get(name).and_then(|s| s.first()) {
            return Some((seq, NAME));
        }
        self.unnamed.first().map(|&seq| (seq, ORDER))
    }
}
