//! No secret string in any message (SPEC §23). `cue` quotes the offending value in its
//! errors (`invalid value "hunter2" (out of bound …)`), and the value may be a Secret's
//! `stringData` or (§27) a string from a `valuesFrom` Secret. The operator cannot tell
//! which quoted string came from where, so the rule is the conservative one: every quoted
//! string literal in a `cue` message becomes `"<redacted>"`, except in the field path that
//! starts a line (`a."b-c".d:`), which names fields, not values. The error kind, the
//! path and the positions (`./release.cue:5:5`) stay, so the message still says what to fix.

/// What a redacted value reads as.
pub(crate) const REDACTED: &str = "<redacted>";

/// `message` with every quoted string value replaced by `"<redacted>"`.
pub(crate) fn cue_message(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    let mut line_start = true;
    let mut i = 0;
    while i < message.len() {
        let rest = &message[i..];
        if line_start {
            line_start = false;
            let line = rest.split('\n').next().unwrap_or_default();
            let path = split_path(line);
            out.push_str(path);
            i += path.len();
            continue;
        }
        if let Some(body) = rest.strip_prefix("\"\"\"") {
            // A multi-line literal: everything up to the closing `"""` goes.
            out.push('"');
            out.push_str(REDACTED);
            out.push('"');
            i = body.find("\"\"\"").map_or(message.len(), |e| i + 3 + e + 3);
            continue;
        }
        if rest.starts_with('"') {
            // A one-line literal: up to the next unescaped quote, else the end of the line.
            let mut escaped = false;
            let mut end = (rest.len(), false);
            for (j, c) in rest.char_indices().skip(1) {
                match c {
                    _ if escaped => escaped = false,
                    '\\' => escaped = true,
                    '"' => {
                        end = (j + 1, true);
                        break;
                    }
                    '\n' => {
                        end = (j, false);
                        break;
                    }
                    _ => {}
                }
            }
            out.push('"');
            out.push_str(REDACTED);
            if end.1 {
                out.push('"');
            }
            i += end.0;
            continue;
        }
        let c = rest.chars().next().unwrap_or_default();
        out.push(c);
        i += c.len_utf8();
        line_start = c == '\n';
    }
    out
}

/// The leading field path of a line (`a."b-c".d:`): up to the first `:` outside quotes
/// that ends the line or is followed by a space, when no space comes before it. Empty
/// when the line does not start with a path.
fn split_path(line: &str) -> &str {
    let mut in_quote = false;
    let mut escaped = false;
    for (i, c) in line.char_indices() {
        if in_quote {
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => in_quote = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_quote = true,
            ' ' | '\t' => return "",
            ':' if line[i + 1..].starts_with(' ') || i + 1 == line.len() => {
                return &line[..=i];
            }
            _ => {}
        }
    }
    ""
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoted_values_go_and_paths_and_positions_stay() {
        let m = "_m.#config.password: invalid value \"hunter2\" (out of bound =~\"^[a-z]+[0-9]{3}$\"):\n    ./release.cue:5:5\n    ./cue.mod/pkg/m/m.cue:3:12";
        let r = cue_message(m);
        assert!(!r.contains("hunter2"), "{r}");
        assert_eq!(
            r,
            "_m.#config.password: invalid value \"<redacted>\" (out of bound =~\"<redacted>\"):\n    ./release.cue:5:5\n    ./cue.mod/pkg/m/m.cue:3:12"
        );
    }

    #[test]
    fn quoted_labels_in_the_path_stay_and_escapes_do_not_end_a_literal() {
        let m = "components.\"db-secret\".stringData.pw: conflicting values \"a\\\"hunter2\\\"b\" and \"x\"";
        let r = cue_message(m);
        assert!(!r.contains("hunter2"), "{r}");
        assert!(
            r.starts_with("components.\"db-secret\".stringData.pw: "),
            "{r}"
        );
        assert!(
            r.ends_with("conflicting values \"<redacted>\" and \"<redacted>\""),
            "{r}"
        );
    }

    #[test]
    fn unterminated_and_multi_line_literals_are_redacted_to_their_end() {
        let r = cue_message("a: invalid value \"hunter2 and more\nb: 1");
        assert_eq!(r, "a: invalid value \"<redacted>\nb: 1");
        let r = cue_message(
            "a: invalid value \"\"\"\n    line hunter2\n    \"\"\" (x)\nnext \"s3cret\"",
        );
        assert!(!r.contains("hunter2") && !r.contains("s3cret"), "{r}");
        assert!(r.contains("(x)") && r.contains("next"), "{r}");
    }

    #[test]
    fn messages_without_quotes_are_unchanged() {
        let m = "a.b: conflicting values 1 and 2:\n    ./release.cue:3:4";
        assert_eq!(cue_message(m), m);
        assert_eq!(cue_message(""), "");
    }
}
