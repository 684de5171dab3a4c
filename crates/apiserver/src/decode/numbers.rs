//! Numbers a body may not carry: Go's decoder turns every JSON number it
//! keeps into an int64 or a float64, and refuses one outside float64's
//! range (`1e400`) with `json: cannot unmarshal number 1e400 into Go value
//! of type float64`, wherever it stands (a field the type skips included).
//! Our typed decoders skip unknown fields without reading their numbers,
//! so the bytes are scanned once here, before anything else reads them.
//!
//! It looks only at the bytes of JSON numbers outside strings; it does not
//! check the rest of the syntax (the decoders do).

/// The first number in the JSON text `raw` that does not fit a float64,
/// as Go's decoder words it; `None` if every number fits.
pub fn out_of_range(raw: &[u8]) -> Option<String> {
    let mut i = 0;
    while i < raw.len() {
        match raw[i] {
            b'"' => i = skip_string(raw, i + 1),
            b'-' | b'0'..=b'9' => {
                let start = i;
                let mut exponent = false;
                while i < raw.len() {
                    match raw[i] {
                        b'0'..=b'9' | b'-' | b'+' | b'.' => {}
                        b'e' | b'E' => exponent = true,
                        _ => break,
                    }
                    i += 1;
                }
                let token = &raw[start..i];
                // Without an exponent a number needs over 308 digits to
                // overflow; most numbers take neither branch.
                if exponent || token.len() > 300 {
                    let text = std::str::from_utf8(token).unwrap_or_default();
                    if text.parse::<f64>().is_ok_and(f64::is_infinite) {
                        return Some(format!(
                            "json: cannot unmarshal number {text} into Go value of type float64"
                        ));
                    }
                }
            }
            _ => i += 1,
        }
    }
    None
}

/// The index just past the string whose body starts at `i`.
fn skip_string(raw: &[u8], mut i: usize) -> usize {
    while i < raw.len() {
        match raw[i] {
            b'\\' => i += 2,
            b'"' => return i + 1,
            _ => i += 1,
        }
    }
    i
}

#[cfg(test)]
mod tests {
    use super::out_of_range;

    #[test]
    fn numbers_beyond_float64_are_refused_wherever_they_stand() {
        let bad = [
            r#"{"a":1e400}"#,
            r#"{"a":[1,2,-1E+400]}"#,
            r#"{"metadata":{"name":"x"},"spec":{"x":{"y":1.5e309}}}"#,
        ];
        for body in bad {
            let message = out_of_range(body.as_bytes()).unwrap_or_default();
            assert!(
                message.starts_with("json: cannot unmarshal number ")
                    && message.ends_with(" into Go value of type float64"),
                "{body}: {message}"
            );
        }
        let long = format!(r#"{{"a":{}}}"#, "9".repeat(400));
        assert!(out_of_range(long.as_bytes()).is_some());
    }

    #[test]
    fn numbers_in_range_and_strings_pass() {
        let good = [
            r#"{"a":1e308,"b":-2.5E-400,"c":0,"d":-12}"#,
            r#"{"a":"1e400","b":"\"1e400\\"}"#,
            r#"{"a":"esc \" 1e400 still a string"}"#,
            r#"[]"#,
            "",
        ];
        for body in good {
            assert_eq!(out_of_range(body.as_bytes()), None, "{body}");
        }
    }
}
