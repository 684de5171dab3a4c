//! Small YAML snippets for fixes, indented as they go in a pod spec.

/// `key: value` pairs as a YAML block under `heading`, indented by two.
pub fn block(heading: &str, lines: &[String]) -> String {
    let mut out = format!("{heading}\n");
    for l in lines {
        out.push_str("  ");
        out.push_str(l);
        out.push('\n');
    }
    out.trim_end().to_string()
}

/// A string quoted for YAML when it needs it.
pub fn quoted(s: &str) -> String {
    if s.is_empty()
        || s.contains([
            ':', '#', '{', '}', '[', ']', ',', '&', '*', '!', '|', '>', '\'', '"', '%', '@',
        ])
        || s.starts_with([' ', '-', '?'])
        || s.ends_with(' ')
    {
        format!("{s:?}")
    } else {
        s.to_string()
    }
}
