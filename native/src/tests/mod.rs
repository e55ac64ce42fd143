//! The crate's unit tests (`cargo test`, run by .ci/run): the JSON scanner and encoder, pair ids,
//! result verdicts and failure tagging, and the engine's rules and timers. Each checks a property
//! or a value derived independently of this crate (Python's hashlib, `format(x, "g")`, the rules
//! as the README states them); tests/core/test_native_differential.py compares whole runs with
//! the Python reference.

mod batch;
mod carry;
mod engine;
mod pairid;
mod scan;
mod tagging;
mod verdict;
