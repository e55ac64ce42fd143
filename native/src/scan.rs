//! A validator for JSON in the exact form `orjson.dumps` writes, and an index of one object's members.
//!
//! Why: the output must be byte-identical to the Python path, which decodes the record with orjson
//! and writes it back. A value can be spliced from the input bytes only when re-encoding it would
//! give the same bytes: no insignificant whitespace, orjson's string escapes, integers orjson keeps
//! as integers, floats in orjson's layout, no duplicate keys (orjson keeps the last value). Anything
//! else makes the record fall through to the Python format layer, which is always correct.

use crate::out::write_f64;

/// Deepest nesting the format layer keeps in a block (the vocabulary's MAX_DEPTH).
use crate::vocab::MAX_DEPTH;

/// One member of an object: the key's raw bytes (between the quotes) and the value's byte range.
pub struct Member<'a> {
    pub key: &'a [u8],
    pub start: usize,
    pub end: usize,
}

/// Checks `b` (already valid UTF-8) for one canonical value at `pos`; returns where it ends.
/// `members`, when given and the value is an object, receives its members.
pub fn value<'a>(
    b: &'a [u8],
    pos: usize,
    depth: u32,
    members: Option<&mut Vec<Member<'a>>>,
) -> Option<usize> {
    walk(b, pos, depth, members, None)
}

/// (start, end) of every array and object of the record being read, in document order.
type Spans = Vec<(usize, usize)>;

struct Index {
    /// The indexed buffer (address and length): an index is only used for the bytes it was
    /// built from.
    buf: (usize, usize),
    spans: Spans,
}

thread_local! {
    static INDEX: std::cell::RefCell<Index> =
        const { std::cell::RefCell::new(Index { buf: (0, 0), spans: Vec::new() }) };
}

/// Forgets the index of `value_indexed` when dropped (the record has been read).
pub struct IndexGuard(());

impl Drop for IndexGuard {
    fn drop(&mut self) {
        INDEX.with(|i| {
            if let Ok(mut i) = i.try_borrow_mut() {
                i.buf = (0, 0);
            }
        });
    }
}

/// `value` of a whole record that also remembers where each of its arrays and objects ends, until
/// the guard is dropped: `members` and `elements` on this record then step over a nested container
/// in one lookup instead of reading it again (a Bedrock payload sits five levels down, and each
/// level's index used to read it once more).
pub fn value_indexed<'a>(
    b: &'a [u8],
    pos: usize,
    members: Option<&mut Vec<Member<'a>>>,
) -> (Option<usize>, IndexGuard) {
    let guard = IndexGuard(());
    let end = INDEX.with(|i| {
        let Ok(mut i) = i.try_borrow_mut() else {
            return walk(b, pos, 0, members, None);
        };
        let mut spans = std::mem::take(&mut i.spans);
        spans.clear();
        let end = walk(b, pos, 0, members, Some(&mut spans));
        i.spans = spans;
        i.buf = if end.is_some() {
            (b.as_ptr() as usize, b.len())
        } else {
            (0, 0)
        };
        end
    });
    (end, guard)
}

/// Where the container at `pos` ends, from the index of `value_indexed` (None: not indexed).
fn indexed_end(b: &[u8], pos: usize) -> Option<usize> {
    INDEX.with(|i| {
        let i = i.try_borrow().ok()?;
        if i.buf != (b.as_ptr() as usize, b.len()) {
            return None;
        }
        let k = i.spans.binary_search_by_key(&pos, |s| s.0).ok()?;
        let end = i.spans[k].1;
        (end > pos).then_some(end)
    })
}

fn walk<'a>(
    b: &'a [u8],
    pos: usize,
    depth: u32,
    members: Option<&mut Vec<Member<'a>>>,
    spans: Option<&mut Spans>,
) -> Option<usize> {
    match *b.get(pos)? {
        b'{' => object(b, pos, depth + 1, members, spans),
        b'[' => array(b, pos, depth + 1, spans),
        b'"' => string(b, pos),
        b't' => literal(b, pos, b"true"),
        b'f' => literal(b, pos, b"false"),
        b'n' => literal(b, pos, b"null"),
        b'-' | b'0'..=b'9' => number(b, pos),
        _ => None,
    }
}

fn literal(b: &[u8], pos: usize, word: &[u8]) -> Option<usize> {
    (b.get(pos..pos + word.len())? == word).then_some(pos + word.len())
}

