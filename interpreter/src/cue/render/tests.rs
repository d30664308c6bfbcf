//! The renderer against fake `cue` scripts: deadlines, caps, stderr, turns, limits.

use std::sync::atomic::Ordering;

use super::*;
use crate::effects::local::Verdict;
use opm_core::outcome::FailureClass;

#[test]
fn stderr_classification() {
    let not_found = "x: import failed: cannot fetch a@v0.9.9: module a@v0.9.9: module not found:\n    ./release.cue:3:8\n";
    assert!(matches!(
        classify_stderr(not_found),
        RenderError::Resolution { .. }
    ));
    let unreachable = "cannot fetch a@v0.2.1: module a@v0.2.1: cannot do HTTP request: Get \"http://127.0.0.1:1/v2\": dial tcp 127.0.0.1:1: connect: connection refused:";
    let e = classify_stderr(unreachable);
    assert!(matches!(e, RenderError::RegistryUnreachable { .. }));
    assert_eq!(
        (e.class(), e.reason()),
        (FailureClass::Transient, opm_core::Reason::RenderFailed)
    );
    let no_module = "x: import failed: cannot find package \"foo.example/bar\": cannot find module providing package foo.example/bar:";
    assert_eq!(classify_stderr(no_module).reason(), "ResolutionFailed");
    let server =
        "cannot fetch a@v0.2.1: module a@v0.2.1: 503 Service Unavailable: non-JSON error response";
    assert!(matches!(
        classify_stderr(server),
        RenderError::RegistryUnreachable { .. }
    ));
    let value = "x: conflicting values \"503 Service Unavailable\" and 1";
    assert!(matches!(
        classify_stderr(value),
        RenderError::Evaluation { .. }
    ));
    let major = "invalid module file /t/cue.mod/module.cue: cannot make version: mismatched major version suffix";
    assert_eq!(classify_stderr(major).reason(), "ResolutionFailed");
    let eval = "_m.#config.replicas: conflicting values \"x\" and int (mismatched types string and int):\n    ./release.cue:5:5\n";
    let e = classify_stderr(eval);
    assert_eq!(
        e,
        RenderError::Evaluation {
            message: eval.trim_end().replace("\"x\"", "\"<redacted>\"")
        }
    );
    assert_eq!(
        (e.class(), e.reason()),
        (FailureClass::Stalled, opm_core::Reason::RenderFailed)
    );
}

/// Issue 31 item 8: the class is read from words anywhere in stderr, so an evaluation
/// error that also says "i/o timeout" or "module not found" (a module's own error text,
/// or a value holding those words) lands in another class. Redaction holds for every
/// class: the quoted value never reaches the message.
#[test]
fn every_class_of_message_is_redacted() {
    let secret = "s3cr3t-p4ss";
    let texts = [
        format!(
            "_m.#config.db: invalid value \"{secret}\" (does not satisfy strings.MaxRunes(4)): i/o timeout\n    ./release.cue:5:5\n"
        ),
        format!(
            "_m.#config.db: conflicting values \"{secret}\" and \"module not found\":\n    ./release.cue:5:5\n"
        ),
        format!(
            "x: import failed: cannot fetch a@v0.2.1: module a@v0.2.1: cannot do HTTP request: \"{secret}\" connection refused:"
        ),
        format!("cannot fetch a@v0: module a@v0: 401 Unauthorized: \"{secret}\""),
    ];
    for t in &texts {
        let e = classify_stderr(t);
        let shown = e.to_string();
        assert!(!shown.contains(secret), "{e:?}");
        assert!(shown.contains("<redacted>"), "{e:?}");
    }
    assert!(matches!(
        classify_stderr(&texts[0]),
        RenderError::RegistryUnreachable { .. }
    ));
    assert!(matches!(
        classify_stderr(&texts[1]),
        RenderError::Resolution { .. }
    ));
}

#[test]
fn long_stderr_is_cut_to_the_first_lines() {
    let text: String = (0..100).map(|i| format!("line {i}\n")).collect();
    let RenderError::Evaluation { message } = classify_stderr(&text) else {
        panic!()
    };
    assert_eq!(message.lines().count(), classify::MESSAGE_LINES);
    assert!(message.starts_with("line 0\n"));
}

/// The executable is written by a child process (`install`), never through a file
/// descriptor of this multi-threaded test process: a descriptor inherited by a concurrent
/// fork would make the exec fail with ETXTBSY.
pub(super) fn fake_cue(dir: &Path, script: &str) -> PathBuf {
    let src = dir.join("fake-cue.txt");
    std::fs::write(&src, format!("#!/bin/sh\n{script}\n")).unwrap();
    let p = dir.join("fake-cue");
    let ok = std::process::Command::new("install")
        .args(["-m", "755"])
        .arg(&src)
        .arg(&p)
        .status()
        .unwrap();
    assert!(ok.success());
    p
}

