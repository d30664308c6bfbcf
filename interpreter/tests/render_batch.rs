//! Batched module renders (issue 18) with the real `cue` and a real `cue mod registry`:
//! concurrent renders of one module version share one `cue` run, each gets the bytes its
//! own run gives, a bad release fails alone with its own message, and renders of other
//! versions or credentials never share a run.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use opm_operator::cue::module_ref::{
    ModuleRef, ReleaseFiles, ReleaseIdentity, synthesise_batch, synthesise_release,
};
use opm_operator::cue::render::split::split_batch;
use opm_operator::cue::render::{RenderConfig, RenderError, RenderGate, Renderer};
use serde_json::{Value, json};
use support::cue::{MODULE_PATH, Registry, cue_bin, write_tree};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// A render gate that stays shut until [`ShutGate::open`], then gives `turns` at once,
/// and counts the turns it gave.
struct ShutGate {
    turns: Arc<Semaphore>,
    given: AtomicU64,
}

impl ShutGate {
    fn new() -> Self {
        Self {
            turns: Arc::new(Semaphore::new(0)),
            given: AtomicU64::new(0),
        }
    }

    fn open(&self, turns: usize) {
        self.turns.add_permits(turns);
    }
}

impl RenderGate for ShutGate {
    type Turn = OwnedSemaphorePermit;

    async fn turn(&self, _namespace: &str) -> OwnedSemaphorePermit {
        let t = self.turns.clone().acquire_owned().await.unwrap();
        self.given.fetch_add(1, Ordering::Relaxed);
        t
    }
}

fn renderer(reg: &Registry, cache: &std::path::Path, max_batch: usize) -> Renderer {
    let mut cfg = RenderConfig::new(cue_bin());
    cfg.registry = Some(reg.cue_registry());
    cfg.cue_cache_dir = Some(cache.to_path_buf());
    cfg.timeout = Duration::from_secs(30);
    cfg.max_batch = max_batch;
    Renderer::new(cfg)
}

fn module(version: &str) -> ModuleRef {
    ModuleRef::new(MODULE_PATH, version, None).unwrap()
}

/// Release `i` of the namespace `team` (a batch holds one namespace's releases).
fn id(i: usize) -> ReleaseIdentity {
    ReleaseIdentity {
        name: format!("web-{i}"),
        namespace: "team".into(),
    }
}

/// Release `i` of the namespace `team-<i mod 3>`.
fn id_in_three(i: usize) -> ReleaseIdentity {
    ReleaseIdentity {
        name: format!("web-{i}"),
        namespace: format!("team-{}", i % 3),
    }
}

fn values(i: usize) -> Value {
    json!({"replicas": 1 + i % 4, "message": format!("release {i} \"quoted\" é")})
}

type Request = (ModuleRef, Value, ReleaseIdentity, Option<(String, Vec<u8>)>);

/// Renders every request at once through a shut gate, then opens it (two turns).
async fn render_all(
    r: &Renderer,
    gate: &ShutGate,
    requests: &[Request],
) -> Vec<Result<Arc<opm_operator::cue::rendered::Rendered>, RenderError>> {
    let deadline = Instant::now() + Duration::from_secs(60);
    let renders = requests
        .iter()
        .map(|(m, v, i, c)| r.render_module_fair(m, v, i, c.clone(), gate, deadline));
    let opener = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        gate.open(2);
    };
    let (out, ()) = tokio::join!(futures::future::join_all(renders), opener);
    out
}

fn runs(r: &Renderer) -> (u64, u64, u64, u64) {
    let s = r.stats();
    (
        s.runs.load(Ordering::Relaxed),
        s.batch_runs.load(Ordering::Relaxed),
        s.batched.load(Ordering::Relaxed),
        s.batch_fallbacks.load(Ordering::Relaxed),
    )
}

