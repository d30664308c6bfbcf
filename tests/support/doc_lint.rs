//! Checks on the documentation every crate's doc tests share (std only, so the CLI's and the
//! interpreter's tests can include this file by path without new dependencies).
//!
//! What users read must not point at documents they do not have (design specs, issue numbers,
//! how the project was built), every relative link must resolve, and generated pages must
//! match what they are generated from. Regenerate with `UPDATE_DOCS=1` (`make docs-gen`).
#![allow(dead_code)] // each test binary uses a different part

use std::path::{Path, PathBuf};
use std::process::Command;

/// The workspace root: the first ancestor of the crate holding `Cargo.lock`.
pub fn repo_root() -> PathBuf {
    let mut dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    while !dir.join("Cargo.lock").exists() {
        assert!(
            dir.pop(),
            "no Cargo.lock above {}",
            env!("CARGO_MANIFEST_DIR")
        );
    }
    dir
}

/// One problem found in a file, for a failure message that says where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub file: String,
    pub line: usize,
    pub what: String,
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}: {}", self.file, self.line, self.what)
    }
}

/// Phrases that refer to the project's internal documents or history. Matched
/// case-sensitively where the word is a name (`SPEC`), case-insensitively for phrases.
const FORBIDDEN_PHRASES: [&str; 3] = ["last session", "this sitting", "same sitting"];

/// Why `line` refers to something a user does not have, if it does.
pub fn forbidden_ref(line: &str) -> Option<String> {
    if line.contains("SPEC") {
        return Some("refers to the design spec (`SPEC`): write the behaviour out".into());
    }
    if line.contains('§') {
        return Some("refers to a section sign (`§`) of an internal document".into());
    }
    let lower = line.to_ascii_lowercase();
    for phrase in FORBIDDEN_PHRASES {
        if lower.contains(phrase) {
            return Some(format!(
                "says {phrase:?}: how the project was built is not user text"
            ));
        }
    }
    if let Some(n) = issue_number(&lower) {
        return Some(format!(
            "names an issue number ({n}): say what it changed instead"
        ));
    }
    for word in ["agent", "agents", "session", "sessions"] {
        if has_word(&lower, word) {
            return Some(format!(
                "says {word:?}: how the project was built is not user text"
            ));
        }
    }
    None
}

/// `issue 13`, `issue #13`, `issues 13/18` → the number.
fn issue_number(lower: &str) -> Option<String> {
    let mut rest = lower;
    while let Some(i) = rest.find("issue") {
        let after = &rest[i + "issue".len()..];
        let after = after.strip_prefix('s').unwrap_or(after);
        let after = after.trim_start_matches([' ', '#']);
        let digits: String = after.chars().take_while(|c| c.is_ascii_digit()).collect();
        let word_start = i == 0 || !rest.as_bytes()[i - 1].is_ascii_alphanumeric();
        if word_start && !digits.is_empty() {
            return Some(digits);
        }
        rest = &rest[i + "issue".len()..];
    }
    None
}

/// `word` as a whole word in `text` (both lowercase).
fn has_word(text: &str, word: &str) -> bool {
    text.match_indices(word).any(|(i, _)| {
        let before = text[..i].chars().next_back();
        let after = text[i + word.len()..].chars().next();
        let boundary = |c: Option<char>| c.is_none_or(|c| !c.is_ascii_alphanumeric() && c != '-');
        boundary(before) && boundary(after)
    })
}

/// Every forbidden reference in `text`, reported against `name`.
pub fn forbidden_refs(name: &str, text: &str) -> Vec<Finding> {
    text.lines()
        .enumerate()
        .filter_map(|(i, line)| {
            forbidden_ref(line).map(|what| Finding {
                file: name.to_string(),
                line: i + 1,
                what,
            })
        })
        .collect()
}

/// Every file under `dir` whose name ends with `ext`, sorted.
pub fn files_under(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                if p.file_name().is_some_and(|n| n == "book") {
                    continue; // mdBook's output
                }
                stack.push(p);
            } else if p.to_string_lossy().ends_with(ext) {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// A heading's anchor as mdBook and GitHub make it: lowercase, letters, digits, `-` and `_`
/// kept, spaces to `-`, everything else dropped.
pub fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchors of a markdown file's headings (outside code fences).
pub fn anchors(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if !fenced && line.starts_with('#') {
            out.push(slug(line.trim_start_matches('#')));
        }
    }
    out
}

/// The targets of inline markdown links `[text](target)` outside code fences and code spans,
/// with their line numbers.
pub fn link_targets(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut fenced = false;
    for (i, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        // Drop code spans: a `[x](y)` inside backticks is an example, not a link.
        let mut plain = String::new();
        for (j, part) in line.split('`').enumerate() {
            if j % 2 == 0 {
                plain.push_str(part);
            }
        }
        let mut rest = plain.as_str();
        while let Some(k) = rest.find("](") {
            let after = &rest[k + 2..];
            let Some(end) = after.find(')') else { break };
            let target = after[..end].split_whitespace().next().unwrap_or("");
            out.push((i + 1, target.to_string()));
            rest = &after[end..];
        }
    }
    out
}

