use crate::out::{write_f64, write_str};
use crate::scan;
use crate::vocab::MAX_DEPTH;

fn canonical(b: &[u8]) -> bool {
    scan::value(b, 0, 0, None) == Some(b.len())
}

#[test]
fn accepts_values_as_orjson_writes_them() {
    for v in [
        &br#"{"a":1,"b":[true,null,"x"],"c":{"d":-2.5}}"#[..],
        b"[]",
        b"{}",
        b"\"caf\xc3\xa9 \\n\\t\\\"q\\\"\"",
        b"18446744073709551615",
        b"-9223372036854775808",
        b"1e+16",
    ] {
        assert!(canonical(v), "{}", String::from_utf8_lossy(v));
    }
}

#[test]
fn rejects_what_orjson_would_rewrite() {
    for v in [
        &br#"{"a": 1}"#[..],     // insignificant whitespace
        br#"{"a":1,"a":2}"#,     // duplicate key: orjson keeps the last value
        br#""a\/b""#,            // an escape orjson does not write
        br#""\u00e9""#,          // a non-control character escaped
        b"1E5",                  // not orjson's float layout
        b"1.50",                 // trailing zero
        b"18446744073709551616", // past u64: orjson reads it as a float
        b"-0",                   // orjson writes the integer 0
        b"[1,]",                 // not JSON at all
    ] {
        assert!(!canonical(v), "{}", String::from_utf8_lossy(v));
    }
}

#[test]
fn nesting_is_bounded_by_max_depth() {
    let nest = |n: usize| [vec![b'['; n], vec![b']'; n]].concat();
    assert!(canonical(&nest(MAX_DEPTH as usize)));
    assert!(!canonical(&nest(MAX_DEPTH as usize + 1)));
}

#[test]
fn every_float_the_encoder_writes_is_accepted_and_reads_back() {
    let mut x = 1.0e-300_f64;
    while x < 1.0e300 {
        for v in [x, -x, x * 3.7, 1.0 / x] {
            let mut b = Vec::new();
            write_f64(&mut b, v);
            assert!(canonical(&b), "{v}: {}", String::from_utf8_lossy(&b));
            let back: f64 = std::str::from_utf8(&b).unwrap().parse().unwrap();
            assert_eq!(back, v);
        }
        x *= 13.3;
    }
}

#[test]
fn every_string_the_encoder_writes_is_accepted_and_unescapes_to_itself() {
    let samples = [
        "plain",
        "quote \" backslash \\ slash /",
        "controls \u{0} \u{1f} \n \r \t \u{8} \u{c}",
        "non-ASCII: é ü 漢字 🙂 \u{2028}",
        "",
    ];
    for s in samples {
        let mut b = Vec::new();
        write_str(&mut b, s);
        assert!(canonical(&b), "{s:?}");
        assert_eq!(scan::unescape(&b[1..b.len() - 1]), s);
    }
}

#[test]
fn members_and_elements_index_a_validated_value() {
    let b = br#"{"a":[1,{"x":"]"}],"b":"}","c":null}"#;
    assert!(canonical(b));
    let m = scan::members(b, 0).unwrap();
    let keys: Vec<&[u8]> = m.iter().map(|x| x.key).collect();
    assert_eq!(keys, [&b"a"[..], b"b", b"c"]);
    assert_eq!(&b[m[1].start..m[1].end], br#""}""#);
    let els = scan::elements(b, m[0].start).unwrap();
    let texts: Vec<&[u8]> = els.iter().map(|&(s, e)| &b[s..e]).collect();
    assert_eq!(texts, [&b"1"[..], br#"{"x":"]"}"#]);
    assert_eq!(scan::skip(b, m[0].start), Some(m[0].end));
}