fn object<'a>(
    b: &'a [u8],
    pos: usize,
    depth: u32,
    mut members: Option<&mut Vec<Member<'a>>>,
    mut spans: Option<&mut Spans>,
) -> Option<usize> {
    if depth > MAX_DEPTH {
        return None;
    }
    let slot = spans.as_deref_mut().map(|s| {
        s.push((pos, 0)); // document order: the end is filled in when the object closes
        s.len() - 1
    });
    // The keys so far, on the stack (a heap Vec here was one allocation per object read, a few per
    // record); past 32 keys the pairwise check would be quadratic: a set takes over.
    let mut keys: [&[u8]; 32] = [&[]; 32];
    let mut n = 0;
    // Keyed: the keys are untrusted, and colliding keys would make the unkeyed Fx set quadratic.
    let mut many: Option<std::collections::HashSet<&[u8], foldhash::fast::RandomState>> = None;
    let mut p = pos + 1;
    if *b.get(p)? == b'}' {
        return Some(close(spans, slot, p + 1));
    }
    loop {
        let kend = string(b, p)?;
        let key = &b[p + 1..kend - 1];
        let seen = match many.as_mut() {
            Some(set) => !set.insert(key),
            None if n >= keys.len() => {
                let mut set: std::collections::HashSet<&[u8], foldhash::fast::RandomState> =
                    keys.iter().copied().collect();
                let seen = !set.insert(key);
                many = Some(set);
                seen
            }
            None => {
                let seen = keys[..n].contains(&key);
                keys[n] = key;
                n += 1;
                seen
            }
        };
        if seen {
            return None; // orjson keeps one of them: the bytes would not survive a round trip
        }
        if *b.get(kend)? != b':' {
            return None;
        }
        let vstart = kend + 1;
        let vend = walk(b, vstart, depth, None, spans.as_deref_mut())?;
        if let Some(m) = members.as_deref_mut() {
            m.push(Member {
                key,
                start: vstart,
                end: vend,
            });
        }
        match *b.get(vend)? {
            b',' => p = vend + 1,
            b'}' => return Some(close(spans, slot, vend + 1)),
            _ => return None,
        }
    }
}

/// Records where the container in `slot` ends; returns that end.
fn close(spans: Option<&mut Spans>, slot: Option<usize>, end: usize) -> usize {
    if let (Some(s), Some(k)) = (spans, slot) {
        s[k].1 = end;
    }
    end
}

fn array(b: &[u8], pos: usize, depth: u32, mut spans: Option<&mut Spans>) -> Option<usize> {
    if depth > MAX_DEPTH {
        return None;
    }
    let slot = spans.as_deref_mut().map(|s| {
        s.push((pos, 0));
        s.len() - 1
    });
    let mut p = pos + 1;
    if *b.get(p)? == b']' {
        return Some(close(spans, slot, p + 1));
    }
    loop {
        let end = walk(b, p, depth, None, spans.as_deref_mut())?;
        match *b.get(end)? {
            b',' => p = end + 1,
            b']' => return Some(close(spans, slot, end + 1)),
            _ => return None,
        }
    }
}

/// A string with only the escapes orjson writes: `\"`, `\\`, `\b \t \n \f \r`, and `\u00xx`
/// (lowercase hex) for the other control characters. Returns the index after the closing quote.
pub fn string(b: &[u8], pos: usize) -> Option<usize> {
    if *b.get(pos)? != b'"' {
        return None;
    }
    let mut p = pos + 1;
    loop {
        p = plain_run(b, p);
        let c = *b.get(p)?;
        match c {
            b'"' => return Some(p + 1),
            b'\\' => match *b.get(p + 1)? {
                b'"' | b'\\' | b'b' | b't' | b'n' | b'f' | b'r' => p += 2,
                b'u' => {
                    let hex = b.get(p + 2..p + 6)?;
                    if &hex[..2] != b"00" {
                        return None;
                    }
                    let v = hexval(hex[2])? * 16 + hexval(hex[3])?;
                    if v >= 0x20 || matches!(v, 0x08 | 0x09 | 0x0a | 0x0c | 0x0d) {
                        return None;
                    }
                    p += 6;
                }
                _ => return None,
            },
            0..=0x1f => return None,
            _ => p += 1,
        }
    }
}

