use crate::scan;

#[test]
fn accepts_one_canonical_value() {
    let b = br#"{"a":1,"b":[true,null,"x"]}"#;
    assert_eq!(scan::value(b, 0, 0, None), Some(b.len()));
}
