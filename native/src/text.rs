//! Python's notion of whitespace, for the few places a reader or the tagger must trim text exactly
//! as the Python reference does (`str.strip`, `str.isspace`). A leaf module.

/// Python's `str.isspace`: Unicode White_Space plus the four ASCII separators \x1c..\x1f.
pub fn py_space(c: char) -> bool {
    c.is_whitespace() || ('\x1c'..='\x1f').contains(&c)
}

pub fn py_strip(s: &str) -> &str {
    s.trim_matches(py_space)
}
