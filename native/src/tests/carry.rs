//! The engine's memory carried to a new engine (engine/carry.rs, `pair --state`): what the old
//! engine remembers, the new one remembers, within its own limits.

use serde_json::Value;

use super::engine::{config, decoded, event};
use crate::engine::{Config, Engine, Out};

fn run(engine: &mut Engine, is_call: bool, conv: &str, id: &str, ts: f64) -> Vec<String> {
    let mut out = Out::default();
    engine.process(
        event(is_call, conv, Some(id), Some("t"), Some(ts)),
        None,
        &mut out,
    );
    decoded(&out)
        .into_iter()
        .map(|(_, label, _)| label)
        .collect()
}

fn carried(from: &Engine, cfg: Config) -> Engine {
    let mut to = Engine::new(cfg);
    let mut out = Out::default();
    assert_eq!(
        to.import_memory(&from.export_memory(Some(7)), &mut out),
        Ok(Some(7))
    );
    assert_eq!(out.records().count(), 0);
    to.end_restore();
    to
}

#[test]
fn a_new_engine_remembers_the_closed_ids_conversations_and_clocks_of_the_old() {
    let mut old = Engine::new(config());
    for (conv, id, ts) in [("c", "a", 1.0), ("d", "b", 2.0), ("c", "e", 3.0)] {
        run(&mut old, true, conv, id, ts);
        assert_eq!(run(&mut old, false, conv, id, ts + 1.0), ["id"]);
    }
    let mut new = carried(&old, config());
    // the same memory, in the same orders (conversations by recency, ids by closing)
    assert_eq!(new.export_memory(Some(7)), old.export_memory(Some(7)));
    let m: Value = serde_json::from_slice(&new.export_memory(None)).unwrap();
    assert_eq!(m["convs"][0][0], "d"); // c was touched last
    assert_eq!(m["convs"][1][1], Value::from(4.0f64.to_bits()));
    assert_eq!(run(&mut new, false, "c", "a", 9.0), ["duplicate_result"]);
    assert_eq!(run(&mut new, false, "d", "x", 9.0), Vec::<String>::new()); // held, not closed
}

#[test]
fn the_new_engine_keeps_to_its_own_limits() {
    let mut old = Engine::new(config());
    for (i, id) in ["a", "b", "c", "d"].into_iter().enumerate() {
        run(&mut old, true, "c", id, i as f64);
        run(&mut old, false, "c", id, i as f64);
    }
    let mut new = carried(
        &old,
        Config {
            max_closed_ids: 2,
            ..config()
        },
    );
    assert_eq!(new.closed_ids(), 2);
    assert_eq!(run(&mut new, false, "c", "d", 9.0), ["duplicate_result"]);
    assert_eq!(run(&mut new, false, "c", "a", 9.0), Vec::<String>::new()); // forgotten: held
}

#[test]
fn a_memory_of_another_version_or_shape_is_refused() {
    let mut e = Engine::new(config());
    let mut out = Out::default();
    let err = e.import_memory(br#"{"memory":2}"#, &mut out).unwrap_err();
    assert!(err.contains("version 2"), "{err}");
    assert!(e.import_memory(b"not json", &mut out).is_err());
    let bad =
        br#"{"memory":1,"convs":[[1,2]],"closed":[],"tags":[],"queue":[],"pending":[],"held":[]}"#;
    assert!(e
        .import_memory(bad, &mut out)
        .unwrap_err()
        .contains("convs"));
}

#[test]
fn a_held_event_without_a_time_is_replayed_at_the_time_it_was_read() {
    let mut old = Engine::new(config());
    let mut out = Out::default();
    run(&mut old, true, "c", "x", 0.0);
    old.process(event(true, "c", Some("u"), Some("t"), None), None, &mut out);
    run(&mut old, false, "c", "x", 9.0);
    let m: Value = serde_json::from_slice(&old.export_memory(None)).unwrap();
    let read_at = Value::from(0.0f64.to_bits());
    assert_eq!(m["undated"], serde_json::json!([["c", "u", true, read_at]]));
    let mut new = Engine::new(config());
    assert!(new
        .import_memory(&old.export_memory(None), &mut out)
        .is_ok());
    // the replay: u takes 0.0 again, not the clock at the cut (9.0), which stays as it was
    new.process(event(true, "c", Some("u"), Some("t"), None), None, &mut out);
    new.end_restore();
    let again: Value = serde_json::from_slice(&new.export_memory(None)).unwrap();
    assert_eq!(again["undated"], m["undated"]);
    assert_eq!(again["convs"], m["convs"]);
    // after the restore, an undated event takes the conversation's clock, as always
    new.process(event(true, "c", Some("v"), Some("t"), None), None, &mut out);
    let last: Value = serde_json::from_slice(&new.export_memory(None)).unwrap();
    assert_eq!(last["undated"][1][3], Value::from(9.0f64.to_bits()));
}
