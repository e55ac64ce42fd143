//! Failure-point tagging: a port of `FailureTagger` (stream_pairer/core/tagging.py).
//!
//! What is a pure function of one event (the call's arguments and schema check, the result's
//! verdict) is worked out when the event is read (pytag.rs) and travels with it as an `EventTag`;
//! what depends on the order of calls (repeats, loop caps, request starts) is kept here and run
//! by the engine exactly where engine.py calls the tagger. The Python tagger is the specification;
//! its docstrings say why each rule exists.

use std::collections::{BTreeMap, HashMap, VecDeque};

use indexmap::IndexMap;
use rustc_hash::{FxBuildHasher, FxHashMap};

use crate::out::{write_opt_str, write_str};
use crate::verdict::cut;
use crate::vocab::failure_point::{EXECUTION, TERMINATION};
use crate::vocab::loop_cap::{CALLS, TIME};
use crate::vocab::MAX_PENDING_REQUESTS;

mod carry;
pub use carry::SeenOut;

/// The failure points in priority order (the vocabulary's FailurePoint, in its order).
pub use crate::vocab::failure_point::ALL as POINTS;

pub fn point_index(p: &str) -> usize {
    POINTS.iter().position(|x| *x == p).unwrap_or(POINTS.len())
}

/// What the tagger knows of one event from the event alone.
pub enum EventTag {
    /// A call: the identity of (tool, arguments) for the repeat check, the points its arguments
    /// and schema gave (priority index, detail), and after `on_call` its failure points.
    Call {
        key: u64,
        found: Vec<(usize, String)>,
        failures: Vec<usize>,
        detail: Option<String>,
    },
    /// A result: its outcome and the points it adds, in the order tag() `setdefault`s them.
    Result {
        outcome: &'static str,
        points: Vec<(usize, String)>,
    },
}

pub struct Cfg {
    pub max_calls: u64,
    pub max_ms: f64,
    pub max_hashes: usize,
    pub max_total: usize,
}

/// One remembered (tool, arguments): the first such call's id (its label; without one, its number
/// in the request, `n`), times seen, and the serial of the entry.
struct Seen {
    id: Option<Box<str>>,
    n: u64,
    times: u64,
    serial: u64,
}

/// `_ConvState.seen`: a Python dict's insertion order with O(1) removal of its oldest entry and of
/// any entry. `order` holds (key, serial) in insertion order; an entry removed from `map` leaves
/// a stale item there, skipped when it reaches the front and compacted when stale items dominate
/// (an IndexMap's `shift_remove` moved all 256 entries on every call past the cap).
#[derive(Default)]
struct SeenMap {
    map: FxHashMap<u64, Seen>,
    order: VecDeque<(u64, u64)>,
}

impl SeenMap {
    fn len(&self) -> usize {
        self.map.len()
    }
    fn insert(&mut self, key: u64, seen: Seen) {
        self.order.push_back((key, seen.serial));
        self.map.insert(key, seen);
    }
    /// A removal by the engine-wide bound (`forget`). Capacity is released as entries leave: a
    /// hash map and a deque keep their allocation when emptied, so without this each of 100,000
    /// conversations kept tables sized for its busiest moment, and the sum crept up while the
    /// entries stayed at the bound (bench/state_growth.py --engine native). Emptied: replaced,
    /// as the Python tagger clears an emptied `seen`; else shrunk once capacity is four times
    /// the entries (amortized: half the entries leave between two shrinks), stale order items
    /// compacted past twice the entries.
    fn remove(&mut self, key: u64) {
        self.map.remove(&key);
        if self.map.is_empty() {
            *self = SeenMap::default();
            return;
        }
        // The engine-wide bound forgets the oldest entries first, so the item just left stale
        // is usually at the front: dropped at once, the order stays as long as the map.
        while let Some(&(k, serial)) = self.order.front() {
            if self.map.get(&k).is_some_and(|e| e.serial == serial) {
                break;
            }
            self.order.pop_front();
        }
        if self.order.len() > 2 * self.map.len() + 4 {
            let map = &self.map;
            self.order
                .retain(|(k, serial)| map.get(k).is_some_and(|e| e.serial == *serial));
        }
        if self.map.capacity() > 4 * self.map.len() {
            self.map.shrink_to_fit();
        }
        if self.order.capacity() > 4 * self.order.len() + 4 {
            self.order.shrink_to_fit();
        }
    }
    /// `del seen[next(iter(seen))]`.
    fn remove_oldest(&mut self) {
        while let Some((key, serial)) = self.order.pop_front() {
            if self.map.get(&key).is_some_and(|e| e.serial == serial) {
                self.map.remove(&key);
                return;
            }
        }
    }
}

