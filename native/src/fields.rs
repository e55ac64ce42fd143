//! The field primitives every format reader shares: member lookup, scalars, ids and names, the
//! conversation id and the record timestamp, and `Part` (one event before its record-level fields).
//! Below every reader in the crate's dependency graph (they depend on it, it on none of them), so
//! the readers form a tree: canonical -> envelope -> messages -> gemini / mcp / bedrock -> fields.

pub mod decline;

use crate::event::Event;
use crate::out::{days_from_civil, write_opt_str, write_ts};
use crate::scan::{self, Member};
use crate::text::py_strip;
use crate::vocab::{MAX_TS_MS, TS_FIELDS};

pub struct FormatCfg {
    /// (first key, remaining keys) per configured conversation-id path.
    pub conversation_paths: Vec<(String, Vec<String>)>,
    pub max_record_bytes: usize,
    /// formats.FormatConfig.max_id_bytes: longer ids are left to the Python layer (a dead letter).
    pub max_id_bytes: usize,
}

pub fn get<'a>(m: &'a [Member<'a>], key: &[u8]) -> Option<&'a Member<'a>> {
    m.iter().find(|x| x.key == key)
}

/// A member whose value is not null (Python's `d.get(k) is not None`).
pub fn present<'a>(m: &'a [Member<'a>], b: &[u8], key: &[u8]) -> Option<&'a Member<'a>> {
    get(m, key).filter(|x| b[x.start] != b'n')
}

/// `d.get(k)` as JSON bytes (absent: null).
pub fn field<'a>(b: &'a [u8], m: &[Member], key: &[u8]) -> &'a [u8] {
    get(m, key).map_or(b"null", |x| &b[x.start..x.end])
}

pub enum Scalar {
    Null,
    Str(String),
    Int(String),
    Other,
}

pub fn scalar(b: &[u8], m: Option<&Member>) -> Scalar {
    let Some(m) = m else { return Scalar::Null };
    let v = &b[m.start..m.end];
    match v[0] {
        b'n' => Scalar::Null,
        b'"' => Scalar::Str(scan::unescape(&v[1..v.len() - 1]).into_owned()),
        b'-' | b'0'..=b'9' if !v.iter().any(|c| matches!(c, b'.' | b'e' | b'E')) => {
            Scalar::Int(String::from_utf8_lossy(v).into_owned())
        }
        _ => Scalar::Other,
    }
}

/// `as_id`: None for null/blank, the trimmed string, an integer's decimal text.
pub fn as_id(s: Scalar) -> Result<Option<String>, &'static str> {
    match s {
        Scalar::Null => Ok(None),
        Scalar::Str(t) => {
            let t = py_strip(&t);
            Ok((!t.is_empty()).then(|| t.to_owned()))
        }
        Scalar::Int(t) => Ok(Some(t)),
        Scalar::Other => Err("field_type"),
    }
}

pub fn conversation_id(
    b: &[u8],
    m: &[Member],
    cfg: &FormatCfg,
    key: Option<&str>,
) -> Result<String, &'static str> {
    for (first, rest) in &cfg.conversation_paths {
        let mem = get(m, first.as_bytes());
        let Some(mem) = mem else { continue };
        if !rest.is_empty() {
            if b[mem.start] == b'{' {
                return Err("conversation_path"); // nested path: left to Python
            }
            continue; // not an object: Python reads None and tries the next path
        }
        match scalar(b, Some(mem)) {
            Scalar::Null => continue,
            Scalar::Str(s) => {
                let t = py_strip(&s);
                if !t.is_empty() {
                    return Ok(t.to_owned());
                }
            }
            Scalar::Int(t) => return Ok(t),
            Scalar::Other => return Err("field_type"),
        }
    }
    if let Some(k) = key {
        let t = py_strip(k);
        if !t.is_empty() {
            return Ok(t.to_owned());
        }
    }
    Err("missing_conversation_id")
}

fn digits(s: &[u8]) -> Option<i64> {
    if s.is_empty() || !s.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(s).ok()?.parse().ok()
}