fn export(reg: &Registry, cache: &std::path::Path, files: &ReleaseFiles) -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    write_tree(
        dir.path(),
        &[
            ("cue.mod/module.cue", files.module_cue.as_str()),
            ("release.cue", files.release_cue.as_str()),
        ],
    );
    let out = std::process::Command::new(cue_bin())
        .args(["export", ".", "--out", "json"])
        .current_dir(dir.path())
        .env("CUE_REGISTRY", reg.cue_registry())
        .env("CUE_CACHE_DIR", cache)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

#[test]
fn batched_renders_are_byte_identical_to_single_ones() {
    let reg = Registry::start();
    reg.publish("v0.2.1");
    let cache = tempfile::tempdir().unwrap();
    let m = module("v0.2.1");
    let members: Vec<(Value, ReleaseIdentity)> = (0..5).map(|i| (values(i), id(i))).collect();
    let mut members_ref: Vec<(&Value, &ReleaseIdentity)> =
        members.iter().map(|(v, i)| (v, i)).collect();
    let empty = Value::Null;
    let nobody = id(9);
    members_ref.push((&empty, &nobody));
    let batch = export(
        &reg,
        cache.path(),
        &synthesise_batch(&m, &members_ref).unwrap(),
    );
    let parts = split_batch(&batch, members_ref.len()).expect("the batch output splits");
    for ((v, i), part) in members_ref.iter().zip(&parts) {
        let single = export(&reg, cache.path(), &synthesise_release(&m, v, i).unwrap());
        assert_eq!(
            String::from_utf8_lossy(part),
            String::from_utf8_lossy(&single),
            "{} renders the same bytes in a batch as alone",
            i.name
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_renders_of_one_version_share_one_cue_run() {
    let reg = Registry::start();
    reg.publish("v0.2.1");
    let cache = tempfile::tempdir().unwrap();
    let requests: Vec<Request> = (0..10)
        .map(|i| (module("v0.2.1"), values(i), id(i), None))
        .collect();
    let batched = renderer(&reg, cache.path(), 16);
    let gate = ShutGate::new();
    let out = render_all(&batched, &gate, &requests).await;
    assert_eq!(runs(&batched), (1, 1, 10, 0), "one cue run for ten renders");
    // Each batch member withdrew its wait once answered: only the runner took a turn.
    assert_eq!(gate.given.load(Ordering::Relaxed), 1);
    let alone = renderer(&reg, cache.path(), 1);
    for ((m, v, i, _), got) in requests.iter().zip(out) {
        let got = got.expect("batched render");
        let want = alone.render_module_cached(m, v, i).await.unwrap();
        assert_eq!(got.exported, want.exported, "{}", i.name);
        assert_eq!(got.bytes, want.bytes, "{}", i.name);
        assert_eq!(got.exported["metadata"]["name"], i.name.as_str());
    }
    assert_eq!(runs(&alone).0, 10);
    // The batch filled the render cache: the same renders again need no cue run.
    let again = render_all(&batched, &ShutGate::new(), &requests[..3]).await;
    assert!(again.iter().all(Result::is_ok));
    assert_eq!(runs(&batched).0, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_release_fails_alone_with_its_own_message_and_the_others_render() {
    let reg = Registry::start();
    reg.publish("v0.2.1");
    let cache = tempfile::tempdir().unwrap();
    let bad = 2;
    let mut requests: Vec<Request> = (0..5)
        .map(|i| (module("v0.2.1"), values(i), id(i), None))
        .collect();
    requests[bad].1 = json!({"replicas": 0});
    let r = renderer(&reg, cache.path(), 16);
    let out = render_all(&r, &ShutGate::new(), &requests).await;
    // One failed batch run, then each member alone.
    assert_eq!(runs(&r), (6, 1, 0, 1));
    let alone = renderer(&reg, cache.path(), 1);
    for (n, ((m, v, i, _), got)) in requests.iter().zip(&out).enumerate() {
        let want = alone.render_module_cached(m, v, i).await;
        match (got, want) {
            (Ok(got), Ok(want)) if n != bad => assert_eq!(got.exported, want.exported),
            (Err(got), Err(want)) if n == bad => {
                assert_eq!(got, &want, "its own single-run error");
                let RenderError::Evaluation { message } = got else {
                    panic!("{got:?}")
                };
                assert!(message.contains("replicas"), "{message}");
                assert!(!message.contains("r2"), "no batch field in {message}");
            }
            (got, want) => panic!("member {n}: {got:?} against {want:?}"),
        }
    }
    // The bad release now renders alone, so new releases batch without it.
    let mut next: Vec<Request> = vec![requests[bad].clone()];
    next.extend((5..8).map(|i| (module("v0.2.1"), values(i), id(i), None)));
    let out = render_all(&r, &ShutGate::new(), &next).await;
    assert!(out[0].is_err());
    assert!(out[1..].iter().all(Result::is_ok));
    assert_eq!(
        runs(&r),
        (8, 2, 3, 1),
        "the bad one alone, the three in one batch"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn other_versions_and_credentials_never_share_a_run() {
    let reg = Registry::start();
    reg.publish("v0.2.0");
    reg.publish("v0.2.1");
    let cache = tempfile::tempdir().unwrap();
    // The registry asks for no credentials: two Docker configs that differ only in their
    // digest pull the same module, each with its own config and module cache.
    let creds = |user: &str| {
        let config = format!("{{\"auths\":{{\"example.invalid\":{{\"username\":\"{user}\"}}}}}}");
        Some((format!("sha256:{user}"), config.into_bytes()))
    };
    let groups = [
        ("v0.2.0", None),
        ("v0.2.1", None),
        ("v0.2.1", creds("alice")),
        ("v0.2.1", creds("bob")),
    ];
    let requests: Vec<Request> = (0..12)
        .map(|i| {
            let (version, c) = &groups[i % groups.len()];
            (
                module(version),
                json!({"replicas": 1 + i % 4}),
                id(i),
                c.clone(),
            )
        })
        .collect();
    let r = renderer(&reg, cache.path(), 16);
    let out = render_all(&r, &ShutGate::new(), &requests).await;
    assert_eq!(
        runs(&r),
        (4, 4, 12, 0),
        "one batch per version and credentials"
    );
    for ((m, _, i, _), got) in requests.iter().zip(out) {
        let got = got.expect("render");
        assert_eq!(
            got.exported["components"]["config"]["cm"]["data"]["message"],
            format!("hello from {}", m.version),
            "{} renders its own version",
            i.name
        );
    }
}

/// A fixed list of releases to render ahead, each offered once.
struct FixedAhead(std::sync::Mutex<Vec<(Value, ReleaseIdentity)>>);

impl opm_operator::cue::render::Ahead for FixedAhead {
    /// Offers whatever is listed, whatever its namespace: the renderer must not trust the
    /// source to filter.
    fn candidates(
        &self,
        _module: &ModuleRef,
        _namespace: &str,
        n: usize,
    ) -> Vec<(Value, ReleaseIdentity)> {
        let mut list = self.0.lock().unwrap();
        let n = n.min(list.len());
        list.drain(..n).collect()
    }
}

fn ahead(ids: std::ops::Range<usize>, bad: Option<usize>) -> Arc<FixedAhead> {
    let list = ids
        .map(|i| {
            let v = if Some(i) == bad {
                json!({"replicas": 0})
            } else {
                values(i)
            };
            (v, id(i))
        })
        .collect();
    Arc::new(FixedAhead(std::sync::Mutex::new(list)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_attempt_renders_others_ahead_and_they_find_their_own_bytes_cached() {
    let reg = Registry::start();
    reg.publish("v0.2.1");
    let cache = tempfile::tempdir().unwrap();
    let r = renderer(&reg, cache.path(), 8);
    r.render_ahead_from(ahead(1..20, None));
    let first = render_all(
        &r,
        &ShutGate::new(),
        &[(module("v0.2.1"), values(0), id(0), None)],
    )
    .await;
    assert!(first[0].is_ok());
    // One run: the attempt and 7 releases ahead (the batch's room).
    assert_eq!(runs(&r), (1, 1, 1, 0));
    assert_eq!(r.stats().ahead.load(Ordering::Relaxed), 7);
    let alone = renderer(&reg, cache.path(), 1);
    for i in 1..8 {
        let gate = ShutGate::new();
        gate.open(1);
        let deadline = Instant::now() + Duration::from_secs(60);
        let got = r
            .render_module_fair(&module("v0.2.1"), &values(i), &id(i), None, &gate, deadline)
            .await
            .unwrap();
        let want = alone
            .render_module_cached(&module("v0.2.1"), &values(i), &id(i))
            .await
            .unwrap();
        assert_eq!(got.exported, want.exported, "release {i}: its own bytes");
        assert_eq!(
            gate.given.load(Ordering::Relaxed),
            0,
            "a cache hit takes no turn"
        );
    }
    assert_eq!(runs(&r).0, 1, "no run for the releases rendered ahead");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_release_rendered_ahead_costs_the_attempt_one_batch_and_is_not_taken_again() {
    let reg = Registry::start();
    reg.publish("v0.2.1");
    let cache = tempfile::tempdir().unwrap();
    let r = renderer(&reg, cache.path(), 4);
    let list = ahead(1..10, Some(2));
    r.render_ahead_from(list.clone());
    let out = render_all(
        &r,
        &ShutGate::new(),
        &[(module("v0.2.1"), values(0), id(0), None)],
    )
    .await;
    let alone = renderer(&reg, cache.path(), 1);
    let want = alone
        .render_module_cached(&module("v0.2.1"), &values(0), &id(0))
        .await
        .unwrap();
    assert_eq!(
        out[0].as_ref().unwrap().exported,
        want.exported,
        "the attempt's own bytes"
    );
    // The batch (the attempt and 1, 2, 3 ahead) failed; the attempt rendered alone.
    assert_eq!(runs(&r), (2, 1, 0, 1));
    assert_eq!(r.stats().ahead.load(Ordering::Relaxed), 0);
    // The bad one, offered again, renders alone: it fails alone with its own error.
    list.0
        .lock()
        .unwrap()
        .insert(0, (json!({"replicas": 0}), id(2)));
    let out = render_all(
        &r,
        &ShutGate::new(),
        &[(module("v0.2.1"), values(4), id(4), None)],
    )
    .await;
    assert!(out[0].is_ok());
    assert_eq!(
        r.stats().ahead.load(Ordering::Relaxed),
        3,
        "4 rendered with 5, 6, 7 ahead, not 2"
    );
}

/// Issue 31 item 9: renders of several namespaces at once never share a `cue` run (each
/// batch runs in one namespace's turn), a release of one namespace whose values break the
/// run costs no other namespace a failed batch, and render-ahead never takes another
/// namespace's release into a turn (the source here offers them; the renderer refuses).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_and_renders_ahead_hold_one_namespace() {
    let reg = Registry::start();
    reg.publish("v0.2.1");
    let cache = tempfile::tempdir().unwrap();
    // Nine releases of three namespaces; team-2's web-2 breaks the module's schema.
    let bad = 2;
    let mut requests: Vec<Request> = (0..9)
        .map(|i| (module("v0.2.1"), values(i), id_in_three(i), None))
        .collect();
    requests[bad].1 = json!({"replicas": 0});
    let r = renderer(&reg, cache.path(), 16);
    let gate = ShutGate::new();
    let out = render_all(&r, &gate, &requests).await;
    for (n, got) in out.iter().enumerate() {
        assert_eq!(got.is_err(), n == bad, "member {n}: {got:?}");
    }
    let (runs_, batch_runs, batched, fallbacks) = runs(&r);
    assert_eq!(batch_runs, 3, "one batch per namespace");
    assert_eq!(fallbacks, 1, "only team-2's batch failed");
    assert_eq!(batched, 6, "team-0 and team-1 rendered in their batches");
    assert_eq!(runs_, 3 + 3, "three batches, then team-2's three alone");

    // Ahead: an attempt of team-0 is offered releases of team-1 and team-2 and of its own
    // namespace; only its own ride along.
    let r = renderer(&reg, cache.path(), 8);
    let offered: Vec<(Value, ReleaseIdentity)> =
        (10..19).map(|i| (values(i), id_in_three(i))).collect();
    r.render_ahead_from(Arc::new(FixedAhead(std::sync::Mutex::new(offered))));
    let first = render_all(
        &r,
        &ShutGate::new(),
        &[(module("v0.2.1"), values(0), id_in_three(0), None)],
    )
    .await;
    assert!(first[0].is_ok());
    assert_eq!(
        r.stats().ahead.load(Ordering::Relaxed),
        3,
        "web-12, web-15, web-18 (team-0) ahead; none of team-1 or team-2"
    );
}

/// Issue 31 item 7 (SPEC §24, §27), with the real `cue` and registry: renders with five
/// different Docker configs leave no copy of the module behind (each ran on a private
/// cache removed with it; the old code kept one copy per credential digest, never
/// cleaned), renders without credentials share one copy per module version, and above
/// `--max-cue-cache-bytes` the least recently used version is removed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_module_cache_keeps_one_copy_per_version_within_its_bound() {
    use opm_operator::cue::cue_cache::entries;
    let reg = Registry::start();
    reg.publish("v0.2.0");
    reg.publish("v0.2.1");
    let cache = tempfile::tempdir().unwrap();
    let r = renderer(&reg, cache.path(), 1);
    for user in ["a", "b", "c", "d", "e"] {
        let config = format!("{{\"auths\":{{\"example.invalid\":{{\"username\":\"{user}\"}}}}}}");
        let creds = Some((format!("sha256:{user}"), config.into_bytes()));
        r.render_module_cached_with(&module("v0.2.1"), &values(0), &id(0), creds)
            .await
            .unwrap();
    }
    assert!(
        entries(cache.path()).is_empty(),
        "renders with credentials left module copies in the shared cache: {:?}",
        entries(cache.path())
    );
    assert!(!cache.path().join("by-credentials").exists());
    // Without credentials: one shared copy, however many releases render it.
    for i in 0..3 {
        r.render_module_cached(&module("v0.2.1"), &values(i), &id(i))
            .await
            .unwrap();
    }
    let one = entries(cache.path());
    assert_eq!(one.len(), 1, "{one:?}");
    let size = one[0].bytes;
    assert!(size > 0);
    // A bound that holds one version: the older use goes when the second arrives.
    let mut cfg = RenderConfig::new(cue_bin());
    cfg.registry = Some(reg.cue_registry());
    cfg.cue_cache_dir = Some(cache.path().to_path_buf());
    cfg.max_batch = 1;
    cfg.max_cue_cache_bytes = size + size / 2;
    let bounded = Renderer::new(cfg);
    bounded
        .render_module_cached(&module("v0.2.1"), &values(0), &id(0))
        .await
        .unwrap();
    bounded
        .render_module_cached(&module("v0.2.0"), &values(0), &id(0))
        .await
        .unwrap();
    bounded.cue_cache().unwrap().trim().await;
    let left: Vec<String> = entries(cache.path()).into_iter().map(|e| e.key).collect();
    assert_eq!(left.len(), 1, "{left:?}");
    assert!(
        left[0].ends_with("@v0.2.0"),
        "the most recent use stays: {left:?}"
    );
    // The removed version renders again (downloaded anew).
    bounded
        .render_module_cached(&module("v0.2.1"), &values(5), &id(5))
        .await
        .unwrap();
}
