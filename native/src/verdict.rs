//! What a result payload says (ok / empty / error) and whether it is the tool refusing the model's
//! input: a port of `classify_result` and `input_rejection` of stream_pairer/core/tagging.py.
//!
//! The Python functions are the specification (tests/core/test_native_differential.py compares
//! the tagged output of both); the docstrings there say why each rule exists. Payloads arrive as
//! canonical JSON and are decoded with serde_json: this runs once per result, when it arrives.

use std::borrow::Cow;
use std::sync::OnceLock;

use regex::Regex;
use serde_json::{Map, Value};

use crate::text::{py_space, py_strip};
use crate::vocab::outcome::{EMPTY, ERROR, OK};
use crate::vocab::{
    BEDROCK_BLOCKS, JSONRPC_INVALID_PARAMS, MAX_DECODE_CHARS, MAX_DETAIL, MAX_UNWRAP, OTHER_BLOCKS,
    REJECTION, REJECTION_CHARS, REJECTION_PREFIX, TEXT_BLOCKS,
};

/// `tagging.Verdict`. `code` is the JSON-RPC error code as Python prints it (an int, or a bool:
/// `isinstance(True, int)` holds in Python, so a boolean `code` counts as one there too).
/// `text` borrows from the payload where it can (most results are text, and most texts are kept
/// only to be matched against the rejection patterns).
pub struct Verdict<'a> {
    pub outcome: &'static str,
    pub why: Cow<'static, str>,
    pub text: Option<Cow<'a, str>>,
    pub code: Option<String>,
}

impl Verdict<'_> {
    fn into_owned(self) -> Verdict<'static> {
        Verdict {
            outcome: self.outcome,
            why: self.why,
            text: self.text.map(|t| Cow::Owned(t.into_owned())),
            code: self.code,
        }
    }
}

fn v(outcome: &'static str, why: &'static str) -> Verdict<'static> {
    Verdict {
        outcome,
        why: Cow::Borrowed(why),
        text: None,
        code: None,
    }
}

fn vt<'a>(outcome: &'static str, why: &'static str, text: Option<&'a str>) -> Verdict<'a> {
    Verdict {
        outcome,
        why: Cow::Borrowed(why),
        text: text.map(Cow::Borrowed),
        code: None,
    }
}

/// `classify_result(content, is_error)`.
pub fn classify_result(content: &Value, is_error: Option<bool>) -> Verdict<'_> {
    flagged(payload(content, true, 0), is_error)
}

/// `classify_result` of a string payload, without building a JSON value for it.
pub fn classify_text(s: &str, is_error: Option<bool>) -> Verdict<'_> {
    flagged(text(s, 0), is_error)
}

/// The result's own error flag overrides what its content says (`classify_result`'s last step).
fn flagged(r: Verdict<'_>, is_error: Option<bool>) -> Verdict<'_> {
    if is_error == Some(true) && r.outcome != ERROR {
        return Verdict {
            outcome: ERROR,
            why: Cow::Borrowed("error flag"),
            text: r.text,
            code: r.code,
        };
    }
    r
}

fn payload(value: &Value, blocks: bool, depth: u32) -> Verdict<'_> {
    match value {
        Value::Null => v(EMPTY, "null"),
        Value::String(s) => text(s, depth),
        Value::Array(items) => {
            if items.is_empty() {
                return v(EMPTY, "empty list");
            }
            if blocks {
                if let Some(r) = content_blocks(items, depth) {
                    return r;
                }
            }
            v(OK, "data")
        }
        Value::Object(d) => object(d, depth),
        _ => v(OK, "data"),
    }
}

fn text(s: &str, depth: u32) -> Verdict<'_> {
    let t = py_strip(s);
    if t.is_empty() {
        return v(EMPTY, "blank text");
    }
    if t == "null" {
        return v(EMPTY, "null");
    }
    let first = t.as_bytes()[0];
    let last = *t.as_bytes().last().unwrap_or(&0);
    if (first == b'[' && last == b']' || first == b'{' && last == b'}')
        && t.len() >= 2
        && py_strip(&t[1..t.len() - 1]).is_empty()
    {
        return v(
            EMPTY,
            if first == b'[' {
                "empty list"
            } else {
                "empty object"
            },
        );
    }
    if (first == b'{' || first == b'"')
        && depth < MAX_UNWRAP
        && (t.len() <= MAX_DECODE_CHARS || t.chars().count() <= MAX_DECODE_CHARS)
    {
        let Ok(decoded) = serde_json::from_str::<Value>(t) else {
            return vt(OK, "text", Some(s));
        };
        if decoded.is_object() || decoded.is_string() {
            let r = payload(&decoded, false, depth + 1).into_owned();
            if r.text.is_some() {
                return r;
            }
            return Verdict {
                text: Some(Cow::Borrowed(s)),
                ..r
            };
        }
    }
    vt(OK, "text", Some(s))
}