/// The index of the first byte at or after `p` that is `"`, `\\` or below 0x20 (`b.len()` if
/// none): the plain run of a string, skipped 16 bytes at a time with SSE2 (always there on
/// x86_64), or 8 at a time with bit tricks elsewhere, landing on the special byte itself (not
/// stepping byte by byte to it). Most of a string scan's time is here (perf).
#[inline]
fn plain_run(b: &[u8], mut p: usize) -> usize {
    #[cfg(target_arch = "x86_64")]
    {
        use core::arch::x86_64::{
            __m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_min_epu8, _mm_movemask_epi8,
            _mm_or_si128, _mm_set1_epi8,
        };
        while p + 16 <= b.len() {
            // SAFETY: SSE2 is part of the x86_64 baseline; the load reads b[p..p + 16], in bounds.
            let mask = unsafe {
                let x = _mm_loadu_si128(b.as_ptr().add(p).cast::<__m128i>());
                let quote = _mm_cmpeq_epi8(x, _mm_set1_epi8(b'"' as i8));
                let backslash = _mm_cmpeq_epi8(x, _mm_set1_epi8(b'\\' as i8));
                // x <= 0x1f (unsigned) exactly when min(x, 0x1f) == x.
                let control = _mm_cmpeq_epi8(_mm_min_epu8(x, _mm_set1_epi8(0x1f)), x);
                _mm_movemask_epi8(_mm_or_si128(_mm_or_si128(quote, backslash), control))
            };
            if mask != 0 {
                return p + mask.trailing_zeros() as usize;
            }
            p += 16;
        }
    }
    while let Some(chunk) = b.get(p..p + 8) {
        let x = u64::from_le_bytes(chunk.try_into().unwrap_or_default());
        let m = special(x);
        if m != 0 {
            return p + (m.trailing_zeros() / 8) as usize;
        }
        p += 8;
    }
    while p < b.len() && !matches!(b[p], b'"' | b'\\' | 0..=0x1f) {
        p += 1;
    }
    p
}

/// The high bit of each byte of `x` that is `"`, `\\` or below 0x20 (bit tricks on 8 bytes at
/// once); bits above the lowest set one may be false (borrows), the lowest is exact.
#[inline]
fn special(x: u64) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let has_zero = |v: u64| v.wrapping_sub(ONES) & !v & HIGH;
    let quote = has_zero(x ^ (ONES * b'"' as u64));
    let backslash = has_zero(x ^ (ONES * b'\\' as u64));
    let control = x.wrapping_sub(ONES * 0x20) & !x & HIGH;
    quote | backslash | control
}

fn hexval(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    }
}

/// An integer orjson keeps as an integer (i64 or u64 range, no `-0`), or a float written exactly
/// as orjson writes the double it denotes.
fn number(b: &[u8], pos: usize) -> Option<usize> {
    let mut p = pos;
    let neg = b[p] == b'-';
    if neg {
        p += 1;
    }
    let int_start = p;
    match *b.get(p)? {
        b'0' => p += 1,
        b'1'..=b'9' => {
            while matches!(b.get(p), Some(b'0'..=b'9')) {
                p += 1;
            }
        }
        _ => return None,
    }
    let int_end = p;
    let mut is_float = false;
    if b.get(p) == Some(&b'.') {
        is_float = true;
        p += 1;
        let s = p;
        while matches!(b.get(p), Some(b'0'..=b'9')) {
            p += 1;
        }
        if p == s {
            return None;
        }
    }
    if matches!(b.get(p), Some(b'e' | b'E')) {
        is_float = true;
        p += 1;
        if matches!(b.get(p), Some(b'+' | b'-')) {
            p += 1;
        }
        let s = p;
        while matches!(b.get(p), Some(b'0'..=b'9')) {
            p += 1;
        }
        if p == s {
            return None;
        }
    }
    let text = std::str::from_utf8(&b[pos..p]).ok()?;
    if is_float {
        let x: f64 = text.parse().ok()?;
        if !x.is_finite() {
            return None;
        }
        let mut w = Vec::with_capacity(24);
        write_f64(&mut w, x);
        return (w == text.as_bytes()).then_some(p);
    }
    let digits = &b[int_start..int_end];
    if digits.len() > 20 {
        return None;
    }
    let v: i128 = std::str::from_utf8(digits).ok()?.parse().ok()?;
    let ok = if neg {
        v != 0 && -v >= i64::MIN as i128
    } else {
        v <= u64::MAX as i128
    };
    ok.then_some(p)
}

/// The members of an object already validated by `value` (used for nested objects): an index
/// only, no checks (the readers ask for the members of a message, its blocks and their fields:
/// validating each level again read the payloads five or six times). Bytes that were not
/// validated give None or a wrong index, never a panic. A non-object has no members.
pub fn members(b: &[u8], start: usize) -> Option<Vec<Member<'_>>> {
    let mut m = Vec::new();
    if *b.get(start)? != b'{' {
        return Some(m);
    }
    let mut p = start + 1;
    if *b.get(p)? == b'}' {
        return Some(m);
    }
    loop {
        let kend = skip_string(b, p)?;
        let vstart = kend + 1;
        let vend = skip(b, vstart)?;
        m.push(Member {
            key: b.get(p + 1..kend - 1)?,
            start: vstart,
            end: vend,
        });
        match *b.get(vend)? {
            b',' => p = vend + 1,
            b'}' => return Some(m),
            _ => return None,
        }
    }
}

