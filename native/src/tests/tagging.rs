use crate::tagging::{point_index, py_g, Cfg, ConvTags, EventTag, Tagger, POINTS};
use crate::vocab::failure_point::{EXECUTION, TERMINATION};

fn tagger(max_calls: u64, max_ms: f64) -> Tagger {
    Tagger::new(Cfg {
        max_calls,
        max_ms,
        max_hashes: 256,
        max_total: 10_000,
    })
}

fn call_tag(key: u64) -> EventTag {
    EventTag::Call {
        key,
        found: Vec::new(),
        failures: Vec::new(),
        detail: None,
    }
}

/// Tags one call and returns (its failure points by name, its detail).
fn on_call(
    t: &mut Tagger,
    tags: &mut Option<Box<ConvTags>>,
    id: &str,
    ts: f64,
    key: u64,
) -> (Vec<&'static str>, Option<String>) {
    let mut tag = call_tag(key);
    t.on_call(tags, 0, "c", Some(id), Some(ts), &mut tag);
    let EventTag::Call {
        failures, detail, ..
    } = tag
    else {
        unreachable!()
    };
    (failures.iter().map(|&i| POINTS[i]).collect(), detail)
}

#[test]
fn py_g_formats_as_python_format_g() {
    // Python: format(x, "g") for each x.
    for (x, g) in [
        (1.5, "1.5"),
        (1e6, "1e+06"),
        (0.0001, "0.0001"),
        (0.00001, "1e-05"),
        (123456.0, "123456"),
        (1234567.0, "1.23457e+06"),
        (90.0, "90"),
        (2.5e-7, "2.5e-07"),
        (0.1 + 0.2, "0.3"),
        (0.0, "0"),
    ] {
        assert_eq!(py_g(x), g, "{x}");
    }
}

#[test]
fn the_calls_cap_tags_the_first_call_past_it_once() {
    let mut t = tagger(2, 0.0);
    let mut tags = None;
    for (i, id) in ["a", "b"].iter().enumerate() {
        assert_eq!(
            on_call(&mut t, &mut tags, id, 0.0, i as u64).0,
            Vec::<&str>::new()
        );
    }
    let (points, detail) = on_call(&mut t, &mut tags, "c", 0.0, 7);
    assert_eq!(points, [TERMINATION]);
    assert_eq!(
        detail.as_deref(),
        Some("call 3 in this request, past the cap of 2")
    );
    assert!(
        on_call(&mut t, &mut tags, "d", 0.0, 8).0.is_empty(),
        "crossed once per request"
    );
    assert_eq!(t.crossings.get("calls"), Some(&1));
    // A new request starts the count again.
    t.on_request(&mut tags, Some(10.0));
    assert!(on_call(&mut t, &mut tags, "e", 10.0, 9).0.is_empty());
}

#[test]
fn the_time_cap_and_repeated_calls_are_termination_points() {
    let mut t = tagger(0, 60_000.0);
    let mut tags = None;
    on_call(&mut t, &mut tags, "a", 0.0, 1);
    let (points, detail) = on_call(&mut t, &mut tags, "b", 61_000.0, 2);
    assert_eq!(points, [TERMINATION]);
    assert_eq!(
        detail.as_deref(),
        Some("call at +61.0 s after the start of this request, past the 60 s cap")
    );
    let (points, detail) = on_call(&mut t, &mut tags, "c", 61_001.0, 1);
    assert_eq!(points, [TERMINATION]);
    assert_eq!(
        detail.as_deref(),
        Some("repeats call a (same tool and arguments; identical call #2)")
    );
    // The same call delivered twice (same id) is a redelivery, not a repeat.
    assert!(on_call(&mut t, &mut tags, "a", 61_002.0, 1).0.is_empty());
}

#[test]
fn write_encodes_the_first_point_by_priority_and_counts_it() {
    let mut t = tagger(0, 0.0);
    let mut r = Vec::new();
    let (outcome, failure) = t.write(&mut r, None, None, true);
    assert_eq!((outcome, failure), (None, Some(EXECUTION)));
    assert_eq!(
        String::from_utf8(r).unwrap(),
        r#","outcome":null,"failures":["execution"],"failure":"execution","failure_detail":"no result within the call timeout""#
    );
    let call = EventTag::Call {
        key: 0,
        found: Vec::new(),
        failures: vec![
            point_index("argument_construction"),
            point_index(TERMINATION),
        ],
        detail: Some("bad args".into()),
    };
    let result = EventTag::Result {
        outcome: "error",
        points: vec![(point_index(EXECUTION), "boom".into())],
    };
    let mut r = Vec::new();
    let (outcome, failure) = t.write(&mut r, Some(&call), Some(&result), false);
    assert_eq!(
        (outcome, failure),
        (Some("error"), Some("argument_construction"))
    );
    let v: serde_json::Value =
        serde_json::from_slice(&[b"{\"x\":0", &r[..], b"}"].concat()).unwrap();
    assert_eq!(
        v["failures"],
        serde_json::json!(["argument_construction", "execution", "termination"])
    );
    assert_eq!(v["failure_detail"], "bad args");
    assert_eq!(t.failures.get("execution"), Some(&1));
    assert_eq!(t.failures.get("argument_construction"), Some(&1));
    assert_eq!(t.outcomes.get("error"), Some(&1));
}
