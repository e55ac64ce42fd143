use serde_json::{json, Value};

use crate::verdict::{classify_result, cut, input_rejection};
use crate::vocab::outcome::{EMPTY, ERROR, OK};
use crate::vocab::REJECTION_CHARS;

fn outcome(content: Value, is_error: Option<bool>) -> (&'static str, String) {
    let v = classify_result(&content, is_error);
    (v.outcome, v.why.into_owned())
}

#[test]
fn empty_payloads_are_empty_whatever_their_shape() {
    for (c, why) in [
        (Value::Null, "null"),
        (json!(""), "blank text"),
        (json!(" \n\t"), "blank text"),
        (json!([]), "empty list"),
        (json!({}), "empty object"),
        (
            json!({"content": [{"type": "text", "text": ""}]}),
            "blank text",
        ),
    ] {
        assert_eq!(outcome(c.clone(), None), (EMPTY, why.to_owned()), "{c}");
    }
}

#[test]
fn errors_are_read_from_the_payload_and_the_flag_overrides_it() {
    let mcp = json!({"isError": true, "content": [{"type": "text", "text": "boom"}]});
    assert_eq!(outcome(mcp, None), (ERROR, "MCP isError".to_owned()));
    let status = json!({"status": "error", "message": "bad"});
    assert_eq!(outcome(status, None).0, ERROR);
    assert_eq!(outcome(json!("done"), None), (OK, "text".to_owned()));
    assert_eq!(
        outcome(json!("done"), Some(true)),
        (ERROR, "error flag".to_owned())
    );
    assert_eq!(outcome(json!("done"), Some(false)).0, OK);
    // JSON inside a text result is read as the object it encodes.
    assert_eq!(
        outcome(json!("{\"status\":\"ok\"}"), None),
        (OK, "status ok".to_owned())
    );
}

#[test]
fn input_rejection_reads_refusals_and_the_invalid_params_code() {
    let rej = |c: Value| input_rejection(&classify_result(&c, None));
    assert_eq!(
        rej(json!({"error": {"code": -32602, "message": "Invalid params: x"}})).as_deref(),
        Some("input rejected (JSON-RPC -32602): Invalid params: x")
    );
    assert_eq!(
        rej(json!("Error: Invalid arguments: path is required")).as_deref(),
        Some("input rejected: Invalid arguments: path is required")
    );
    assert_eq!(
        rej(json!("input rejected - bad")).as_deref(),
        Some("input rejected: bad")
    );
    assert_eq!(rej(json!("all good")), None);
    assert_eq!(rej(json!({"status": "error", "message": "bad"})), None);
    // Only the first REJECTION_CHARS characters are read.
    let late = format!("{}Error: invalid arguments", " ".repeat(REJECTION_CHARS));
    assert_eq!(rej(json!(late)), None);
}

#[test]
fn details_are_cut_to_200_characters_with_an_ellipsis() {
    assert_eq!(cut("é".repeat(200)), "é".repeat(200));
    let long = cut("é".repeat(201));
    assert_eq!(long.chars().count(), 200);
    assert!(long.ends_with("..."));
}
