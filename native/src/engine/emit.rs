//! The output records: a pair or an orphan, encoded straight into the caller's buffer (`Out`), with
//! the routing metadata (`Meta`) the sidecar reads instead of decoding them, and the per-label
//! counters (`Engine::counts`).

use super::held::{Closed, Held};
use super::Engine;
use crate::out::{write_f64, write_opt_str, write_str, write_ts};
use crate::pairid::pair_id;
use crate::vocab::orphan_reason::TIMEOUT;
use crate::vocab::pair_match::ID;
use crate::vocab::record_kind::{ORPHAN_CALL, ORPHAN_RESULT, PAIR};

/// What routing and metrics need of one output record (Python's `OutputMeta` plus the
/// conversation id, the output key), kept beside the encoded record when `Out::with_meta` is set,
/// so the sidecar never decodes what the core encoded. `label` is the pair's `match` or the
/// orphan's `reason`; `outcome`/`failure` stay None until failure tagging is ported.
pub struct Meta {
    pub kind: &'static str,
    pub label: String,
    pub fifo_by: Option<String>,
    pub conversation_id: String,
    pub tool: Option<String>,
    pub outcome: Option<String>,
    pub failure: Option<String>,
    pub latency_ms: Option<f64>,
}

/// What one entry point emitted: the encoded records back to back in `buf`, each ending at `ends[i]`
/// (and, with `with_meta`, each one's `Meta` in `metas[i]`).
#[derive(Default)]
pub struct Out {
    pub buf: Vec<u8>,
    pub ends: Vec<usize>,
    pub metas: Vec<Meta>,
    pub with_meta: bool,
}

impl Out {
    pub fn clear(&mut self) {
        self.buf.clear();
        self.ends.clear();
        self.metas.clear();
    }
    /// The encoded records, in order.
    pub fn records(&self) -> impl Iterator<Item = &[u8]> {
        let mut start = 0;
        self.ends.iter().map(move |&e| {
            let r = &self.buf[start..e];
            start = e;
            r
        })
    }
    fn end_record(&mut self) {
        self.ends.push(self.buf.len());
    }
}

impl Engine {
    // ------------------------------------------------------------------ output records

    pub(super) fn count(&mut self, label: &str) {
        if let Some(n) = self.counts.get_mut(label) {
            *n += 1;
        } else {
            self.counts.insert(label.to_owned(), 1);
        }
    }