/// Relative links in `file` whose file (or heading anchor, for markdown targets) does not
/// exist. External links (`http:`, `https:`, `mailto:`) are not fetched.
pub fn broken_links(root: &Path, file: &Path) -> Vec<Finding> {
    let text = std::fs::read_to_string(file).unwrap_or_default();
    let name = file
        .strip_prefix(root)
        .unwrap_or(file)
        .display()
        .to_string();
    let mut out = Vec::new();
    for (line, target) in link_targets(&text) {
        if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
            continue;
        }
        let (path, anchor) = match target.split_once('#') {
            Some((p, a)) => (p, Some(a)),
            None => (target.as_str(), None),
        };
        let resolved = if path.is_empty() {
            file.to_path_buf()
        } else {
            file.parent().unwrap_or(root).join(path)
        };
        if !resolved.exists() {
            out.push(Finding {
                file: name.clone(),
                line,
                what: format!("link to {target:?}: {} does not exist", resolved.display()),
            });
            continue;
        }
        if let Some(anchor) = anchor {
            let is_md = resolved.extension().is_some_and(|e| e == "md");
            if is_md {
                let target_text = std::fs::read_to_string(&resolved).unwrap_or_default();
                if !anchors(&target_text).iter().any(|a| a == anchor) {
                    out.push(Finding {
                        file: name.clone(),
                        line,
                        what: format!("link to {target:?}: no heading with anchor #{anchor}"),
                    });
                }
            }
        }
    }
    out
}

/// Compares a generated page with the checked-in one, or writes it under `UPDATE_DOCS=1`.
/// Returns the failure message when stale.
pub fn check_generated(root: &Path, rel: &str, generated: &str) -> Result<(), String> {
    let path = root.join(rel);
    if std::env::var_os("UPDATE_DOCS").is_some() {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        }
        std::fs::write(&path, generated).map_err(|e| format!("{}: {e}", path.display()))?;
        return Ok(());
    }
    let current = std::fs::read_to_string(&path).unwrap_or_default();
    if current == generated {
        return Ok(());
    }
    let first_diff = current
        .lines()
        .zip(generated.lines())
        .position(|(a, b)| a != b)
        .map(|i| i + 1)
        .unwrap_or_else(|| current.lines().count().min(generated.lines().count()) + 1);
    Err(format!(
        "{rel} is stale (first difference at line {first_diff}); regenerate with `make docs-gen`"
    ))
}

/// `bin args… --help` with a fixed width and an empty environment, so the page depends on
/// neither the terminal nor the caller's variables (clap shows the value of a flag's
/// environment variable when it is set, e.g. `OPM_CUE_BIN` under `tools/install --env`).
pub fn help_text(bin: &str, args: &[&str]) -> String {
    let out = Command::new(bin)
        .args(args)
        .arg("--help")
        .env_clear()
        .env("COLUMNS", "100")
        .output()
        .unwrap_or_else(|e| panic!("{bin} {args:?} --help: {e}"));
    assert!(
        out.status.success(),
        "{bin} {args:?} --help exited {}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("help is UTF-8")
}

/// The subcommands a clap `--help` lists under `Commands:` (without `help`).
pub fn subcommands(help: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut inside = false;
    for line in help.lines() {
        if line.starts_with("Commands:") {
            inside = true;
            continue;
        }
        if inside {
            if !line.starts_with("  ") {
                break;
            }
            // A subcommand's line starts at two spaces; wrapped help text is indented deeper.
            if line.as_bytes().get(2).is_some_and(|b| *b != b' ') {
                let name = line.split_whitespace().next().unwrap_or("");
                if !name.is_empty() && name != "help" {
                    out.push(name.to_string());
                }
            }
        }
    }
    out
}

/// A reference page of a command line: the top-level help, then each subcommand's, each in
/// a text block under its own heading. `display` is how users type the command.
pub fn help_page(bin: &str, display: &str, title: &str, intro: &str) -> String {
    let top = help_text(bin, &[]);
    let mut page = format!(
        "<!-- Generated from `{display} --help` by the docs_help test; do not edit. \
         Regenerate with `make docs-gen`. -->\n\n# {title}\n\n{intro}\n\n"
    );
    page.push_str(&format!("## `{display}`\n\n```text\n{}```\n", top));
    for sub in subcommands(&top) {
        let help = help_text(bin, &[&sub]);
        page.push_str(&format!("\n## `{display} {sub}`\n\n```text\n{help}```\n"));
    }
    page
}