/// Where the value at `pos` ends, in bytes already validated by `value` or written canonical by
/// the engine (a skip, no checks: strings and nesting are followed, nothing is validated again).
/// Bytes that were not validated give None or a wrong end, never a panic. Shared by the member
/// and element indexes here and the tagger's reader of event sides (pytag.rs).
pub fn skip(b: &[u8], pos: usize) -> Option<usize> {
    match *b.get(pos)? {
        b'"' => skip_string(b, pos),
        b'{' | b'[' => {
            if let Some(end) = indexed_end(b, pos) {
                return Some(end);
            }
            let mut depth = 0u32;
            let mut p = pos;
            loop {
                match *b.get(p)? {
                    b'"' => {
                        p = skip_string(b, p)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(p + 1);
                        }
                    }
                    _ => {}
                }
                p += 1;
            }
        }
        _ => {
            // a number or literal: ends at the separator after it (values here are never top-level)
            let mut p = pos;
            while !matches!(*b.get(p)?, b',' | b'}' | b']') {
                p += 1;
            }
            Some(p)
        }
    }
}

/// The index after the closing quote of the string at `pos` (validated: only escapes matter).
fn skip_string(b: &[u8], pos: usize) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let has_zero = |v: u64| v.wrapping_sub(ONES) & !v & HIGH;
    let mut p = pos + 1;
    loop {
        while let Some(chunk) = b.get(p..p + 8) {
            let x = u64::from_le_bytes(chunk.try_into().ok()?);
            if (has_zero(x ^ (ONES * b'"' as u64)) | has_zero(x ^ (ONES * b'\\' as u64))) != 0 {
                break;
            }
            p += 8;
        }
        match *b.get(p)? {
            b'"' => return Some(p + 1),
            b'\\' => p += 2,
            _ => p += 1,
        }
    }
}

/// The decoded text of a canonical string's raw content (between the quotes): borrowed when it
/// has no escapes; otherwise copied run by run between them. Only orjson's escapes are expected
/// (the bytes were validated by `value` or written by the engine).
pub fn unescape(raw: &[u8]) -> std::borrow::Cow<'_, str> {
    let Some(first) = memchr::memchr(b'\\', raw) else {
        // The record was checked to be UTF-8 and a string's content is a char range; simdutf8:
        // std's check goes byte by byte through non-ASCII text.
        return match simdutf8::basic::from_utf8(raw) {
            Ok(text) => std::borrow::Cow::Borrowed(text),
            Err(_) => String::from_utf8_lossy(raw),
        };
    };
    let mut out = Vec::with_capacity(raw.len());
    out.extend_from_slice(&raw[..first]);
    let mut i = first;
    while i < raw.len() {
        let c = raw[i + 1];
        match c {
            b'b' => out.push(8),
            b't' => out.push(9),
            b'n' => out.push(10),
            b'f' => out.push(12),
            b'r' => out.push(13),
            b'u' => {
                // orjson escapes only control characters this way: \u00xx.
                out.push(hexval(raw[i + 4]).unwrap_or(0) * 16 + hexval(raw[i + 5]).unwrap_or(0));
                i += 4;
            }
            other => out.push(other),
        }
        i += 2;
        let run = memchr::memchr(b'\\', &raw[i..]).map_or(raw.len(), |n| i + n);
        out.extend_from_slice(&raw[i..run]);
        i = run;
    }
    std::borrow::Cow::Owned(utf8_string(out))
}

/// `out` as a String, invalid UTF-8 replaced as `String::from_utf8_lossy` does. Checked with
/// simdutf8: std's check goes byte by byte through non-ASCII text (perf: 2 % of the tagged
/// path was `String::from_utf8` on unescaped result texts).
pub fn utf8_string(out: Vec<u8>) -> String {
    if simdutf8::basic::from_utf8(&out).is_ok() {
        // SAFETY: `out` was just checked to be valid UTF-8.
        return unsafe { String::from_utf8_unchecked(out) };
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The (start, end) ranges of the elements of an array already validated by `value` (an index
/// only, as `members`).
pub fn elements(b: &[u8], start: usize) -> Option<Vec<(usize, usize)>> {
    let mut out = Vec::new();
    let mut p = start + 1;
    if *b.get(p)? == b']' {
        return Some(out);
    }
    loop {
        let end = skip(b, p)?;
        out.push((p, end));
        match *b.get(end)? {
            b',' => p = end + 1,
            b']' => return Some(out),
            _ => return None,
        }
    }
}
