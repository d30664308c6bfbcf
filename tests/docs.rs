//! The documentation is checked like code: every CRD field has a description, every reason
//! the core can write has a troubleshooting entry, no page points at internal documents or
//! issue numbers, every relative link resolves, and the generated reference pages (per-kind
//! field tables from the CRD schemas, the reasons list from `Reason::ALL`) are current.
//!
//! Regenerate the generated pages after changing the API types or the reasons:
//!
//! ```sh
//! make docs-gen   # = make crds, then UPDATE_DOCS=1 on the docs tests
//! ```

#[path = "support/doc_lint.rs"]
mod doc_lint;

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use doc_lint::{Finding, broken_links, check_generated, files_under, forbidden_refs, repo_root};
use opm_core::reason::Reason;
use serde_json::Value;

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn rel(root: &Path, p: &Path) -> String {
    p.strip_prefix(root).unwrap_or(p).display().to_string()
}

fn fail_on(findings: Vec<Finding>, what: &str) {
    let lines: Vec<String> = findings.iter().map(ToString::to_string).collect();
    assert!(lines.is_empty(), "{what}:\n{}", lines.join("\n"));
}

/// What users read: the book's sources, the READMEs, everything under `deploy/`, the
/// examples' manifests.
fn user_facing_files(root: &Path) -> Vec<PathBuf> {
    let mut files = files_under(&root.join("docs/src"), ".md");
    files.push(root.join("README.md"));
    files.push(root.join("bench/README.md"));
    files.extend(files_under(&root.join("examples"), "README.md"));
    // deploy/ (CRDs, the chart and its NOTES, the manifests' comments) and the examples'
    // manifests, scenarios and overlays are read by whoever installs or copies them.
    for ext in [".yaml", ".txt", ".md"] {
        files.extend(files_under(&root.join("deploy"), ext));
    }
    files.extend(files_under(&root.join("examples"), ".yaml"));
    files.retain(|f| f.exists());
    files
}

#[test]
fn no_user_facing_text_refers_to_internal_documents_or_issues() {
    let root = repo_root();
    let files = user_facing_files(&root);
    assert!(
        files.len() > 10,
        "found only {} files to check",
        files.len()
    );
    let findings = files
        .iter()
        .flat_map(|f| forbidden_refs(&rel(&root, f), &read(f)))
        .collect();
    fail_on(
        findings,
        "user-facing text refers to what users do not have",
    );
}

