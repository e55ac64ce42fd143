//! `Engine::memory`: the length and capacity of every container the engine keeps, for the memory
//! benchmarks (bench/state_growth.py, bench/traced_run.py). Why: RSS that grows while every gauge
//! of held state is flat is either a container that keeps capacity it no longer needs, or a bound
//! too far away; lengths against capacities tell which. A child module of `engine`, so the engine
//! itself carries no introspection code. Bytes are estimates of the tables (element size times
//! capacity), not of the strings or boxes they point to.

use std::mem::size_of;

use super::held::{Conv, Held, Timer};
use super::Engine;
use std::cmp::Reverse;
use std::collections::BTreeSet;

/// One container (summed over conversations for the per-conversation ones): entries, capacity
/// (slots the allocation has room for), estimated table bytes.
pub struct Usage {
    pub name: &'static str,
    pub len: usize,
    pub capacity: usize,
    pub bytes: usize,
}

#[derive(Default)]
struct Acc {
    len: usize,
    capacity: usize,
    bytes: usize,
}

impl Acc {
    fn add(&mut self, len: usize, capacity: usize, elem: usize) {
        self.len += len;
        self.capacity += capacity;
        self.bytes += capacity * elem;
    }
}

// A hashbrown table: one control byte per slot beside each (key, value).
const fn table<K, V>() -> usize {
    size_of::<(K, V)>() + 1
}
// An IndexMap: entries (hash, key, value) in a Vec plus a table of indices.
const fn indexmap<K, V>() -> usize {
    size_of::<(u64, K, V)>() + size_of::<usize>() + 1
}

impl Engine {
    pub fn memory(&self) -> Vec<Usage> {
        let mut out = Vec::new();
        let mut push = |name: &'static str, a: Acc| {
            out.push(Usage {
                name,
                len: a.len,
                capacity: a.capacity,
                bytes: a.bytes,
            })
        };
        let one = |len: usize, capacity: usize, elem: usize| {
            let mut a = Acc::default();
            a.add(len, capacity, elem);
            a
        };
        push(
            "slab",
            one(
                self.slab.len(),
                self.slab.capacity(),
                size_of::<Option<Conv>>(),
            ),
        );
        push(
            "by_id",
            one(
                self.by_id.len(),
                self.by_id.capacity(),
                table::<String, usize>(),
            ),
        );
        push(
            "held.map",
            one(
                self.held.map.len(),
                self.held.map.capacity(),
                table::<u64, Held>(),
            ),
        );
        push(
            "held.order",
            one(
                self.held.order.len(),
                self.held.order.capacity(),
                size_of::<u64>(),
            ),
        );
        push(
            "heap",
            one(
                self.heap.len(),
                self.heap.capacity(),
                size_of::<Reverse<Timer>>(),
            ),
        );
        // A B-tree frees its nodes as entries leave: length only (nodes of ~11 entries).
        push(
            "closed",
            one(
                self.closed.len(),
                self.closed.len(),
                size_of::<(u64, (usize, String))>(),
            ),
        );
        let (mut ids, mut open, mut pending, mut closed, mut early, mut timers) = (
            Acc::default(),
            Acc::default(),
            Acc::default(),
            Acc::default(),
            Acc::default(),
            Acc::default(),
        );
        let (mut seen, mut seen_order) = (Acc::default(), Acc::default());
        let (mut names, mut named, mut closed_order) =
            (Acc::default(), Acc::default(), Acc::default());
        for c in self.slab.iter().flatten() {
            ids.add(
                c.calls_by_id.len(),
                c.calls_by_id.capacity(),
                table::<String, u64>(),
            );
            open.add(c.open_calls.len(), c.open_calls.len(), size_of::<u64>());
            pending.add(
                c.pending.len(),
                c.pending.capacity(),
                indexmap::<String, Vec<u64>>(),
            );
            closed.add(
                c.closed.len(),
                c.closed.capacity(),
                indexmap::<String, (bool, u64)>(),
            );
            early.add(c.early.len(), c.early.len(), size_of::<u64>());
            closed_order.add(c.closed_order.len(), c.closed_order.len(), size_of::<u64>());
            for by in [&c.open_by_name, &c.early_by_name] {
                let (n, cap, seqs) = by.usage();
                names.add(n, cap, table::<String, BTreeSet<u64>>());
                named.add(seqs, seqs, size_of::<u64>());
            }
            timers.add(
                c.timers.len(),
                c.timers.capacity(),
                size_of::<Reverse<Timer>>(),
            );
            if let Some(t) = &c.tags {
                let ((l, cap, e), (ol, ocap, oe)) = t.seen_usage();
                seen.add(l, cap, e);
                seen_order.add(ol, ocap, oe);
            }
        }
        push("conv.calls_by_id", ids);
        push("conv.open_calls", open);
        push("conv.pending", pending);
        push("conv.closed", closed);
        push("conv.early", early);
        push("conv.timers", timers);
        push("conv.closed_order", closed_order);
        push("conv.by_name", names);
        push("conv.by_name.seqs", named);
        push("conv.tags.seen", seen);
        push("conv.tags.seen_order", seen_order);
        if let Some(t) = &self.tagger {
            for (name, (l, cap, e)) in t.usage() {
                push(name, one(l, cap, e));
            }
        }
        out
    }
}
