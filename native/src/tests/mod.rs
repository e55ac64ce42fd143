//! The crate's unit tests (`cargo test`): the JSON scanner, pair ids, result verdicts and failure
//! tagging, and the engine's timers, each checked against properties or values derived by hand,
//! not against the Python package (tests/core/test_native_differential.py does that).

mod scan;