#[test]
fn the_lint_catches_what_it_should() {
    // Guards the guard: each pattern is caught, and ordinary prose is not.
    for bad in [
        "see SPEC §12",
        "as in §4",
        "fixed in issue 13",
        "issues 13/18",
        "issue #7",
        "measured in this sitting",
        "the last session's run",
        "four agents shared it",
        "an agent wrote this",
        "in the next session",
    ] {
        assert!(
            doc_lint::forbidden_ref(bad).is_some(),
            "not caught: {bad:?}"
        );
    }
    for good in [
        "an issue with the registry",
        "reissue 3 certificates",
        "the user-agent header",
        "Specification of a Platform",
    ] {
        assert_eq!(
            doc_lint::forbidden_ref(good),
            None,
            "wrongly caught: {good:?}"
        );
    }
    let text = "[a](missing.md) and `[b](code.md)` and [c](https://x/y) and [d](#here)\n# Here\n";
    let dir = std::env::temp_dir().join(format!("opm-doc-lint-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("page.md");
    std::fs::write(&file, text).unwrap();
    let broken = broken_links(&dir, &file);
    std::fs::remove_dir_all(&dir).ok();
    assert_eq!(broken.len(), 1, "{broken:?}");
    assert!(broken[0].what.contains("missing.md"), "{broken:?}");
}

#[test]
fn every_relative_link_resolves() {
    let root = repo_root();
    let files: Vec<PathBuf> = user_facing_files(&root)
        .into_iter()
        .filter(|f| f.extension().is_some_and(|e| e == "md"))
        .collect();
    let findings = files.iter().flat_map(|f| broken_links(&root, f)).collect();
    fail_on(findings, "broken relative links");
}

#[test]
fn every_page_of_the_book_is_in_its_summary() {
    let root = repo_root();
    let src = root.join("docs/src");
    let summary = read(&src.join("SUMMARY.md"));
    let listed: BTreeSet<String> = doc_lint::link_targets(&summary)
        .into_iter()
        .map(|(_, t)| t)
        .collect();
    let missing: Vec<String> = files_under(&src, ".md")
        .iter()
        .map(|f| rel(&src, f))
        .filter(|r| r != "SUMMARY.md" && !listed.contains(r))
        .collect();
    assert!(
        missing.is_empty(),
        "pages mdBook would not build (not in docs/src/SUMMARY.md): {missing:?}"
    );
}

/// The heading lines under `docs/src` that name a reason: ``### `Name` ``.
fn troubleshooting_headings(root: &Path) -> BTreeSet<String> {
    files_under(&root.join("docs/src"), ".md")
        .iter()
        .flat_map(|f| {
            read(f)
                .lines()
                .filter_map(|l| {
                    l.strip_prefix("### `")
                        .and_then(|r| r.strip_suffix('`'))
                        .map(str::to_string)
                })
                .collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn every_reason_has_a_troubleshooting_entry() {
    let root = repo_root();
    let headings = troubleshooting_headings(&root);
    let missing: Vec<&str> = Reason::ALL
        .iter()
        .map(|r| r.as_str())
        .filter(|r| !headings.contains(*r))
        .collect();
    assert!(
        missing.is_empty(),
        "reasons without a troubleshooting entry (a line \"### `Name`\" under docs/src, then what \
         you see, why, how to check with `kubectl opm why`, how to fix): {missing:?}"
    );
}

/// The text of each ``### `Name` `` entry under `docs/src`, up to the next heading.
fn troubleshooting_entries(root: &Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for f in files_under(&root.join("docs/src"), ".md") {
        let text = read(&f);
        let mut current: Option<(String, String)> = None;
        for line in text.lines() {
            if line.starts_with('#') {
                out.extend(current.take());
                if let Some(name) = line.strip_prefix("### `").and_then(|r| r.strip_suffix('`')) {
                    current = Some((name.to_string(), String::new()));
                }
            } else if let Some((_, body)) = current.as_mut() {
                body.push_str(line);
                body.push('\n');
            }
        }
        out.extend(current);
    }
    out
}

#[test]
fn every_troubleshooting_entry_says_what_you_see_why_how_to_check_and_fix() {
    let root = repo_root();
    // Other pages use the same heading form for other names (alerts): only reasons count.
    let reasons: BTreeSet<&str> = Reason::ALL.iter().map(|r| r.as_str()).collect();
    let entries: Vec<(String, String)> = troubleshooting_entries(&root)
        .into_iter()
        .filter(|(name, _)| reasons.contains(name.as_str()))
        .collect();
    assert!(
        entries.len() >= Reason::ALL.len(),
        "{} entries",
        entries.len()
    );
    let mut incomplete = Vec::new();
    for (name, body) in &entries {
        let lower = body.to_lowercase();
        let missing: Vec<&str> = ["what you see", "why", "check", "fix"]
            .into_iter()
            .filter(|part| !lower.contains(part))
            .collect();
        if !missing.is_empty() {
            incomplete.push(format!("{name}: no {missing:?}"));
        }
    }
    assert!(
        incomplete.is_empty(),
        "troubleshooting entries missing a part:\n{}",
        incomplete.join("\n")
    );
}

/// Which page holds a reason's entry, as a link from `docs/src/reference/`.
fn entry_page(root: &Path, reason: &str) -> Option<String> {
    let heading = format!("### `{reason}`");
    let src = root.join("docs/src");
    files_under(&src, ".md")
        .into_iter()
        .find(|f| read(f).lines().any(|l| l == heading))
        .map(|f| {
            let r = rel(&src, &f);
            match r.strip_prefix("reference/") {
                Some(same_dir) => same_dir.to_string(),
                None => format!("../{r}"),
            }
        })
}

fn reasons_page(root: &Path) -> String {
    let mut page = String::from(
        "<!-- Generated from the core's Reason enum by tests/docs.rs; do not edit. \
         Regenerate with `make docs-gen`. -->\n\n# Reasons\n\n\
         Every reason the operator writes in a condition, an event or an attempt trace. Each \
         links to its troubleshooting entry: what you see, why, how to check, how to fix.\n\n\
         | reason | troubleshooting |\n|---|---|\n",
    );
    for r in Reason::ALL {
        let name = r.as_str();
        let link = match entry_page(root, name) {
            Some(page) => format!("[{name}]({page}#{})", doc_lint::slug(name)),
            None => "(missing)".to_string(),
        };
        writeln!(page, "| `{name}` | {link} |").unwrap();
    }
    page
}

#[test]
fn the_reasons_page_is_current() {
    let root = repo_root();
    let page = reasons_page(&root);
    check_generated(&root, "docs/src/reference/reasons.md", &page).unwrap();
}

// --- per-kind reference from the CRD schemas -------------------------------------------

fn crd_docs() -> Vec<Value> {
    let root = repo_root();
    let mut out = Vec::new();
    for f in files_under(&root.join("deploy/crds"), ".yaml") {
        let text = read(&f);
        out.extend(
            serde_saphyr::from_multiple::<Value>(&text)
                .unwrap_or_else(|e| panic!("{}: {e}", f.display())),
        );
    }
    assert_eq!(out.len(), 3, "three CRDs in deploy/crds");
    out
}

/// Every property under `schema`, depth first, as (path, schema).
fn walk<'a>(schema: &'a Value, path: &str, out: &mut Vec<(String, &'a Value)>) {
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        let mut keys: Vec<&String> = props.keys().collect();
        keys.sort();
        for k in keys {
            let p = if path.is_empty() {
                k.clone()
            } else {
                format!("{path}.{k}")
            };
            out.push((p.clone(), &props[k]));
            walk(&props[k], &p, out);
        }
    }
    if let Some(items) = schema.get("items") {
        walk(items, &format!("{path}[]"), out);
    }
    if let Some(ap) = schema.get("additionalProperties").filter(|v| v.is_object()) {
        walk(ap, &format!("{path}.<key>"), out);
    }
}

fn openapi(crd: &Value) -> &Value {
    &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
}

#[test]
fn every_crd_field_has_a_description() {
    let mut missing = Vec::new();
    let mut total = 0;
    for crd in crd_docs() {
        let kind = crd["spec"]["names"]["kind"]
            .as_str()
            .unwrap_or("?")
            .to_string();
        let mut fields = Vec::new();
        walk(openapi(&crd), "", &mut fields);
        for (path, schema) in fields {
            if path == "apiVersion" || path == "kind" || path == "metadata" {
                continue;
            }
            total += 1;
            let described = schema
                .get("description")
                .and_then(Value::as_str)
                .is_some_and(|d| !d.trim().is_empty());
            if !described {
                missing.push(format!("{kind}: .{path}"));
            }
        }
    }
    assert!(total > 200, "walked only {total} fields");
    assert!(
        missing.is_empty(),
        "CRD fields without a description (add a doc comment on the API type, then `make crds`):\n{}",
        missing.join("\n")
    );
}

fn cell(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace('|', "\\|")
}

fn type_of(s: &Value) -> String {
    let t = s.get("type").and_then(Value::as_str).unwrap_or("");
    match t {
        "array" => {
            let inner = s.get("items").map(type_of).unwrap_or_default();
            if inner.is_empty() {
                "array".into()
            } else {
                format!("[]{inner}")
            }
        }
        "object" if s.get("additionalProperties").is_some_and(Value::is_object) => {
            format!("map[string]{}", type_of(&s["additionalProperties"]))
        }
        "" if s.get("x-kubernetes-preserve-unknown-fields").is_some() => "any".into(),
        "" if s.get("x-kubernetes-int-or-string").is_some() => "int or string".into(),
        t => t.into(),
    }
}

/// The default of a field: the schema's `default`, else what its description says in one
/// of the forms the API types' doc comments use ("default 5m", "`Warn` (default)",
/// "`values.yaml` when unset"), else `false` for a boolean (omitted means false).
fn default_of(s: &Value) -> String {
    if let Some(d) = s.get("default") {
        return match d.as_str() {
            Some(text) => format!("`{text}`"),
            None => format!("`{d}`"),
        };
    }
    let desc = s.get("description").and_then(Value::as_str).unwrap_or("");
    let desc = desc.split_whitespace().collect::<Vec<_>>().join(" ");
    if let Some(i) = desc.find("` (default)")
        && let Some(start) = desc[..i].rfind('`')
    {
        return format!("`{}`", &desc[start + 1..i]);
    }
    if let Some(i) = desc.find("` when unset")
        && let Some(start) = desc[..i].rfind('`')
    {
        return format!("`{}`", &desc[start + 1..i]);
    }
    for (i, _) in desc.match_indices("default ") {
        let token: String = desc[i + "default ".len()..]
            .chars()
            .take_while(|c| !c.is_whitespace() && !matches!(c, ',' | ';' | ')'))
            .collect();
        let token = token.trim_end_matches('.').trim_matches('`');
        let usable = token == "true"
            || token == "false"
            || token.chars().next().is_some_and(|c| c.is_ascii_digit());
        if usable {
            return format!("`{token}`");
        }
    }
    if s.get("type").and_then(Value::as_str) == Some("boolean") {
        return "`false`".into();
    }
    String::new()
}

/// Bounds and allowed values, as a user would write them.
fn limits(s: &Value, required: bool) -> String {
    let mut out: Vec<String> = Vec::new();
    if required {
        out.push("required".into());
    }
    if let Some(e) = s.get("enum").and_then(Value::as_array) {
        let vals: Vec<String> = e
            .iter()
            .map(|v| format!("`{}`", v.as_str().unwrap_or("?")))
            .collect();
        out.push(format!("one of {}", vals.join(", ")));
    }
    for (key, label) in [
        ("minLength", "min length"),
        ("maxLength", "max length"),
        ("minItems", "min items"),
        ("maxItems", "max items"),
        ("minProperties", "min entries"),
        ("maxProperties", "max entries"),
        ("minimum", "min"),
        ("maximum", "max"),
    ] {
        if let Some(v) = s.get(key) {
            out.push(format!("{label} {v}"));
        }
    }
    if let Some(p) = s.get("pattern").and_then(Value::as_str) {
        out.push(format!("pattern `{p}`"));
    }
    if let Some(rules) = s.get("x-kubernetes-validations").and_then(Value::as_array) {
        for r in rules {
            if let Some(m) = r.get("message").and_then(Value::as_str) {
                out.push(m.to_string());
            }
        }
    }
    out.join("; ")
}

fn kind_page(crd: &Value) -> String {
    let spec = &crd["spec"];
    let kind = spec["names"]["kind"].as_str().unwrap_or("?");
    let group = spec["group"].as_str().unwrap_or("?");
    let version = spec["versions"][0]["name"].as_str().unwrap_or("?");
    let scope = spec["scope"].as_str().unwrap_or("?");
    let short: Vec<String> = spec["names"]["shortNames"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str())
                .map(|s| format!("`{s}`"))
                .collect()
        })
        .unwrap_or_default();
    let root = openapi(crd);
    let mut page = format!(
        "<!-- Generated from deploy/crds by tests/docs.rs; do not edit. Regenerate with \
         `make docs-gen`. -->\n\n# {kind}\n\n{}\n\n\
         | | |\n|---|---|\n| API version | `{group}/{version}` |\n| scope | {scope} |\n\
         | short names | {} |\n\n",
        root["description"].as_str().unwrap_or(""),
        if short.is_empty() {
            "—".into()
        } else {
            short.join(", ")
        },
    );
    if let Some(cols) = spec["versions"][0]["additionalPrinterColumns"].as_array() {
        page.push_str("`kubectl get` columns (`-o wide` adds those marked wide):\n\n| column | from |\n|---|---|\n");
        for c in cols {
            let wide = if c.get("priority").is_some() {
                " (wide)"
            } else {
                ""
            };
            writeln!(
                page,
                "| {}{wide} | `{}` |",
                c["name"].as_str().unwrap_or("?"),
                c["jsonPath"].as_str().unwrap_or("?").replace('|', "\\|")
            )
            .unwrap();
        }
        page.push('\n');
    }
    for section in ["spec", "status"] {
        let Some(s) = root["properties"].get(section) else {
            continue;
        };
        writeln!(
            page,
            "## {section}\n\n{}\n",
            cell(s["description"].as_str().unwrap_or(""))
        )
        .unwrap();
        page.push_str("| field | type | default | limits | description |\n|---|---|---|---|---|\n");
        let mut fields = Vec::new();
        walk(s, section, &mut fields);
        for (path, schema) in &fields {
            let (parent, name) = path.rsplit_once('.').unwrap_or(("", path));
            let container = parent.trim_end_matches("[]").trim_end_matches(".<key>");
            let parent_schema = fields
                .iter()
                .find(|(p, _)| p == container)
                .map(|(_, s)| *s)
                .unwrap_or(s);
            let parent_schema = if parent.ends_with("[]") {
                parent_schema.get("items").unwrap_or(parent_schema)
            } else if parent.ends_with(".<key>") {
                parent_schema
                    .get("additionalProperties")
                    .unwrap_or(parent_schema)
            } else {
                parent_schema
            };
            let required = parent_schema
                .get("required")
                .and_then(Value::as_array)
                .is_some_and(|r| r.iter().any(|v| v == name));
            writeln!(
                page,
                "| `{path}` | {} | {} | {} | {} |",
                type_of(schema),
                if section == "spec" {
                    default_of(schema)
                } else {
                    String::new()
                },
                cell(&limits(schema, required)),
                cell(schema["description"].as_str().unwrap_or(""))
            )
            .unwrap();
        }
        page.push('\n');
    }
    page
}

#[test]
fn the_per_kind_reference_pages_are_current() {
    let root = repo_root();
    let mut stale = Vec::new();
    for crd in crd_docs() {
        let kind = crd["spec"]["names"]["kind"]
            .as_str()
            .unwrap()
            .to_lowercase();
        let page = kind_page(&crd);
        assert!(page.contains("## spec"), "{kind}: no spec table");
        if let Err(e) = check_generated(&root, &format!("docs/src/reference/{kind}.md"), &page) {
            stale.push(e);
        }
    }
    assert!(stale.is_empty(), "{}", stale.join("\n"));
}
