//! File mode's batch entry point (batch.rs): the kind read from an encoded record's prefix, and
//! the blank-line rule it shares with Python's `bytes.strip()`.

use crate::batch::{is_blank, kind_index};

#[test]
fn kinds_are_read_from_the_record_prefix() {
    assert_eq!(kind_index(br#"{"kind":"pair","x":1}"#), 0);
    assert_eq!(kind_index(br#"{"kind":"orphan_call","x":1}"#), 1);
    assert_eq!(kind_index(br#"{"kind":"orphan_result","x":1}"#), 2);
    assert_eq!(kind_index(br#"{"kind":"dead_letter","x":1}"#), 3);
}

#[test]
fn blank_is_pythons_strip_whitespace() {
    assert!(is_blank(b" \t\x0b\x0c\r"));
    assert!(is_blank(b""));
    assert!(!is_blank(b" {} "));
    assert!(!is_blank("\u{a0}".as_bytes())); // not ASCII whitespace: bytes.strip() keeps it
}
