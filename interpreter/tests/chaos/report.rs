//! One row per chaos case, and the markdown table of the run.

use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Clone)]
pub struct Row {
    pub case: &'static str,
    pub fault: String,
    pub releases: usize,
    /// Evidence the fault landed where the case claims (e.g. objects present at the kill).
    pub hit: String,
    pub converged: bool,
    pub wrong_deletions: usize,
    pub converge: Option<Duration>,
    /// Problems found; empty on a clean row.
    pub problems: Vec<String>,
}

impl Row {
    pub fn new(case: &'static str, fault: impl Into<String>, releases: usize) -> Row {
        Row {
            case,
            fault: fault.into(),
            releases,
            hit: String::new(),
            converged: false,
            wrong_deletions: 0,
            converge: None,
            problems: Vec::new(),
        }
    }

    pub fn failed(case: &'static str, why: String) -> Row {
        let mut r = Row::new(case, "?", 0);
        r.problems.push(why);
        r
    }

    pub fn ok(&self) -> bool {
        self.converged && self.wrong_deletions == 0 && self.problems.is_empty()
    }
}

pub fn panic_text(e: tokio::task::JoinError) -> String {
    match e.try_into_panic() {
        Ok(p) => p
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "non-text panic".into()),
        Err(e) => e.to_string(),
    }
}

pub fn markdown(rows: &[Row], total: Duration, api_starts: u32) -> String {
    let mut t = String::from(
        "| case | fault | releases | fault hit | converged | wrong deletions | time to converge | problems |\n|---|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        t.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} |\n",
            r.case,
            r.fault,
            r.releases,
            r.hit,
            if r.converged { "yes" } else { "no" },
            r.wrong_deletions,
            r.converge
                .map(|d| format!("{:.1}s", d.as_secs_f64()))
                .unwrap_or_else(|| "-".into()),
            if r.problems.is_empty() {
                "none".to_string()
            } else {
                r.problems.join("; ").replace('|', "/").replace('\n', " ")
            }
        ));
    }
    t.push_str(&format!(
        "\nWhole run: {:.0}s; API server started {api_starts} times.\n",
        total.as_secs_f64()
    ));
    t
}

/// `$CARGO_TARGET_DIR/chaos-report.md` (or the workspace's `target/`).
pub fn write(table: &str) {
    let dir = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target"));
    let path = dir.join("chaos-report.md");
    let text = format!("# Chaos run\n\n{table}");
    match std::fs::write(&path, text) {
        Ok(()) => eprintln!("chaos: report written to {}", path.display()),
        Err(e) => eprintln!("chaos: cannot write {}: {e}", path.display()),
    }
}
