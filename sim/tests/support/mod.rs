//! Runs the real `opm-sim` binary and compares against checked-in golden files.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn sim(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_opm-sim"))
        .args(args)
        .output()
        .expect("running opm-sim")
}

pub fn example(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples/sim")
        .join(name)
        .display()
        .to_string()
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).expect("utf-8 stdout")
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Runs and insists on success.
pub fn ok(args: &[&str]) -> String {
    let o = sim(args);
    assert!(
        o.status.success(),
        "opm-sim {args:?} failed: {}",
        stderr(&o)
    );
    stdout(&o)
}

fn golden_path(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name)
}

/// `got` must equal `tests/golden/<name>`; with `UPDATE_GOLDEN=1` the file is rewritten.
pub fn golden(name: &str, got: &str) {
    let path = golden_path(name);
    if std::env::var_os("UPDATE_GOLDEN").is_some_and(|v| v == "1") {
        std::fs::write(&path, got).expect("writing golden");
        return;
    }
    let want = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (run with UPDATE_GOLDEN=1)", path.display()));
    assert!(
        want == got,
        "{} differs from the output (UPDATE_GOLDEN=1 regenerates it):\n--- want\n{want}\n--- got\n{got}",
        path.display()
    );
}

/// `--json` output parsed.
pub fn json(scenario: &str) -> serde_json::Value {
    let out = ok(&["run", &example(scenario), "--json", "--quiet"]);
    serde_json::from_str(&out).expect("--json output is JSON")
}

/// The attempts of one release in `--json` output.
pub fn attempts_of<'a>(doc: &'a serde_json::Value, name: &str) -> Vec<&'a serde_json::Value> {
    doc["attempts"]
        .as_array()
        .expect("attempts")
        .iter()
        .filter(|a| a["name"] == name)
        .collect()
}

pub fn final_of<'a>(doc: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    doc["final"]
        .as_array()
        .expect("final")
        .iter()
        .find(|r| r["name"] == name)
        .unwrap_or_else(|| panic!("no final status for {name}"))
}
