//! `--events-webhook` against a real local HTTP receiver (SPEC §32): every event the
//! operator records arrives once, in order per release, as a structured CloudEvent; a
//! receiver answering 503 for a while loses nothing; a full queue drops the oldest and
//! counts it; the payload is redacted like the Event and the URL's credentials never reach
//! a log line; and a receiver that is down or hangs does not slow a converge (measured).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::process::Stdio;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode, Uri};
use opm_operator::ops::events_webhook::Endpoint;
use serde_json::{Value, json};

use crate::harness::*;

/// How the receiver answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Mode {
    /// 202 Accepted.
    Up = 0,
    /// 503 Service Unavailable.
    Unavailable = 1,
    /// Takes the request and never answers.
    Hang = 2,
    /// 400 Bad Request: refused for good.
    Refuse = 3,
}

/// One POST the receiver took (answered 202).
#[derive(Debug, Clone)]
pub struct Received {
    pub event: Value,
    pub headers: HeaderMap,
    pub uri: Uri,
}

/// A real HTTP receiver on 127.0.0.1 whose answer a test switches.
pub struct Receiver {
    pub addr: SocketAddr,
    mode: Arc<AtomicU8>,
    got: Arc<Mutex<Vec<Received>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Receiver {
    pub async fn start(mode: Mode) -> Receiver {
        let mode_cell = Arc::new(AtomicU8::new(mode as u8));
        let got = Arc::new(Mutex::new(Vec::new()));
        let (m, g) = (mode_cell.clone(), got.clone());
        let app = axum::Router::new().fallback(move |headers: HeaderMap, uri: Uri, body: Bytes| {
            let (m, g) = (m.clone(), g.clone());
            async move {
                match m.load(Ordering::SeqCst) {
                    0 => {
                        let event = serde_json::from_slice(&body).unwrap_or(Value::Null);
                        g.lock().unwrap().push(Received {
                            event,
                            headers,
                            uri,
                        });
                        StatusCode::ACCEPTED
                    }
                    1 => StatusCode::SERVICE_UNAVAILABLE,
                    3 => StatusCode::BAD_REQUEST,
                    _ => std::future::pending().await,
                }
            }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Receiver {
            addr,
            mode: mode_cell,
            got,
            task,
        }
    }

    pub fn set(&self, mode: Mode) {
        self.mode.store(mode as u8, Ordering::SeqCst);
    }

    pub fn got(&self) -> Vec<Received> {
        self.got.lock().unwrap().clone()
    }

    /// The URL with credentials in user info, path and query.
    pub fn url(&self) -> String {
        format!(
            "http://hook-user:pw-Zq81@{}/hooks/tok-Vb27/in?key=qk-Hs55",
            self.addr
        )
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn webhook(url: &str) -> Endpoint {
    Endpoint::parse(url).expect("a URL")
}

/// A port nothing listens on (connections refused).
fn closed_port() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    drop(l);
    format!("http://{addr}/in")
}

/// `n` Releases of one ConfigMap each, every one with its own source.
async fn create_releases(ns: &TestNs<'_>, pkg: &Package, n: usize) -> Vec<String> {
    let mut names = Vec::new();
    for i in 0..n {
        let name = format!("r{i}");
        let comps = json!({"c": {"a": configmap(&format!("cm-{i}"), json!({"k": "1"}))}});
        pkg.publish(ns.client, ns.name, &name, &release_package(&name, &comps))
            .await;
        create_rel(ns.client, &release(ns.name, &name, &name, ".", json!({}))).await;
        names.push(name);
    }
    names
}

pub struct TestNs<'a> {
    pub client: &'a kube::Client,
    pub name: &'a str,
}

async fn all_ready(ns: &TestNs<'_>, names: &[String]) {
    for name in names {
        wait_rel(ns.client, ns.name, name, "Ready", is_ready_rel).await;
    }
}

/// (reason, note) of every Event the operator recorded for `name`, a folded repeat
/// counted as often as it happened.
async fn recorded(ns: &TestNs<'_>, name: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for e in events(ns.client, ns.name, name).await {
        let times = e.series.as_ref().map_or(1, |s| s.count.max(1));
        for _ in 0..times {
            out.push((
                e.reason.clone().unwrap_or_default(),
                e.note.clone().unwrap_or_default(),
            ));
        }
    }
    out.sort();
    out
}

/// The received CloudEvents of each release (by `source`), in arrival order.
fn by_source(got: &[Received]) -> BTreeMap<String, Vec<Value>> {
    let mut out: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for r in got {
        let source = r.event["source"].as_str().unwrap_or_default().to_string();
        out.entry(source).or_default().push(r.event.clone());
    }
    out
}

/// The sequence number the operator gave an event when it queued it (`<process>-<n>`).
fn seq(event: &Value) -> u64 {
    let id = event["id"].as_str().expect("id");
    id.rsplit('-')
        .next()
        .unwrap()
        .parse()
        .expect("a sequence number")
}

fn reason_note(event: &Value) -> (String, String) {
    (
        event["data"]["reason"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        event["data"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
    )
}

/// Waits until the receiver holds, for each release, what its Events recorded.
async fn wait_delivered(ns: &TestNs<'_>, rx: &Receiver, names: &[String]) {
    let start = Instant::now();
    loop {
        let got = by_source(&rx.got());
        let mut missing = Vec::new();
        for name in names {
            let want = recorded(ns, name).await;
            let mut have: Vec<(String, String)> = got
                .get(&format!("Release/{}/{name}", ns.name))
                .map(|v| v.iter().map(reason_note).collect())
                .unwrap_or_default();
            have.sort();
            if want.is_empty() || have != want {
                missing.push(format!("{name}: recorded {want:?}, received {have:?}"));
            }
        }
        if missing.is_empty() {
            return;
        }
        if start.elapsed() > WAIT {
            panic!(
                "the receiver did not get every event:\n{}",
                missing.join("\n")
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_event_arrives_once_in_order_per_release_as_a_cloudevent() {
    let (env, tns) = namespace().await;
    let ns = TestNs {
        client: &tns.client,
        name: &tns.name,
    };
    let rx = Receiver::start(Mode::Up).await;
    let op = Operator::start(env, ns.name, |a| {
        a.events_webhook = Some(webhook(&rx.url()))
    })
    .await;
    let pkg = Package::start().await;
    let names = create_releases(&ns, &pkg, 3).await;
    all_ready(&ns, &names).await;
    wait_delivered(&ns, &rx, &names).await;

    let got = rx.got();
    let mut ids: Vec<&str> = got
        .iter()
        .map(|r| r.event["id"].as_str().unwrap())
        .collect();
    let n = ids.len();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), n, "every event once");
    for (source, evs) in by_source(&got) {
        let seqs: Vec<u64> = evs.iter().map(seq).collect();
        assert!(
            seqs.windows(2).all(|w| w[0] < w[1]),
            "{source}: received out of the order recorded: {seqs:?}"
        );
    }
    let api = kube::Api::<opm_core::api::Release>::namespaced(ns.client.clone(), ns.name);
    for r in &got {
        let e = &r.event;
        assert_eq!(e["specversion"], "1.0");
        let reason = e["data"]["reason"].as_str().unwrap();
        assert_eq!(e["type"], format!("dev.opmodel.release.{reason}"));
        let name = e["data"]["name"].as_str().unwrap();
        assert_eq!(e["source"], format!("Release/{}/{name}", ns.name));
        assert!(
            e["time"]
                .as_str()
                .unwrap()
                .parse::<jiff::Timestamp>()
                .is_ok()
        );
        let live = api.get(name).await.unwrap();
        assert_eq!(e["data"]["generation"], json!(live.metadata.generation));
        assert_eq!(e["data"]["uid"], json!(live.metadata.uid));
        assert_eq!(
            r.headers["content-type"],
            "application/cloudevents+json; charset=utf-8"
        );
        // The URL's credentials reach the receiver: user info as Basic auth, path, query.
        let basic = format!("Basic {}", base64_encode(b"hook-user:pw-Zq81"));
        assert_eq!(r.headers["authorization"], basic.as_str());
        assert_eq!(r.uri.path(), "/hooks/tok-Vb27/in");
        assert_eq!(r.uri.query(), Some("key=qk-Hs55"));
    }
    let stats = op.rt.webhook.as_ref().unwrap().stats();
    assert_eq!(stats.sent, n as u64);
    assert_eq!(
        (stats.retries, stats.dropped_queue_full, stats.queued),
        (0, 0, 0)
    );
    op.stop().await;
}

/// Standard base64 (for the expected Basic credentials; no crate for six lines).
fn base64_encode(input: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in input.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(A[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receiver_unavailable_for_a_while_loses_nothing() {
    let (env, tns) = namespace().await;
    let ns = TestNs {
        client: &tns.client,
        name: &tns.name,
    };
    let rx = Receiver::start(Mode::Unavailable).await;
    let op = Operator::start(env, ns.name, |a| {
        a.events_webhook = Some(webhook(&rx.url()));
        a.events_webhook_max_backoff = Duration::from_secs(5);
    })
    .await;
    let pkg = Package::start().await;
    let outage = Instant::now();
    let mut names = create_releases(&ns, &pkg, 2).await;
    all_ready(&ns, &names).await;
    // A minute of 503s, with a release created and converged in the middle of it.
    tokio::time::sleep(Duration::from_secs(30).saturating_sub(outage.elapsed())).await;
    let comps = json!({"c": {"a": configmap("cm-late", json!({"k": "1"}))}});
    pkg.publish(ns.client, ns.name, "late", &release_package("late", &comps))
        .await;
    create_rel(ns.client, &release(ns.name, "late", "late", ".", json!({}))).await;
    names.push("late".into());
    all_ready(&ns, &names).await;
    tokio::time::sleep(Duration::from_secs(60).saturating_sub(outage.elapsed())).await;
    let stats = op.rt.webhook.as_ref().unwrap().stats();
    // 0.5 + 1 + 2 + 4 s, then every 5 s: about 14 tries in the minute.
    assert!(stats.retries >= 10, "{stats:?}");
    assert_eq!(stats.sent, 0);
    assert!(stats.queued >= 6, "{stats:?}");
    assert!(rx.got().is_empty());
    rx.set(Mode::Up);
    wait_delivered(&ns, &rx, &names).await;
    let stats = op.rt.webhook.as_ref().unwrap().stats();
    assert_eq!(
        stats.dropped_queue_full + stats.dropped_rejected,
        0,
        "{stats:?}"
    );
    assert_eq!(stats.sent, rx.got().len() as u64, "each once");
    let text = op.rt.metrics.render();
    assert!(
        text.contains(&format!(
            "opm_controller_events_webhook_retries_total {}",
            stats.retries
        )),
        "{text}"
    );
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_queue_drops_the_oldest_and_counts_it() {
    let (env, tns) = namespace().await;
    let ns = TestNs {
        client: &tns.client,
        name: &tns.name,
    };
    let rx = Receiver::start(Mode::Unavailable).await;
    let op = Operator::start(env, ns.name, |a| {
        a.events_webhook = Some(webhook(&rx.url()));
        a.events_webhook_queue_size = 2;
        a.events_webhook_max_backoff = Duration::from_millis(200);
    })
    .await;
    let pkg = Package::start().await;
    let names = create_releases(&ns, &pkg, 3).await;
    all_ready(&ns, &names).await;
    // The last attempts' events are written while their status patch is in flight.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let mut total = 0;
    for name in &names {
        total += recorded(&ns, name).await.len();
    }
    assert!(total >= 6, "{total} events recorded");
    let webhook = op.rt.webhook.as_ref().unwrap();
    eventually("the queue holds the newest two", || async {
        webhook.stats().queued == 2
    })
    .await;
    rx.set(Mode::Up);
    eventually("the queue drained", || async {
        webhook.stats().queued == 0
    })
    .await;
    let got = rx.got();
    let stats = webhook.stats();
    assert_eq!(got.len(), 2, "only what the queue held: {stats:?}");
    assert_eq!(stats.dropped_queue_full as usize, total - 2, "{stats:?}");
    // The newest survived, in order (the other one is the newest but one, unless an older
    // event was being sent at the moment it came: the one in flight is never dropped).
    let seqs: Vec<u64> = got.iter().map(|r| seq(&r.event)).collect();
    assert!(seqs[0] < seqs[1], "{seqs:?}");
    assert_eq!(
        seqs[1],
        total as u64 - 1,
        "the newest event arrived: {seqs:?}"
    );
    let text = op.rt.metrics.render();
    assert!(
        text.contains(&format!(
            "opm_controller_events_webhook_dropped_total{{reason=\"queue_full\"}} {}",
            total - 2
        )),
        "{text}"
    );
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_the_receiver_refuses_are_dropped_and_counted_not_retried() {
    let (env, tns) = namespace().await;
    let ns = TestNs {
        client: &tns.client,
        name: &tns.name,
    };
    let rx = Receiver::start(Mode::Refuse).await;
    let op = Operator::start(env, ns.name, |a| {
        a.events_webhook = Some(webhook(&rx.url()))
    })
    .await;
    let pkg = Package::start().await;
    let names = create_releases(&ns, &pkg, 2).await;
    all_ready(&ns, &names).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let mut total = 0;
    for name in &names {
        total += recorded(&ns, name).await.len() as u64;
    }
    assert!(total >= 4, "{total}");
    let webhook = op.rt.webhook.as_ref().unwrap();
    eventually("every event refused", || async {
        webhook.stats().dropped_rejected == total
    })
    .await;
    let stats = webhook.stats();
    assert_eq!(
        (stats.sent, stats.retries, stats.queued),
        (0, 0, 0),
        "{stats:?}"
    );
    let text = op.rt.metrics.render();
    assert!(
        text.contains(&format!(
            "opm_controller_events_webhook_dropped_total{{reason=\"rejected\"}} {total}"
        )),
        "{text}"
    );
    // The receiver comes back: the next events go through at once.
    rx.set(Mode::Up);
    let comps = json!({"c": {"a": configmap("cm-after", json!({"k": "1"}))}});
    pkg.publish(
        ns.client,
        ns.name,
        "after",
        &release_package("after", &comps),
    )
    .await;
    create_rel(
        ns.client,
        &release(ns.name, "after", "after", ".", json!({})),
    )
    .await;
    all_ready(&ns, &["after".to_string()]).await;
    wait_delivered(&ns, &rx, &["after".to_string()]).await;
    op.stop().await;
}

/// A `cue` error quoting a Secret's value: the CloudEvent carries the Event's redacted
/// note, and the real binary, logging at debug while the receiver refuses connections and
/// then takes them, never writes the URL's credentials.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_payload_is_redacted_and_the_url_never_logged() {
    const SECRET: &str = "hunter4-Wq2Xz";
    let (env, tns) = namespace().await;
    let ns = TestNs {
        client: &tns.client,
        name: &tns.name,
    };
    let pkg = Package::start().await;
    let release_cue = format!(
        "package release\n\nkind: \"ModuleRelease\"\nmetadata: {{name: \"leak\", namespace: \"default\"}}\n\
         components: db: s: {{\n\tapiVersion: \"v1\", kind: \"Secret\", metadata: name: \"db\"\n\
         \tstringData: password: \"{SECRET}\" & =~\"^[0-9]+$\"\n}}\n"
    );
    let files = vec![
        (
            "cue.mod/module.cue",
            "module: \"example.com/test@v0\"\nlanguage: version: \"v0.17.0\"\n".to_string(),
        ),
        ("release.cue", release_cue),
    ];
    pkg.publish(ns.client, ns.name, "leak", &files).await;
    // A receiver that is not there yet: its port is taken once the failures are logged.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = port.local_addr().unwrap();
    drop(port);
    let url = format!("http://hook-user:pw-Zq81@{addr}/hooks/tok-Vb27/in?key=qk-Hs55");
    let dir = tempfile::tempdir().unwrap();
    let log_path = dir.path().join("operator.log");
    let log = std::fs::File::create(&log_path).unwrap();
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_opm-operator"))
        .args(["run", "--log-format", "json", "--watch-label-selector"])
        .arg(format!("{TEST_LABEL}={}", ns.name))
        .arg("--cue-binary")
        .arg(opm_testenv::tools::cue_bin().unwrap())
        .arg("--cache-dir")
        .arg(dir.path().join("cache"))
        .args(["--events-webhook-max-backoff", "300ms"])
        .env("OPM_EVENTS_WEBHOOK", &url)
        .env("KUBECONFIG", env.kubeconfig_path())
        .env("RUST_LOG", "debug")
        .stdout(Stdio::null())
        .stderr(log)
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    create_rel(ns.client, &release(ns.name, "leak", "leak", ".", json!({}))).await;
    wait_rel(
        ns.client,
        ns.name,
        "leak",
        "RenderFailed",
        reason_is_rel("RenderFailed"),
    )
    .await;
    let evs = events_with(ns.client, ns.name, "leak", &["RenderFailed"]).await;
    let note = evs
        .iter()
        .find(|e| e.reason.as_deref() == Some("RenderFailed"))
        .and_then(|e| e.note.clone())
        .unwrap();
    assert!(note.contains("<redacted>"), "{note}");
    tokio::time::sleep(Duration::from_secs(1)).await;
    // Now the receiver comes up on that port.
    let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
    let got = Arc::new(Mutex::new(Vec::<Value>::new()));
    let g = got.clone();
    let app = axum::Router::new().fallback(move |body: Bytes| {
        let g = g.clone();
        async move {
            g.lock()
                .unwrap()
                .push(serde_json::from_slice(&body).unwrap());
            StatusCode::OK
        }
    });
    let server = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    eventually("the RenderFailed CloudEvent", || async {
        got.lock()
            .unwrap()
            .iter()
            .any(|e| e["data"]["reason"] == "RenderFailed")
    })
    .await;
    std::process::Command::new("kill")
        .args(["-TERM", &child.id().unwrap().to_string()])
        .status()
        .unwrap();
    let _ = tokio::time::timeout(Duration::from_secs(30), child.wait()).await;
    server.abort();
    let payloads = serde_json::to_string(&*got.lock().unwrap()).unwrap();
    let failed = got
        .lock()
        .unwrap()
        .iter()
        .find(|e| e["data"]["reason"] == "RenderFailed")
        .cloned()
        .unwrap();
    assert_eq!(
        failed["data"]["message"],
        note.as_str(),
        "the Event's own text"
    );
    assert!(
        !payloads.contains(SECRET),
        "the secret value in a CloudEvent"
    );
    let logs = std::fs::read_to_string(&log_path).unwrap();
    assert!(
        logs.contains("events webhook on"),
        "the webhook was started"
    );
    assert!(
        logs.contains("the receiver is not taking events"),
        "its failures were logged"
    );
    assert!(
        logs.contains(&format!("http://{addr}/…")),
        "the receiver is named"
    );
    for credential in ["hook-user", "pw-Zq81", "tok-Vb27", "qk-Hs55", SECRET] {
        assert!(
            !logs.contains(credential),
            "{credential} appears in the logs"
        );
    }
}

/// The converge time of `N` Releases with the receiver up, refusing connections and
/// hanging (each POST waits out the 10 s request timeout): after a warm-up converge,
/// `ROUNDS` rounds of the three, interleaved so load on the machine hits each alike;
/// printed, and each mode's median held to the median with the receiver up.
/// `cargo test -p opm-operator --test operator converge -- --nocapture` shows the numbers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_down_or_hanging_receiver_does_not_slow_a_converge() {
    const N: usize = 20;
    const ROUNDS: usize = 3;
    let up = Receiver::start(Mode::Up).await;
    let hanging = Receiver::start(Mode::Hang).await;
    let modes = [
        ("up", up.url()),
        ("down (connection refused)", closed_port()),
        ("hanging", hanging.url()),
    ];
    let mut times: BTreeMap<&str, Vec<Duration>> = BTreeMap::new();
    for round in 0..=ROUNDS {
        for (what, url) in &modes {
            if round == 0 && *what != "up" {
                continue;
            }
            let (env, tns) = namespace().await;
            let ns = TestNs {
                client: &tns.client,
                name: &tns.name,
            };
            let pkg = Package::start().await;
            let op = Operator::start(env, ns.name, |a| a.events_webhook = Some(webhook(url))).await;
            let start = Instant::now();
            let names = create_releases(&ns, &pkg, N).await;
            all_ready(&ns, &names).await;
            let took = start.elapsed();
            let stats = op.rt.webhook.as_ref().unwrap().stats();
            let label = if round == 0 { "warm-up" } else { "round" };
            println!(
                "{label} {round}: converge of {N} Releases, receiver {what}: {took:.2?} \
                 (webhook: sent {}, retries {}, queued {})",
                stats.sent, stats.retries, stats.queued
            );
            if *what != "up" {
                assert_eq!(stats.sent, 0, "{what}: nothing can have been taken");
                assert!(
                    stats.queued >= N as u64,
                    "{what}: events are waiting: {stats:?}"
                );
            }
            if round > 0 {
                times.entry(what).or_default().push(took);
            }
            op.stop().await;
        }
    }
    let median = |v: &Vec<Duration>| {
        let mut v = v.clone();
        v.sort();
        v[v.len() / 2]
    };
    let up_time = median(&times["up"]);
    for (what, ts) in &times {
        println!(
            "median converge of {N} Releases, receiver {what}: {:.2?}",
            median(ts)
        );
        assert!(
            median(ts) < up_time * 2 + Duration::from_secs(5),
            "receiver {what}: {ts:?} against {up_time:?} with it up"
        );
    }
}
