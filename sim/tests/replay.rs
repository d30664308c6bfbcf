//! `opm-sim replay` on traces the simulator writes in the operator's format: identical
//! replays pass, tampered effects are named, corrupted files are reported by file and line.

mod support;

use std::path::{Path, PathBuf};

use support::*;

/// Traces of the artifact-outage scenario (17 attempts) in a fresh directory.
fn traces() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let t = dir.path().join("traces");
    ok(&[
        "run",
        &example("artifact-outage.yaml"),
        "--quiet",
        "--trace-dir",
        &t.display().to_string(),
    ]);
    let file = t.join("trace-000000.jsonl");
    assert!(file.is_file(), "trace written");
    (dir, file)
}

fn replay(path: &Path) -> std::process::Output {
    sim(&["replay", &path.display().to_string()])
}

#[test]
fn recorded_attempts_replay_identically_from_a_file_or_a_directory() {
    let (_d, file) = traces();
    let o = replay(&file);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("17 attempts in 1 files"),
        "{}",
        stderr(&o)
    );
    let o = replay(file.parent().unwrap());
    assert!(o.status.success(), "{}", stderr(&o));
    // Every header names its release and attempt number.
    let text = std::fs::read_to_string(&file).unwrap();
    let headers: Vec<serde_json::Value> = text
        .lines()
        .filter(|l| l.contains("coreVersion"))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(headers.len(), 17);
    for (i, h) in headers.iter().enumerate() {
        assert_eq!(h["attempt"], i as u64);
        assert_eq!(h["name"], "app");
    }
}

#[test]
fn platform_runs_replay_identically() {
    // Soft blocks without a Platform, the re-triggered renders with its digest, the
    // re-render after its change: every recorded attempt gives the same effects again.
    let dir = tempfile::tempdir().unwrap();
    let t = dir.path().join("traces");
    ok(&[
        "run",
        &example("missing-platform.yaml"),
        "--quiet",
        "--trace-dir",
        &t.display().to_string(),
    ]);
    let o = replay(&t);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("80 attempts in"), "{}", stderr(&o));
    let text = std::fs::read_to_string(t.join("trace-000000.jsonl")).unwrap();
    assert!(
        text.contains("\"platformNotReady\""),
        "soft blocks recorded"
    );
    assert!(
        text.contains("\"platform\":\"sha256:"),
        "renders carry the digest"
    );
    // Replay checks what it is fed: a render claiming another Platform digest differs.
    let digest = text
        .split("\"platform\":\"")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .unwrap()
        .to_owned();
    let other = format!("sha256:{}", "0".repeat(64));
    let tampered = text.replacen(&digest, &other, 1);
    std::fs::write(t.join("trace-000000.jsonl"), tampered).unwrap();
    let o = replay(&t);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
}

#[test]
fn explain_prints_each_step_input_then_effects() {
    let (_d, file) = traces();
    let out = ok(&["replay", "--explain", &file.display().to_string()]);
    assert_eq!(out.matches("== ").count(), 17, "one section per attempt");
    assert!(out.contains("attempt #0 Release demo/app"), "{out}");
    assert!(out.contains("step 0: in  {"), "{out}");
    assert!(out.contains("out {\"type\":\"fetchArtifact\""), "{out}");
    assert_eq!(out.matches("identical (").count(), 17);
}

#[test]
fn a_tampered_effect_fails_naming_attempt_step_and_difference() {
    let (_d, file) = traces();
    let text = std::fs::read_to_string(&file).unwrap();
    // The third attempt's done effect claims a 30s requeue instead of 20s.
    let mut done = 0;
    let tampered: Vec<String> = text
        .lines()
        .map(|l| {
            if l.contains("\"out\":{\"type\":\"done\"") {
                done += 1;
                if done == 3 {
                    assert!(l.contains("\"secs\":20"), "{l}");
                    return l.replace("\"secs\":20", "\"secs\":30");
                }
            }
            l.to_string()
        })
        .collect();
    std::fs::write(&file, tampered.join("\n") + "\n").unwrap();
    let o = replay(&file);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("attempt #2 of Release demo/app"), "{err}");
    assert!(err.contains("at step 3 (seq 8)"), "{err}");
    assert!(err.contains("expected: {\"type\":\"done\""), "{err}");
    assert!(
        err.contains("\"secs\":30") && err.contains("\"secs\":20"),
        "{err}"
    );
    assert!(err.contains("trace-000000.jsonl:"), "{err}");
}

#[test]
fn a_corrupted_line_is_reported_by_file_and_line() {
    let (_d, file) = traces();
    let text = std::fs::read_to_string(&file).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    lines[4] = lines[4][..lines[4].len() / 2].to_string();
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();
    let o = replay(&file);
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert!(
        err.contains("trace-000000.jsonl:5: not a trace line"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn a_truncated_file_is_reported_not_replayed() {
    let (_d, file) = traces();
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(&file, &text[..text.len() - 40]).unwrap();
    let o = replay(&file);
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert!(err.contains("truncated"), "{err}");
    assert!(err.contains(&format!("{}:", file.display())), "{err}");
}

#[test]
fn garbage_missing_files_and_empty_directories_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let o = replay(dir.path());
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("no trace files found"),
        "{}",
        stderr(&o)
    );
    let f = dir.path().join("x.jsonl");
    std::fs::write(&f, "\u{0}\u{1}binary\n").unwrap();
    let o = replay(&f);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("x.jsonl:1: not a trace line"),
        "{}",
        stderr(&o)
    );
    let o = replay(&dir.path().join("missing.jsonl"));
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("missing.jsonl"), "{}", stderr(&o));
}

#[test]
fn a_record_before_any_header_is_corrupt() {
    let (_d, file) = traces();
    let text = std::fs::read_to_string(&file).unwrap();
    let rest: Vec<&str> = text.lines().skip(1).collect();
    std::fs::write(&file, rest.join("\n") + "\n").unwrap();
    let o = replay(&file);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains(":1: not a trace line: a record before any trace header"),
        "{}",
        stderr(&o)
    );
}