fn str_of<'a>(d: &'a Map<String, Value>, k: &str) -> Option<&'a str> {
    d.get(k).and_then(Value::as_str)
}

fn content_blocks(items: &[Value], depth: u32) -> Option<Verdict<'_>> {
    let mut texts: Vec<&str> = Vec::new();
    let mut others = 0usize;
    let mut json_values: Vec<&Value> = Vec::new();
    for b in items {
        let d = b.as_object()?;
        match d.get("type") {
            Some(Value::String(bt)) => {
                if TEXT_BLOCKS.contains(&bt.as_str()) && str_of(d, "text").is_some() {
                    texts.push(str_of(d, "text").unwrap_or_default());
                } else if OTHER_BLOCKS.contains(&bt.as_str()) {
                    others += 1;
                } else {
                    return None;
                }
            }
            None | Some(Value::Null)
                if d.len() == 1 && d.keys().all(|k| BEDROCK_BLOCKS.contains(&k.as_str())) =>
            {
                if let Some(t) = str_of(d, "text") {
                    texts.push(t);
                } else if let Some(j) = d.get("json") {
                    json_values.push(j);
                } else {
                    others += 1;
                }
            }
            _ => return None,
        }
    }
    let first_text = || texts.first().copied();
    if others > 0 {
        return Some(vt(OK, "content", first_text()));
    }
    if json_values.len() == 1 && texts.is_empty() {
        return Some(payload(json_values[0], false, depth + 1));
    }
    if !json_values.is_empty() {
        return Some(vt(OK, "content", first_text()));
    }
    if texts.iter().all(|t| py_strip(t).is_empty()) {
        return Some(v(EMPTY, "blank text"));
    }
    if texts.len() == 1 {
        return Some(text(texts[0], depth + 1));
    }
    let said = texts.iter().find(|t| !py_strip(t).is_empty()).copied();
    Some(vt(OK, "content", said))
}

fn is_status(s: Option<&Value>) -> Option<&str> {
    match s {
        Some(Value::String(s)) if matches!(s.as_str(), OK | EMPTY | ERROR) => Some(s),
        _ => None,
    }
}

/// Python's `isinstance(x, int)` of a decoded JSON value (booleans included), printed.
fn py_int(x: Option<&Value>) -> Option<String> {
    match x? {
        Value::Bool(b) => Some(if *b { "True" } else { "False" }.to_owned()),
        Value::Number(n) if n.is_i64() || n.is_u64() => Some(n.to_string()),
        _ => None,
    }
}

fn object(d: &Map<String, Value>, depth: u32) -> Verdict<'_> {
    if d.is_empty() {
        return v(EMPTY, "empty object");
    }
    if let Some(status) = is_status(d.get("status")) {
        return status_object(d, status);
    }
    if depth < MAX_UNWRAP {
        if let Some(inner) = unwrapped(d, depth) {
            return inner;
        }
    }
    if d.contains_key("code")
        && d.contains_key("message")
        && d.keys()
            .all(|k| matches!(k.as_str(), "code" | "message" | "data"))
        && py_int(d.get("code")).is_some()
    {
        return error_fields(d);
    }
    v(OK, "data")
}

fn status_object<'a>(d: &'a Map<String, Value>, status: &str) -> Verdict<'a> {
    let text = str_of(d, "hint").or_else(|| str_of(d, "data"));
    if status == ERROR {
        return vt(ERROR, "status error", text);
    }
    if status == EMPTY {
        return vt(EMPTY, "status empty", text);
    }
    if d.get("data").is_some_and(is_empty) {
        return vt(EMPTY, "status ok with empty data", text);
    }
    vt(OK, "status ok", text)
}

fn unwrapped(d: &Map<String, Value>, depth: u32) -> Option<Verdict<'_>> {
    if d.get("content").is_some_and(Value::is_array)
        && d.keys().all(|k| {
            matches!(
                k.as_str(),
                "content" | "isError" | "structuredContent" | "_meta"
            )
        })
    {
        return Some(mcp_result(d, depth));
    }
    if d.contains_key("jsonrpc") {
        if let Some(err) = d.get("error").filter(|e| !e.is_null()) {
            return Some(error_object(err));
        }
        if let Some(result) = d.get("result") {
            return Some(payload(result, true, depth + 1));
        }
    }
    if d.len() == 1 {
        let (key, inner) = d.iter().next()?;
        if key == "error" && !inner.is_null() {
            return Some(error_object(inner));
        }
        if key == "output" || key == "result" {
            return Some(payload(inner, false, depth + 1));
        }
    }
    None
}

