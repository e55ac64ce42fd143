use super::engine::event;
use crate::pairid::{pair_id, sort_keys};

#[test]
fn equals_blake2b_96_of_the_identity_as_python_hashlib_computes_it() {
    // hashlib.blake2b(b"c1\x1fid\x1ft1\x1fsrc\x1f" + orjson.dumps(source, OPT_SORT_KEYS) + b"\x1f2",
    // digest_size=12).hexdigest(), source = {"line": 3, "file": "a.jsonl"}; and without the id.
    let mut call = event(true, "c1", Some("t1"), None, None);
    call.source = br#"{"line":3,"file":"a.jsonl"}"#.to_vec();
    call.block = 2;
    assert_eq!(pair_id("c1", &call), "a544b9ec07228ec6a7b1a1e4");
    call.id = None;
    assert_eq!(pair_id("c1", &call), "7264bc93d2286077731cc976");
}

#[test]
fn depends_on_every_part_of_the_identity_but_not_on_key_order() {
    let mut a = event(true, "c1", Some("t1"), None, None);
    a.source = br#"{"file":"a.jsonl","line":3}"#.to_vec();
    let base = pair_id("c1", &a);
    assert_eq!(base.len(), 24);
    assert!(base
        .bytes()
        .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
    let mut b = event(true, "c1", Some("t1"), None, None);
    b.source = br#"{"line":3,"file":"a.jsonl"}"#.to_vec();
    assert_eq!(pair_id("c1", &b), base, "source key order must not matter");
    assert_ne!(pair_id("c2", &a), base);
    b.id = Some("t2".into());
    assert_ne!(pair_id("c1", &b), base);
    b.id = Some("t1".into());
    b.block = 1;
    assert_ne!(pair_id("c1", &b), base);
}

#[test]
fn sort_keys_sorts_nested_objects_and_keeps_array_order() {
    let b = br#"{"b":1,"a":{"d":[{"z":1,"y":[2,{"k":0,"j":"}"}]}],"c":2},"\u0001":0}"#;
    let mut out = Vec::new();
    assert_eq!(sort_keys(b, 0, &mut out), b.len());
    assert_eq!(
        String::from_utf8(out).unwrap(),
        r#"{"\u0001":0,"a":{"c":2,"d":[{"y":[2,{"j":"}","k":0}],"z":1}]},"b":1}"#
    );
}
