//! What the operator reads of a `cue.mod/module.cue` by hand.

use std::collections::BTreeMap;

/// The `deps` of a `cue.mod/module.cue` as `cue` writes it (path with major → version).
/// Read by hand rather than by another `cue` run: the file is `cue`'s own canonical output.
pub fn module_deps(text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let Some(start) = text.find("deps:") else {
        return out;
    };
    let mut rest = &text[start + "deps:".len()..];
    let mut current: Option<String> = None;
    while let Some(q) = rest.find('"') {
        let before = &rest[..q];
        let Some(end) = rest[q + 1..].find('"') else {
            break;
        };
        let s = rest[q + 1..q + 1 + end].to_owned();
        let after = rest[q + 2 + end..].trim_start();
        if after.starts_with(':') && s.contains('@') {
            current = Some(s);
        } else if before.trim_end().ends_with("v:")
            && let Some(path) = current.take()
        {
            out.insert(path, s);
        }
        rest = &rest[q + 2 + end..];
    }
    out
}