    pub(super) fn emit_pair(
        &mut self,
        call: Held,
        result: Held,
        how: &str,
        fifo_by: Option<&str>,
        out: &mut Out,
    ) {
        let conv = call.conv;
        if let Some(id) = &call.ev.id {
            let id = id.clone();
            let by = if how == ID {
                Closed::ById
            } else {
                Closed::ByFifo
            };
            self.close_id(conv, &id, by);
        }
        let (cev, rev) = (&call.ev, &result.ev);
        let cid = &self.slab[conv].as_ref().expect("live conversation").cid;
        let r = &mut out.buf;
        r.extend_from_slice(b"{\"kind\":\"");
        r.extend_from_slice(PAIR.as_bytes());
        r.extend_from_slice(b"\",\"pair_id\":\"");
        r.extend_from_slice(pair_id(cid, cev).as_bytes());
        r.extend_from_slice(b"\",\"match\":\"");
        r.extend_from_slice(how.as_bytes());
        r.extend_from_slice(b"\",\"fifo_by\":");
        match fifo_by {
            Some(b) => write_str(r, b),
            None => r.extend_from_slice(b"null"),
        }
        r.extend_from_slice(b",\"conversation_id\":");
        write_str(r, cid);
        r.extend_from_slice(b",\"tool\":");
        write_opt_str(r, cev.name.as_deref().or(rev.name.as_deref()));
        r.extend_from_slice(b",\"call\":");
        r.extend_from_slice(&cev.side);
        r.extend_from_slice(b",\"result\":");
        r.extend_from_slice(&rev.side);
        r.extend_from_slice(b",\"call_ts\":");
        write_ts(r, call.ts_ms);
        r.extend_from_slice(b",\"result_ts\":");
        write_ts(r, result.ts_ms);
        r.extend_from_slice(b",\"latency_ms\":");
        match (cev.ts_ms, rev.ts_ms) {
            (Some(a), Some(b)) => write_f64(r, b - a),
            _ => r.extend_from_slice(b"null"),
        }
        let (outcome, failure) = match self.tagger.as_mut() {
            Some(t) => t.write(r, cev.tag.as_deref(), rev.tag.as_deref(), false),
            None => (None, None),
        };
        r.push(b'}');
        out.end_record();
        if out.with_meta {
            out.metas.push(Meta {
                kind: PAIR,
                label: how.to_owned(),
                fifo_by: fifo_by.map(str::to_owned),
                conversation_id: cid.clone(),
                tool: cev.name.clone().or_else(|| rev.name.clone()),
                outcome: outcome.map(str::to_owned),
                failure: failure.map(str::to_owned),
                latency_ms: match (cev.ts_ms, rev.ts_ms) {
                    (Some(a), Some(b)) => Some(b - a),
                    _ => None,
                },
            });
        }
        let mut label = std::mem::take(&mut self.label);
        label.clear();
        label.push_str(PAIR);
        label.push(':');
        label.push_str(how);
        if let Some(b) = fifo_by {
            label.push(':');
            label.push_str(b);
        }
        self.count(&label);
        self.label = label;
    }

    pub(super) fn emit_orphan_seq(&mut self, seq: u64, reason: &str, out: &mut Out) {
        if let Some(h) = self.release(seq) {
            self.emit_orphan(h, reason, out);
        }
    }

    pub(super) fn emit_orphan(&mut self, h: Held, reason: &str, out: &mut Out) {
        let ev = &h.ev;
        if ev.is_call {
            if let Some(id) = &ev.id {
                let id = id.clone();
                self.close_id(h.conv, &id, Closed::Orphaned);
            }
        }
        let ev = &h.ev;
        let kind = if ev.is_call {
            ORPHAN_CALL
        } else {
            ORPHAN_RESULT
        };
        let r = &mut out.buf;
        r.extend_from_slice(b"{\"kind\":\"");
        r.extend_from_slice(kind.as_bytes());
        r.extend_from_slice(b"\",\"reason\":");
        write_str(r, reason);
        r.extend_from_slice(b",\"conversation_id\":");
        write_str(r, &self.conv(h.conv).cid);
        r.extend_from_slice(b",\"tool\":");
        write_opt_str(r, ev.name.as_deref());
        r.extend_from_slice(b",\"ts\":");
        write_ts(r, h.ts_ms);
        r.extend_from_slice(b",\"event\":");
        r.extend_from_slice(&ev.side);
        r.extend_from_slice(b",\"source\":");
        r.extend_from_slice(&ev.source);
        let (outcome, failure) = match self.tagger.as_mut() {
            Some(t) if ev.is_call => t.write(r, ev.tag.as_deref(), None, reason == TIMEOUT),
            Some(t) => t.write(r, None, ev.tag.as_deref(), false),
            None => (None, None),
        };
        r.push(b'}');
        out.end_record();
        if out.with_meta {
            out.metas.push(Meta {
                kind,
                label: reason.to_owned(),
                fifo_by: None,
                conversation_id: self.conv(h.conv).cid.clone(),
                tool: ev.name.clone(),
                outcome: outcome.map(str::to_owned),
                failure: failure.map(str::to_owned),
                latency_ms: None,
            });
        }
        let mut label = std::mem::take(&mut self.label);
        label.clear();
        label.push_str(kind);
        label.push(':');
        label.push_str(reason);
        self.count(&label);
        self.label = label;
    }
}