/// `_ConvState`, kept in the engine's conversation (dropped with it). `uid` tells the process-wide
/// queue whether a slot still holds the state an entry was stored in.
pub struct ConvTags {
    uid: u64,
    calls: u64,
    first_ts_ms: Option<f64>,
    calls_crossed: bool,
    time_crossed: bool,
    seen: SeenMap,
}

pub struct Tagger {
    pub cfg: Cfg,
    /// Every entry stored in any conversation's `seen`, oldest first: (slot, state uid, key, serial).
    queue: VecDeque<(usize, u64, u64, u64)>,
    serial: u64,
    uids: u64,
    pub crossings: IndexMap<&'static str, u64, FxBuildHasher>,
    pub outcomes: IndexMap<&'static str, u64, FxBuildHasher>,
    pub failures: IndexMap<&'static str, u64, FxBuildHasher>,
    /// conversation id -> (request start time, stamp); `pending_order` is stamp -> id, oldest first.
    /// Keyed hasher: conversation ids are untrusted (see engine.rs `Keyed`).
    pending: HashMap<String, (Option<f64>, u64), foldhash::fast::RandomState>,
    pending_order: BTreeMap<u64, String>,
    pending_stamp: u64,
}

fn bump(m: &mut IndexMap<&'static str, u64, FxBuildHasher>, k: &'static str) {
    *m.entry(k).or_insert(0) += 1;
}

/// Python's `format(x, "g")`: 6 significant digits, trailing zeros dropped, an exponent outside
/// 1e-4 <= |x| < 1e6.
pub fn py_g(x: f64) -> String {
    if x == 0.0 {
        return if x.is_sign_negative() { "-0" } else { "0" }.to_owned();
    }
    if !x.is_finite() {
        return if x.is_nan() {
            "nan".to_owned()
        } else if x > 0.0 {
            "inf".to_owned()
        } else {
            "-inf".to_owned()
        };
    }
    let sci = format!("{x:.5e}");
    let (mant, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let strip = |s: &str| -> String {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_owned()
        } else {
            s.to_owned()
        }
    };
    if (-4..6).contains(&exp) {
        let prec = (5 - exp).max(0) as usize;
        strip(&format!("{x:.prec$}"))
    } else {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{}e{sign}{:02}", strip(mant), exp.abs())
    }
}

/// An entry leaving the engine-wide queue of remembered calls.
pub struct Forget {
    pub slot: usize,
    uid: u64,
    key: u64,
    serial: u64,
}

impl ConvTags {
    /// `_forget_oldest`, second half: drop the entry if this state still holds that very one.
    pub fn forget(&mut self, f: &Forget) {
        if self.uid == f.uid
            && self
                .seen
                .map
                .get(&f.key)
                .is_some_and(|e| e.serial == f.serial)
        {
            self.seen.remove(f.key);
        }
    }

    /// (len, capacity, bytes per slot) of `seen`'s map and its order queue (engine_memory.rs).
    pub fn seen_usage(&self) -> ((usize, usize, usize), (usize, usize, usize)) {
        let s = &self.seen;
        (
            (
                s.map.len(),
                s.map.capacity(),
                std::mem::size_of::<(u64, Seen)>() + 1,
            ),
            (
                s.order.len(),
                s.order.capacity(),
                std::mem::size_of::<(u64, u64)>(),
            ),
        )
    }

    fn new(uid: u64) -> Self {
        ConvTags {
            uid,
            calls: 0,
            first_ts_ms: None,
            calls_crossed: false,
            time_crossed: false,
            seen: SeenMap::default(),
        }
    }
}

enum Term {
    Redelivery,
    Detail(Option<String>),
}

impl Tagger {
    pub fn new(cfg: Cfg) -> Self {
        Tagger {
            cfg,
            queue: VecDeque::new(),
            serial: 0,
            uids: 0,
            crossings: IndexMap::default(),
            outcomes: IndexMap::default(),
            failures: IndexMap::default(),
            pending: HashMap::default(),
            pending_order: BTreeMap::new(),
            pending_stamp: 0,
        }
    }

