use serde_json::Value;

use crate::engine::{Config, Engine, Out};
use crate::event::Event;

const TIMEOUT: f64 = 1_000.0;
const GRACE: f64 = 500.0;

pub(super) fn config() -> Config {
    Config {
        call_timeout_ms: TIMEOUT,
        result_grace_ms: GRACE,
        conversation_ttl_ms: 60_000.0,
        max_conversations: 100,
        max_calls_per_conversation: 100,
        max_held_bytes: 1 << 30,
        max_closed_ids_per_conversation: 100,
        max_closed_ids: 1_000,
        held_bytes_per_input_byte: 1.0,
        held_bytes_per_event: 0,
    }
}

/// An event as a reader would produce it: its side is `{"id":..,"name":..}` (no raw block).
pub(super) fn event(
    is_call: bool,
    conversation_id: &str,
    id: Option<&str>,
    name: Option<&str>,
    ts_ms: Option<f64>,
) -> Event {
    let side = serde_json::json!({ "id": id, "name": name })
        .to_string()
        .into_bytes();
    Event {
        is_call,
        conversation_id: conversation_id.to_owned(),
        id: id.map(str::to_owned),
        name: name.map(str::to_owned),
        ts_ms,
        size: 10,
        block: 0,
        raw_at: side.len(),
        side,
        source: br#"{"file":"t.jsonl","line":1}"#.to_vec(),
        format: "",
        tag: None,
    }
}

/// (kind, match or reason, the call side's id or else the event's) of each output record.
pub(super) fn decoded(out: &Out) -> Vec<(String, String, Value)> {
    out.records()
        .map(|r| {
            let v: Value = serde_json::from_slice(r).expect("an output record is JSON");
            let kind = v["kind"].as_str().unwrap().to_owned();
            let label = v.get("match").or(v.get("reason")).unwrap();
            let side = if kind == "pair" {
                &v["call"]
            } else {
                &v["event"]
            };
            (kind, label.as_str().unwrap().to_owned(), side["id"].clone())
        })
        .collect()
}

struct Run {
    engine: Engine,
}

impl Run {
    fn new() -> Self {
        Run {
            engine: Engine::new(config()),
        }
    }
    fn feed(&mut self, ev: Event) -> Vec<(String, String, Value)> {
        let mut out = Out::default();
        self.engine.process(ev, None, &mut out);
        decoded(&out)
    }
    fn advance(&mut self, now: f64) -> Vec<(String, String, Value)> {
        let mut out = Out::default();
        self.engine.advance(now, &mut out);
        decoded(&out)
    }
    fn flush(&mut self) -> Vec<(String, String, Value)> {
        let mut out = Out::default();
        self.engine.flush("shutdown", None, &mut out);
        decoded(&out)
    }
}

fn one(kind: &str, label: &str, id: Option<&str>) -> Vec<(String, String, Value)> {
    vec![(
        kind.to_owned(),
        label.to_owned(),
        id.map_or(Value::Null, Value::from),
    )]
}

#[test]
fn a_result_pairs_with_its_call_by_id_and_the_pair_is_one_record() {
    let mut r = Run::new();
    assert!(r
        .feed(event(true, "c", Some("a"), Some("t"), Some(0.0)))
        .is_empty());
    assert_eq!(r.engine.open_calls, 1);
    assert_eq!(
        r.feed(event(false, "c", Some("a"), None, Some(10.0))),
        one("pair", "id", Some("a"))
    );
    assert_eq!((r.engine.open_calls, r.engine.held_count()), (0, 0));
    assert_eq!(r.engine.counts.get("pair:id"), Some(&1));
}

#[test]
fn an_id_less_result_pairs_by_position_preferring_the_same_tool_name() {
    let mut r = Run::new();
    r.feed(event(true, "c", Some("a"), Some("x"), Some(0.0)));
    r.feed(event(true, "c", Some("b"), Some("y"), Some(1.0)));
    assert_eq!(
        r.feed(event(false, "c", None, Some("y"), Some(2.0))),
        one("pair", "fifo", Some("b"))
    );
    assert_eq!(r.engine.counts.get("pair:fifo:name"), Some(&1));
}

#[test]
fn the_conversation_clock_fires_a_call_timeout_only_past_its_deadline() {
    let mut r = Run::new();
    r.feed(event(true, "c", Some("a"), Some("t"), Some(0.0)));
    // Another conversation's time does not move this one's clock.
    assert!(r
        .feed(event(true, "d", Some("z"), Some("t"), Some(5_000.0)))
        .is_empty());
    // A deadline fires once the clock reaches it (deadline <= clock), not before.
    assert!(r
        .feed(event(true, "c", Some("b"), Some("t"), Some(TIMEOUT - 1.0)))
        .is_empty());
    assert_eq!(
        r.feed(event(true, "c", Some("e"), Some("t"), Some(TIMEOUT))),
        one("orphan_call", "timeout", Some("a"))
    );
}

