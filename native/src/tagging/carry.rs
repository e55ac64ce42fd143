//! The tagger's state read out and put back, for `pair --state` (engine/carry.rs writes it down).
//! A child module of tagging.rs: it reads the private containers, so that the per-request
//! counters, the remembered (tool, arguments) of every conversation and the engine-wide queue
//! that bounds them continue in the next run exactly where this run left them.

use super::{ConvTags, Seen, Tagger};

/// One remembered (tool, arguments), as carried: (hash, first call's id, its number, times seen).
pub type SeenOut = (u64, Option<String>, u64, u64);

impl ConvTags {
    pub fn uid(&self) -> u64 {
        self.uid
    }

    /// (calls in the request, its first time, calls cap crossed, time cap crossed).
    pub fn counters(&self) -> (u64, Option<f64>, bool, bool) {
        (
            self.calls,
            self.first_ts_ms,
            self.calls_crossed,
            self.time_crossed,
        )
    }

    /// Whether the remembered entry `key` is still the one stored under `serial` (a queue item
    /// that no longer matches is stale: it counts against the engine-wide bound, forgets nothing).
    pub fn holds(&self, key: u64, serial: u64) -> bool {
        self.seen.map.get(&key).is_some_and(|e| e.serial == serial)
    }

    /// The remembered entries, oldest first, each with its serial.
    pub fn seen_entries(&self) -> Vec<(SeenOut, u64)> {
        self.seen
            .order
            .iter()
            .filter_map(|&(k, serial)| {
                let e = self.seen.map.get(&k).filter(|e| e.serial == serial)?;
                Some((
                    (k, e.id.as_deref().map(str::to_owned), e.n, e.times),
                    serial,
                ))
            })
            .collect()
    }

    /// One carried entry, newest so far; over `max_hashes` the oldest leaves, as in `termination`.
    pub fn put_seen(&mut self, (key, id, n, times): SeenOut, serial: u64, max_hashes: usize) {
        if self.seen.map.contains_key(&key) {
            return;
        }
        if self.seen.len() >= max_hashes {
            self.seen.remove_oldest();
        }
        let id = id.map(String::into_boxed_str);
        self.seen.insert(
            key,
            Seen {
                id,
                n,
                times,
                serial,
            },
        );
    }
}

impl Tagger {
    /// A conversation's state with these counters and nothing remembered yet (a new uid).
    pub fn carried_state(&mut self, counters: (u64, Option<f64>, bool, bool)) -> Box<ConvTags> {
        self.uids += 1;
        let mut st = ConvTags::new(self.uids);
        (st.calls, st.first_ts_ms, st.calls_crossed, st.time_crossed) = counters;
        Box::new(st)
    }

    /// The engine-wide queue of remembered entries, oldest first: (slot, state uid, key, serial).
    pub fn queue_items(&self) -> impl Iterator<Item = (usize, u64, u64, u64)> + '_ {
        self.queue.iter().copied()
    }

    /// Appends a carried queue item (`None`: a stale one, which keeps its place in the bound);
    /// returns the serial an entry stored with it must carry.
    pub fn push_carried(&mut self, item: Option<(usize, u64, u64)>) -> u64 {
        self.serial += 1;
        let serial = self.serial;
        match item {
            Some((slot, uid, key)) => self.queue.push_back((slot, uid, key, serial)),
            None => self.queue.push_back((usize::MAX, 0, 0, 0)),
        }
        serial
    }

    /// Whether the engine-wide bound of remembered calls is passed (the caller forgets the oldest).
    pub fn over_total(&self) -> bool {
        self.queue.len() > self.cfg.max_total
    }

    /// Request starts of conversations not held yet, oldest first: (conversation id, start time).
    pub fn pending_requests(&self) -> Vec<(String, Option<f64>)> {
        self.pending_order
            .values()
            .filter_map(|cid| Some((cid.clone(), self.pending.get(cid)?.0)))
            .collect()
    }
}