/// RFC 3339 `YYYY-MM-DDTHH:MM:SS[.fff|.ffffff](Z|+HH:MM|-HH:MM)` to epoch ms, computed as
/// `datetime.fromisoformat(s).timestamp() * 1000.0` computes it. Other spellings (which
/// `fromisoformat` may still accept) are left to Python.
fn iso_ms(s: &[u8]) -> Option<f64> {
    if s.len() < 20
        || s[4] != b'-'
        || s[7] != b'-'
        || s[10] != b'T'
        || s[13] != b':'
        || s[16] != b':'
    {
        return None;
    }
    let (y, mo, d) = (digits(&s[0..4])?, digits(&s[5..7])?, digits(&s[8..10])?);
    let (h, mi, se) = (
        digits(&s[11..13])?,
        digits(&s[14..16])?,
        digits(&s[17..19])?,
    );
    let mut p = 19;
    let mut us = 0i64;
    if s[p] == b'.' {
        let start = p + 1;
        let mut e = start;
        while e < s.len() && s[e].is_ascii_digit() {
            e += 1;
        }
        us = match e - start {
            3 => digits(&s[start..e])? * 1000,
            6 => digits(&s[start..e])?,
            _ => return None,
        };
        p = e;
    }
    let off_s = match &s[p..] {
        b"Z" => 0,
        t if t.len() == 6 && (t[0] == b'+' || t[0] == b'-') && t[3] == b':' => {
            let (oh, om) = (digits(&t[1..3])?, digits(&t[4..6])?);
            if oh > 23 || om > 59 {
                return None;
            }
            let v = oh * 3600 + om * 60;
            if t[0] == b'-' {
                -v
            } else {
                v
            }
        }
        _ => return None,
    };
    if !(1..=12).contains(&mo) || d < 1 || h > 23 || mi > 59 || se > 59 || !(1..=9999).contains(&y)
    {
        return None;
    }
    let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let mdays = [
        31,
        if leap { 29 } else { 28 },
        31,
        30,
        31,
        30,
        31,
        31,
        30,
        31,
        30,
        31,
    ];
    if d > mdays[(mo - 1) as usize] {
        return None;
    }
    let secs = days_from_civil(y, mo as u32, d as u32) * 86_400 + h * 3600 + mi * 60 + se - off_s;
    let total_us = secs.checked_mul(1_000_000)?.checked_add(us)?;
    if total_us.unsigned_abs() >= (1u64 << 53) {
        return None; // int/int true division in Python would round once, this twice
    }
    let ms = (total_us as f64 / 1e6) * 1000.0;
    (0.0..MAX_TS_MS).contains(&ms).then_some(ms)
}

fn epoch_to_ms(v: f64) -> f64 {
    if v < 1e11 {
        v * 1000.0
    } else if v < 1e14 {
        v
    } else if v < 1e17 {
        v / 1000.0
    } else {
        v / 1_000_000.0
    }
}

/// `_epoch_to_ms` of a Python int: compared exactly, converted once (as `int * float` does).
fn int_epoch_to_ms(v: i128) -> f64 {
    let x = v as f64;
    if v < 100_000_000_000 {
        x * 1000.0
    } else if v < 100_000_000_000_000 {
        x
    } else if v < 100_000_000_000_000_000 {
        x / 1000.0
    } else {
        x / 1_000_000.0
    }
}

/// `record_ts`: the first timestamp field present decides; Err when Python would raise or when
/// the spelling is one this port does not read.
pub fn record_ts(b: &[u8], m: &[Member]) -> Result<Option<f64>, &'static str> {
    for f in TS_FIELDS {
        let Some(mem) = get(m, f.as_bytes()) else {
            continue;
        };
        let v = &b[mem.start..mem.end];
        let ms = match v[0] {
            b'n' => continue,
            b'"' => iso_ms(&v[1..v.len() - 1]),
            b'-' | b'0'..=b'9' => {
                let is_int = !v.iter().any(|c| matches!(c, b'.' | b'e' | b'E'));
                if is_int {
                    // Python: an int times/divided by a float, i.e. float(int) first.
                    std::str::from_utf8(v)
                        .ok()
                        .and_then(|t| t.parse::<i128>().ok())
                        .map(int_epoch_to_ms)
                } else {
                    std::str::from_utf8(v)
                        .ok()
                        .and_then(|t| t.parse::<f64>().ok())
                        .map(epoch_to_ms)
                }
                .filter(|ms| (0.0..MAX_TS_MS).contains(ms))
            }
            _ => None,
        };
        return ms.map(Some).ok_or("ts");
    }
    Ok(None)
}

