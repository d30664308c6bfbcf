//! Splits the export of a batch package back into each member's own export.
//!
//! `cue export --out json` prints its value indented by four spaces a level with one
//! trailing newline, and a JSON string never holds a raw newline. So member `i`'s value is
//! the text after `"r<i>": ` up to its closing bracket, and removing one level of indent
//! from every line after its first (plus the trailing newline) gives the bytes its own
//! package prints: the test `batched_renders_are_byte_identical_to_single_ones` pins that
//! against the real `cue`. Anything unexpected is `None`, and the batch falls back to
//! single runs.

use crate::cue::module_ref::batch_field;

/// One level of `cue`'s JSON indent.
const INDENT: &str = "    ";

/// Each of the `n` members' export, in member order, or `None` when `out` is not the
/// export of `n` batch fields.
pub fn split_batch(out: &[u8], n: usize) -> Option<Vec<Vec<u8>>> {
    let text = std::str::from_utf8(out).ok()?;
    let mut rest = text.strip_prefix("{\n")?;
    let mut parts = Vec::with_capacity(n);
    for i in 0..n {
        let head = format!("{INDENT}\"{}\": ", batch_field(i));
        rest = rest.strip_prefix(head.as_str())?;
        let len = value_len(rest)?;
        parts.push(dedent(&rest[..len])?);
        rest = &rest[len..];
        rest = match rest.strip_prefix(",\n") {
            Some(r) if i + 1 < n => r,
            _ if i + 1 == n => rest.strip_prefix('\n')?,
            _ => return None,
        };
    }
    (rest == "}\n").then_some(parts)
}

/// Length of the JSON object or array at the start of `s` (through its closing bracket).
fn value_len(s: &str) -> Option<usize> {
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    if !s.starts_with(['{', '[']) {
        return None;
    }
    for (i, b) in s.bytes().enumerate() {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'{' | b'[' => depth += 1,
            b'}' | b']' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(i + 1);
                }
            }
            _ => {}
        }
    }
    None
}

/// `value` one indent level out, with `cue`'s trailing newline.
fn dedent(value: &str) -> Option<Vec<u8>> {
    let mut lines = value.split('\n');
    let mut out = String::with_capacity(value.len() + 1);
    out.push_str(lines.next()?);
    for line in lines {
        out.push('\n');
        out.push_str(line.strip_prefix(INDENT)?);
    }
    out.push('\n');
    Some(out.into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_come_out_one_level_in_with_a_trailing_newline() {
        let out = "{\n    \"r0\": {\n        \"a\": \"x}\\\"{\",\n        \"l\": [\n            1\n        ]\n    },\n    \"r1\": {}\n}\n";
        let parts = split_batch(out.as_bytes(), 2).unwrap();
        assert_eq!(
            String::from_utf8(parts[0].clone()).unwrap(),
            "{\n    \"a\": \"x}\\\"{\",\n    \"l\": [\n        1\n    ]\n}\n"
        );
        assert_eq!(parts[1], b"{}\n");
    }

    #[test]
    fn anything_else_is_refused() {
        let two = "{\n    \"r0\": {},\n    \"r1\": {}\n}\n";
        assert!(split_batch(two.as_bytes(), 2).is_some());
        for bad in [
            "{\n    \"r0\": {}\n}\n",
            "{\n    \"r1\": {},\n    \"r0\": {}\n}\n",
            "{\n    \"r0\": {},\n    \"r1\": {},\n    \"r2\": {}\n}\n",
            "{\n    \"r0\": {\n  \"a\": 1\n    },\n    \"r1\": {}\n}\n",
            "{\n    \"r0\": 1,\n    \"r1\": {}\n}\n",
            "{\n    \"r0\": {},\n    \"r1\": {\n}\n",
        ] {
            assert_eq!(split_batch(bad.as_bytes(), 2), None, "{bad:?}");
        }
    }
}