    /// (name, (len, capacity, bytes per slot)) of the tagger's own containers (engine_memory.rs).
    pub fn usage(&self) -> [(&'static str, (usize, usize, usize)); 3] {
        [
            (
                "tagger.queue",
                (
                    self.queue.len(),
                    self.queue.capacity(),
                    std::mem::size_of::<(usize, u64, u64, u64)>(),
                ),
            ),
            (
                "tagger.pending",
                (
                    self.pending.len(),
                    self.pending.capacity(),
                    std::mem::size_of::<(String, (Option<f64>, u64))>() + 1,
                ),
            ),
            (
                "tagger.pending_order",
                (
                    self.pending_order.len(),
                    self.pending_order.len(),
                    std::mem::size_of::<(u64, String)>(),
                ),
            ),
        ]
    }

    /// `remembered_calls`: the queue's length (an upper bound of the hashes held).
    pub fn remembered_calls(&self) -> usize {
        self.queue.len()
    }

    fn state<'a>(&mut self, tags: &'a mut Option<Box<ConvTags>>) -> &'a mut ConvTags {
        if tags.is_none() {
            self.uids += 1;
            *tags = Some(Box::new(ConvTags::new(self.uids)));
        }
        tags.as_deref_mut().expect("just set")
    }

    /// `on_request`: a new request starts in a conversation the engine holds.
    pub fn on_request(&mut self, tags: &mut Option<Box<ConvTags>>, ts_ms: Option<f64>) {
        let st = self.state(tags);
        st.calls = 0;
        st.first_ts_ms = ts_ms;
        st.calls_crossed = false;
        st.time_crossed = false;
    }

    /// `on_pending_request`: remembered (bounded) until the conversation's first call.
    pub fn on_pending_request(&mut self, conversation_id: &str, ts_ms: Option<f64>) {
        self.pending_stamp += 1;
        let stamp = self.pending_stamp;
        if let Some((_, old)) = self
            .pending
            .insert(conversation_id.to_owned(), (ts_ms, stamp))
        {
            self.pending_order.remove(&old);
        }
        self.pending_order.insert(stamp, conversation_id.to_owned());
        if self.pending.len() > MAX_PENDING_REQUESTS {
            if let Some((_, cid)) = self.pending_order.pop_first() {
                self.pending.remove(&cid);
            }
        }
    }

    /// `on_call`: sets the call's failure points. Returns whether the engine-wide bound of
    /// remembered calls was passed (the caller then runs `forget_oldest`, which needs the other
    /// conversations' states).
    pub fn on_call(
        &mut self,
        tags: &mut Option<Box<ConvTags>>,
        slot: usize,
        conversation_id: &str,
        id: Option<&str>,
        ts: Option<f64>,
        tag: &mut EventTag,
    ) -> bool {
        if tags.is_none() {
            let first = if self.pending.is_empty() {
                None
            } else {
                self.pending.remove(conversation_id)
            };
            let st = self.state(tags);
            if let Some((start, stamp)) = first {
                self.pending_order.remove(&stamp);
                st.first_ts_ms = start; // its request's prompt
            }
        }
        let st = tags.as_deref_mut().expect("state set");
        let EventTag::Call {
            key,
            found,
            failures,
            detail,
        } = tag
        else {
            return false;
        };
        let (term, forget) = self.termination(st, slot, id, ts, *key);
        let mut points: Vec<(usize, Option<&String>)> =
            found.iter().map(|(p, d)| (*p, Some(d))).collect();
        let term_detail;
        if let Term::Detail(Some(d)) = term {
            term_detail = d;
            points.push((point_index(TERMINATION), Some(&term_detail)));
        }
        points.sort_by_key(|p| p.0);
        *failures = points.iter().map(|p| p.0).collect();
        *detail = points.first().and_then(|p| p.1.cloned());
        forget
    }

    fn termination(
        &mut self,
        st: &mut ConvTags,
        slot: usize,
        id: Option<&str>,
        ts: Option<f64>,
        key: u64,
    ) -> (Term, bool) {
        if let (Some(prev), Some(id)) = (st.seen.map.get(&key), id) {
            if prev.id.as_deref() == Some(id) {
                return (Term::Redelivery, false);
            }
        }
        st.calls += 1;
        let n = st.calls;
        if let Some(t) = ts {
            if st.first_ts_ms.is_none_or(|f| t < f) {
                st.first_ts_ms = Some(t);
            }
        }
        let mut detail: Option<String> = None;
        let mut forget = false;
        if let Some(prev) = st.seen.map.get_mut(&key) {
            prev.times += 1;
            detail = Some(match &prev.id {
                Some(label) => format!(
                    "repeats call {label} (same tool and arguments; identical call #{})",
                    prev.times
                ),
                None => format!(
                    "repeats call #{} (no id) (same tool and arguments; identical call #{})",
                    prev.n, prev.times
                ),
            });
        } else {
            if st.seen.len() >= self.cfg.max_hashes {
                st.seen.remove_oldest();
            }
            self.serial += 1;
            let serial = self.serial;
            st.seen.insert(
                key,
                Seen {
                    id: id.map(Box::from),
                    n,
                    times: 1,
                    serial,
                },
            );
            self.queue.push_back((slot, st.uid, key, serial));
            forget = self.queue.len() > self.cfg.max_total;
        }
        let max_calls = self.cfg.max_calls;
        if max_calls > 0 && n > max_calls && !st.calls_crossed {
            st.calls_crossed = true;
            bump(&mut self.crossings, CALLS);
            detail.get_or_insert_with(|| {
                format!("call {n} in this request, past the cap of {max_calls}")
            });
        }
        let max_ms = self.cfg.max_ms;
        if let (true, Some(t), Some(first), false) =
            (max_ms != 0.0, ts, st.first_ts_ms, st.time_crossed)
        {
            let elapsed = t - first;
            if elapsed > max_ms {
                st.time_crossed = true;
                bump(&mut self.crossings, TIME);
                detail.get_or_insert_with(|| {
                    format!(
                        "call at +{:.1} s after the start of this request, past the {} s cap",
                        elapsed / 1000.0,
                        py_g(max_ms / 1000.0)
                    )
                });
            }
        }
        (Term::Detail(detail.map(cut)), forget)
    }

    /// `_forget_oldest`, first half: the oldest remembered entry leaves the queue; the caller
    /// passes it to `ConvTags::forget` of the state its slot holds now, if any.
    pub fn pop_oldest(&mut self) -> Option<Forget> {
        let (slot, uid, key, serial) = self.queue.pop_front()?;
        Some(Forget {
            slot,
            uid,
            key,
            serial,
        })
    }

    /// `tag(record, call, result)`: writes `"outcome","failures","failure","failure_detail"`
    /// (the keys tag() adds to the record dict, in its order) and counts them for the summary.
    /// `timeout` is an orphan call emitted for its call timeout. Returns (outcome, failure), what
    /// the record's OutputMeta carries.
    pub fn write(
        &mut self,
        r: &mut Vec<u8>,
        call: Option<&EventTag>,
        result: Option<&EventTag>,
        timeout: bool,
    ) -> (Option<&'static str>, Option<&'static str>) {
        let mut found: [Option<Option<&str>>; 5] = [None; 5];
        if let Some(EventTag::Call {
            failures, detail, ..
        }) = call
        {
            for (i, p) in failures.iter().enumerate() {
                found[*p] = Some(if i == 0 { detail.as_deref() } else { None });
            }
        }
        let mut outcome = None;
        if let Some(EventTag::Result { outcome: o, points }) = result {
            outcome = Some(*o);
            for (p, d) in points {
                found[*p].get_or_insert(Some(d.as_str()));
            }
        } else if timeout {
            found[point_index(EXECUTION)].get_or_insert(Some("no result within the call timeout"));
        }
        r.extend_from_slice(b",\"outcome\":");
        write_opt_str(r, outcome);
        r.extend_from_slice(b",\"failures\":[");
        let mut first: Option<usize> = None;
        for (i, f) in found.iter().enumerate() {
            if f.is_some() {
                if first.is_some() {
                    r.push(b',');
                } else {
                    first = Some(i);
                }
                write_str(r, POINTS[i]);
            }
        }
        r.extend_from_slice(b"],\"failure\":");
        write_opt_str(r, first.map(|i| POINTS[i]));
        r.extend_from_slice(b",\"failure_detail\":");
        write_opt_str(r, first.and_then(|i| found[i].flatten()));
        if let Some(o) = outcome {
            bump(&mut self.outcomes, o);
        }
        if let Some(i) = first {
            bump(&mut self.failures, POINTS[i]);
        }
        (outcome, first.map(|i| POINTS[i]))
    }
}
