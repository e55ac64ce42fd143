//! One normalized tool event, as every format reader produces it and the engine holds it. A leaf
//! of the crate's dependency graph (the readers and the engine both depend on it, it on neither).

use crate::tagging::EventTag;

/// One normalized event. `side` is the encoded `ToolEvent.to_side()` object, `source` the encoded
/// lineage dict: both are fixed when the event is read.
pub struct Event {
    pub is_call: bool,
    pub conversation_id: String,
    pub id: Option<String>,
    pub name: Option<String>,
    pub ts_ms: Option<f64>,
    pub size: usize,
    pub block: i64,
    pub side: Vec<u8>,
    /// Where `,"raw":` starts in `side`: `without_raw` cuts the side there (`--raw`).
    pub raw_at: usize,
    pub source: Vec<u8>,
    /// The fast path's format name (for the events-by-format count); "" from `process`.
    pub format: &'static str,
    /// What the failure tagger knows of this event alone (None when tagging is off).
    pub tag: Option<Box<EventTag>>,
}

impl Event {
    /// Drop the side's `raw` (`ToolEvent.to_side(with_raw=False)`): what `--raw call|omit` asks for.
    pub fn without_raw(&mut self) {
        if self.raw_at < self.side.len() {
            self.side.truncate(self.raw_at);
            self.side.push(b'}');
            self.side.shrink_to_fit(); // a held call must not keep the raw block's room
            self.raw_at = self.side.len();
        }
    }
}