#[tokio::test]
async fn a_slow_cue_is_killed_at_the_deadline() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = RenderConfig::new(fake_cue(dir.path(), "sleep 30"));
    cfg.timeout = Duration::from_millis(300);
    let started = std::time::Instant::now();
    let err = Renderer::new(cfg)
        .render_package(dir.path())
        .await
        .unwrap_err();
    assert_eq!(
        err,
        RenderError::Timeout {
            after: Duration::from_millis(300)
        }
    );
    assert_eq!(err.class(), FailureClass::Transient);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn output_over_the_cap_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = RenderConfig::new(fake_cue(dir.path(), "yes '{}' | head -c 1000000"));
    cfg.max_output_bytes = 10_000;
    let err = Renderer::new(cfg)
        .render_package(dir.path())
        .await
        .unwrap_err();
    let RenderError::OutputTooLarge {
        bytes_at_least,
        limit,
    } = err
    else {
        panic!("{err:?}")
    };
    assert_eq!(limit, 10_000);
    assert!(
        bytes_at_least > 10_000 && bytes_at_least <= 10_000 + 64 * 1024,
        "{bytes_at_least}"
    );
}

#[tokio::test]
async fn stderr_of_a_failing_run_is_classified_and_truncated() {
    let dir = tempfile::tempdir().unwrap();
    let script = "echo 'a.b: conflicting values 1 and 2' >&2; head -c 100000 /dev/zero | tr '\\0' x >&2; exit 1";
    let mut cfg = RenderConfig::new(fake_cue(dir.path(), script));
    cfg.max_stderr_bytes = 64;
    let err = Renderer::new(cfg)
        .render_package(dir.path())
        .await
        .unwrap_err();
    let RenderError::Evaluation { message } = err else {
        panic!("{err:?}")
    };
    assert!(
        message.starts_with("a.b: conflicting values 1 and 2"),
        "{message}"
    );
    assert!(message.len() <= 64, "{}", message.len());
}

#[tokio::test]
async fn a_successful_run_with_garbage_output_is_invalid_output() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = RenderConfig::new(fake_cue(dir.path(), "echo 'not json'"));
    let err = Renderer::new(cfg)
        .render_package(dir.path())
        .await
        .unwrap_err();
    assert!(matches!(err, RenderError::InvalidOutput { .. }), "{err:?}");
    assert_eq!(
        (err.class(), err.reason()),
        (FailureClass::Stalled, opm_core::Reason::RenderFailed)
    );
}

#[tokio::test]
async fn at_most_max_concurrent_cue_runs_at_once_the_rest_queue() {
    let dir = tempfile::tempdir().unwrap();
    let script = "sleep 0.3; echo '{\"kind\":\"ModuleRelease\",\"components\":{}}'";
    let mut cfg = RenderConfig::new(fake_cue(dir.path(), script));
    cfg.max_concurrent = 2;
    let r = Renderer::new(cfg);
    let renders = (0..5).map(|_| r.render_package(dir.path()));
    for res in futures::future::join_all(renders).await {
        res.unwrap();
    }
    let s = r.stats();
    assert_eq!(s.runs.load(Ordering::Relaxed), 5);
    assert_eq!(s.peak_running.load(Ordering::Relaxed), 2);
    assert!(s.queued.load(Ordering::Relaxed) >= 3);
}

#[tokio::test]
async fn cue_gets_gomemlimit_and_an_address_space_limit() {
    let dir = tempfile::tempdir().unwrap();
    let script = "echo \"$GOMEMLIMIT $(ulimit -v)\" >&2; exit 1";
    let mut cfg = RenderConfig::new(fake_cue(dir.path(), script));
    cfg.memory_limit = Some(1 << 30);
    let err = Renderer::new(cfg)
        .render_package(dir.path())
        .await
        .unwrap_err();
    let kib = crate::cue::cue_limits::address_space_for(1 << 30) / 1024;
    assert_eq!(
        err,
        RenderError::Evaluation {
            message: format!("{} {kib}", 1u64 << 30)
        }
    );
}

#[tokio::test]
async fn a_missing_binary_is_a_transient_spawn_error() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = RenderConfig::new(dir.path().join("no-such-cue"));
    let err = Renderer::new(cfg)
        .render_package(dir.path())
        .await
        .unwrap_err();
    assert!(matches!(err, RenderError::Io { .. }), "{err:?}");
    assert_eq!(err.class(), FailureClass::Transient);
}
