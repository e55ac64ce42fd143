//! `engine.pair_id`: blake2b-96 of the conversation and the call's identity, hex.

use blake2::digest::{Update, VariableOutput};
use blake2::Blake2bVar;

use crate::event::Event;
use crate::scan;

pub fn pair_id(conversation_id: &str, call: &Event) -> String {
    let mut h = Blake2bVar::new(12).expect("12 is a valid blake2b digest size");
    h.update(conversation_id.as_bytes());
    // The call's lineage is hashed even when it has an id: ids are reused inside a conversation
    // (engine.pair_id says why), and two real pairs must never share a key.
    if let Some(id) = &call.id {
        h.update(b"\x1fid\x1f");
        h.update(id.as_bytes());
    }
    h.update(b"\x1fsrc\x1f");
    let mut sorted = Vec::with_capacity(call.source.len());
    sort_keys(&call.source, 0, &mut sorted);
    h.update(&sorted);
    h.update(format!("\x1f{}", call.block).as_bytes());
    let mut d = [0u8; 12];
    h.finalize_variable(&mut d).expect("digest size");
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(24);
    for b in d {
        s.push(HEX[(b >> 4) as usize] as char);
        s.push(HEX[(b & 15) as usize] as char);
    }
    s
}

/// Re-encodes the canonical JSON value at `pos` with object keys sorted, as
/// `orjson.dumps(value, option=orjson.OPT_SORT_KEYS)` writes it; returns where the value ended.
pub fn sort_keys(b: &[u8], pos: usize, out: &mut Vec<u8>) -> usize {
    match b[pos] {
        b'{' => {
            let mut members = scan::members(b, pos).unwrap_or_default();
            let end = members.last().map_or(pos + 2, |m| m.end + 1);
            // Keys without escapes (the usual source: `topic`, `partition`, `offset`) sort as their
            // bytes, which order as their code points (orjson's order): no key is decoded.
            if members.iter().all(|m| !m.key.contains(&b'\\')) {
                members.sort_unstable_by(|x, y| x.key.cmp(y.key));
            } else {
                let mut keyed: Vec<(String, scan::Member)> = members
                    .drain(..)
                    .map(|m| (scan::unescape(m.key).into_owned(), m))
                    .collect();
                keyed.sort_by(|x, y| x.0.cmp(&y.0));
                members.extend(keyed.into_iter().map(|(_, m)| m));
            }
            out.push(b'{');
            for (i, m) in members.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                out.push(b'"');
                out.extend_from_slice(m.key);
                out.extend_from_slice(b"\":");
                if matches!(b[m.start], b'{' | b'[') {
                    sort_keys(b, m.start, out);
                } else {
                    out.extend_from_slice(&b[m.start..m.end]); // a scalar: as it is
                }
            }
            out.push(b'}');
            end
        }
        b'[' => {
            out.push(b'[');
            let mut p = pos + 1;
            if b[p] == b']' {
                out.push(b']');
                return p + 1;
            }
            loop {
                p = sort_keys(b, p, out);
                out.push(b[p]);
                if b[p] == b']' {
                    return p + 1;
                }
                p += 1;
            }
        }
        _ => {
            let end = scan::value(b, pos, 0, None).unwrap_or(b.len());
            out.extend_from_slice(&b[pos..end]);
            end
        }
    }
}