#[test]
fn a_result_with_an_unknown_id_waits_the_grace_then_is_no_call() {
    let mut r = Run::new();
    assert!(r
        .feed(event(false, "c", Some("q"), None, Some(0.0)))
        .is_empty());
    assert_eq!(r.engine.pending_results, 1);
    // Its call arriving within the grace pairs them (the late call).
    let mut r2 = Run::new();
    r2.feed(event(false, "c", Some("q"), None, Some(0.0)));
    assert_eq!(
        r2.feed(event(true, "c", Some("q"), Some("t"), Some(GRACE - 1.0))),
        one("pair", "id", Some("q"))
    );
    // Without it, the conversation's clock passing the grace emits it.
    assert_eq!(
        r.feed(event(true, "c", Some("other"), Some("t"), Some(GRACE))),
        one("orphan_result", "no_call", Some("q"))
    );
}

#[test]
fn processing_time_fires_what_event_time_cannot() {
    let mut r = Run::new();
    // No event time at all: held on the processing timer only.
    r.feed(event(true, "c", Some("a"), Some("t"), None));
    assert!(
        r.advance(100.0).is_empty(),
        "the first advance only starts the timers"
    );
    assert!(r.advance(100.0 + TIMEOUT - 1.0).is_empty());
    assert_eq!(
        r.advance(100.0 + TIMEOUT),
        one("orphan_call", "timeout", Some("a"))
    );
    assert!(
        r.advance(50.0).is_empty(),
        "processing time never goes back"
    );
}

#[test]
fn a_closed_id_remembers_how_it_closed() {
    let mut r = Run::new();
    r.feed(event(true, "c", Some("a"), Some("t"), Some(0.0)));
    r.feed(event(false, "c", Some("a"), None, Some(1.0)));
    assert_eq!(
        r.feed(event(false, "c", Some("a"), None, Some(2.0))),
        one("orphan_result", "duplicate_result", Some("a"))
    );
    r.feed(event(true, "c", Some("b"), Some("t"), Some(3.0)));
    r.feed(event(true, "c", Some("x"), Some("t"), Some(3.0 + TIMEOUT))); // b times out
    assert_eq!(
        r.feed(event(false, "c", Some("b"), None, Some(4.0 + TIMEOUT))),
        one("orphan_result", "late_result", Some("b"))
    );
    r.feed(event(false, "c", None, Some("t"), Some(5.0 + TIMEOUT))); // pairs x by position
    assert_eq!(
        r.feed(event(false, "c", Some("x"), None, Some(6.0 + TIMEOUT))),
        one("orphan_result", "fifo_conflict", Some("x"))
    );
}

#[test]
fn flush_emits_everything_held_in_arrival_order_and_conserves_events() {
    let mut r = Run::new();
    r.feed(event(true, "c", Some("a"), Some("t"), Some(0.0)));
    r.feed(event(false, "d", Some("q"), None, Some(0.0)));
    r.feed(event(true, "c", Some("b"), Some("t"), Some(1.0)));
    let out = r.flush();
    let ids: Vec<&Value> = out.iter().map(|o| &o.2).collect();
    assert_eq!(
        ids,
        [&Value::from("a"), &Value::from("q"), &Value::from("b")]
    );
    assert!(out.iter().all(|o| o.1 == "shutdown"));
    assert_eq!(
        (r.engine.held_count(), r.engine.open_conversations()),
        (0, 0)
    );
    let emitted: u64 = r.engine.counts.values().sum();
    assert_eq!(emitted, 3);
}

#[test]
fn the_calls_per_conversation_bound_evicts_the_oldest_call() {
    let mut cfg = config();
    cfg.max_calls_per_conversation = 2;
    let mut r = Run {
        engine: Engine::new(cfg),
    };
    r.feed(event(true, "c", Some("a"), Some("t"), Some(0.0)));
    r.feed(event(true, "c", Some("b"), Some("t"), Some(0.0)));
    assert_eq!(
        r.feed(event(true, "c", Some("e"), Some("t"), Some(0.0))),
        one("orphan_call", "evicted", Some("a"))
    );
    assert_eq!(r.engine.evictions.get("calls_per_conversation"), Some(&1));
}