fn mcp_result(d: &Map<String, Value>, depth: u32) -> Verdict<'_> {
    let content = &d["content"];
    if d.get("isError") == Some(&Value::Bool(true)) {
        let inner = payload(content, true, depth + 1);
        return Verdict {
            text: inner.text,
            ..v(ERROR, "MCP isError")
        };
    }
    if let Some(Value::Object(sc)) = d.get("structuredContent") {
        if is_status(sc.get("status")).is_some() {
            return object(sc, depth + 1);
        }
    }
    payload(content, true, depth + 1)
}

fn error_object(err: &Value) -> Verdict<'_> {
    if let Value::Object(e) = err {
        return error_fields(e);
    }
    vt(ERROR, "error object", err.as_str())
}

fn error_fields(e: &Map<String, Value>) -> Verdict<'_> {
    let code = py_int(e.get("code"));
    let why = match &code {
        Some(c) => Cow::Owned(format!("JSON-RPC error {c}")),
        None => Cow::Borrowed("error object"),
    };
    Verdict {
        outcome: ERROR,
        why,
        text: str_of(e, "message").map(Cow::Borrowed),
        code,
    }
}

fn is_empty(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        Value::String(s) => py_strip(s).is_empty(),
        _ => false,
    }
}

/// Python `re`'s `\s` in a str pattern is `str.isspace`: Unicode White_Space plus \x1c-\x1f.
const S: &str = r"[\s\x1c-\x1f]";

/// A pattern of the vocabulary (Python `re` syntax) for the `regex` crate: case-insensitive (the
/// Python side compiles it with `re.I`), anchored at the start as `re.match` anchors it, and `\s`
/// spelled as Python reads it. The `regex` crate's leftmost-first semantics, `\b` and `\d` are
/// Python's for these patterns (Unicode classes); tests/core/test_native_differential.py and the
/// rejection tests compare both on the same texts.
fn python_re(pattern: &str) -> Regex {
    let body = pattern
        .strip_prefix('^')
        .unwrap_or(pattern)
        .replace(r"\s", S);
    Regex::new(&format!("(?i)^{body}")).expect("a vocabulary pattern compiles")
}

/// The vocabulary's REJECTION_PREFIX.
fn prefix_re() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| python_re(REJECTION_PREFIX))
}

/// The vocabulary's REJECTION.
fn rejection_re() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| python_re(REJECTION))
}

/// `input_rejection(v)`: `failure_detail` when the result is the tool refusing the input.
pub fn input_rejection(r: &Verdict) -> Option<String> {
    if r.code.as_deref().and_then(|c| c.parse::<i64>().ok()) == Some(JSONRPC_INVALID_PARAMS) {
        let said = match r.text.as_deref() {
            Some(t) if !t.is_empty() => format!(": {}", first_line(t)),
            _ => String::new(),
        };
        return Some(cut(format!(
            "input rejected (JSON-RPC {JSONRPC_INVALID_PARAMS}){said}"
        )));
    }
    let t = r.text.as_deref()?;
    let head = match t.char_indices().nth(REJECTION_CHARS) {
        Some((i, _)) => &t[..i],
        None => t,
    };
    // Both patterns read from the first non-blank character (`S` is `py_space`), which must start
    // `<tool_use_error>`, `mcp`/`error` (the prefix) or a refusal: most texts fail here, without
    // running either regex (3 % of the tagged path). Case-insensitive `regex` folds none of these
    // letters to a non-ASCII one (it uses simple case folding: `İ` is not `i`).
    if !matches!(
        head.trim_start_matches(py_space).chars().next(),
        Some('<' | 'm' | 'M' | 'e' | 'E' | 'i' | 'I' | 't' | 'T' | 'a' | 'A' | 'p' | 'P')
            | Some('입' | '인' | '매' | '잘')
    ) {
        return None;
    }
    let end = prefix_re().find(head).map_or(0, |m| m.end());
    let rest = &head[end..];
    if !rejection_re().is_match(rest) {
        return None;
    }
    let mut said = first_line(rest);
    let lead: String = said.chars().take(14).collect();
    if lead.to_lowercase() == "input rejected" {
        said = said[lead.len()..].trim_start_matches([' ', ':', '-']);
    }
    Some(cut(if said.is_empty() {
        "input rejected".to_owned()
    } else {
        format!("input rejected: {said}")
    }))
}

pub fn first_line(s: &str) -> &str {
    let s = py_strip(s);
    match s.find('\n') {
        Some(i) => &s[..i],
        None => s,
    }
}

/// `_cut`: at most MAX_DETAIL characters.
pub fn cut(s: String) -> String {
    match s.char_indices().nth(MAX_DETAIL) {
        None => s,
        Some(_) => {
            let end = s
                .char_indices()
                .nth(MAX_DETAIL - 3)
                .map_or(s.len(), |(i, _)| i);
            format!("{}...", &s[..end])
        }
    }
}