/// `_record_time` of a record without a `message` member: its own time, else the time of the
/// `request` object beside it (a wire exchange's, Python reads it there too).
pub fn top_ts(b: &[u8], m: &[Member]) -> Result<Option<f64>, &'static str> {
    if let Some(ts) = record_ts(b, m)? {
        return Ok(Some(ts));
    }
    match get(m, b"request") {
        Some(r) if b[r.start] == b'{' => {
            record_ts(b, &scan::members(b, r.start).ok_or("not_canonical")?)
        }
        _ => Ok(None),
    }
}

/// `as_name`: the trimmed name; a call needs one (Python raises: left to it).
pub fn as_name(s: Scalar, required: bool) -> Result<Option<String>, &'static str> {
    let name = match s {
        Scalar::Str(s) => {
            let t = py_strip(&s);
            (!t.is_empty()).then(|| t.to_owned())
        }
        Scalar::Null => None,
        _ => return Err("field_type"),
    };
    if required && name.is_none() {
        return Err("missing_name");
    }
    Ok(name)
}

/// One event as a format reader sees it, before the record-level fields (formats/common.py `Part`);
/// `payload` and `block` are canonical JSON spliced as they are, `is_error` is encoded JSON.
pub struct Part<'a> {
    pub is_call: bool,
    pub id: Option<String>,
    pub name: Option<String>,
    pub payload: std::borrow::Cow<'a, [u8]>,
    pub is_error: &'a [u8],
    pub block: &'a [u8],
    pub format: &'static [u8],
}

impl Part<'_> {
    pub fn event(
        self,
        conversation_id: String,
        ts_ms: Option<f64>,
        source: &[u8],
        index: i64,
        size: usize,
    ) -> Event {
        let mut side =
            Vec::with_capacity(self.payload.len() + self.block.len() + source.len() + 160);
        side_prefix(
            &mut side,
            self.id.as_deref(),
            self.name.as_deref(),
            self.format,
            ts_ms,
            source,
            index,
        );
        if self.is_call {
            side.extend_from_slice(b",\"arguments\":");
            side.extend_from_slice(&self.payload);
        } else {
            side.extend_from_slice(b",\"content\":");
            side.extend_from_slice(&self.payload);
            side.extend_from_slice(b",\"is_error\":");
            side.extend_from_slice(self.is_error);
        }
        let raw_at = side.len();
        side.extend_from_slice(b",\"raw\":");
        side.extend_from_slice(self.block);
        side.push(b'}');
        Event {
            is_call: self.is_call,
            conversation_id,
            id: self.id,
            name: self.name,
            ts_ms,
            size,
            block: index,
            side,
            raw_at,
            source: source.to_vec(),
            format: std::str::from_utf8(self.format).unwrap_or(""),
            tag: None,
        }
    }
}

/// `{"id":..,"name":..,"format":..,"ts":..,"source":..,"block":..` of `ToolEvent.to_side()`.
pub fn side_prefix(
    side: &mut Vec<u8>,
    id: Option<&str>,
    name: Option<&str>,
    format_json: &[u8],
    ts_ms: Option<f64>,
    source: &[u8],
    block: i64,
) {
    side.extend_from_slice(b"{\"id\":");
    write_opt_str(side, id);
    side.extend_from_slice(b",\"name\":");
    write_opt_str(side, name);
    side.extend_from_slice(b",\"format\":\"");
    side.extend_from_slice(format_json);
    side.extend_from_slice(b"\",\"ts\":");
    write_ts(side, ts_ms);
    side.extend_from_slice(b",\"source\":");
    side.extend_from_slice(source);
    side.extend_from_slice(b",\"block\":");
    side.extend_from_slice(block.to_string().as_bytes());
}
