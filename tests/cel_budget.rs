//! Issue 31 items 1 and 2, SPEC §24: one `healthCheckExprs` evaluation is bounded in steps
//! and bytes *while it runs*. Each attack below took gigabytes or minutes with the `cel`
//! crate's interpreter behind a static cost estimate; here each ends in well under a second
//! with the object `Failed` "health expression of ConfigMap stopped after N steps / M
//! bytes", or, where the work is honest and linear, with a verdict.
//!
//! The whole process's allocations are counted (a global allocator), so a test also fails
//! when an evaluation allocates far past the 8 MiB budget without the evaluator noticing.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use opm_core::api::HealthCheckExpr;
use opm_core::health::{self, Assessment, HealthStatus};
use serde_json::{Value, json};

/// Counts live bytes and their peak, process-wide.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(l) };
        if !p.is_null() {
            let now = LIVE.fetch_add(l.size(), Ordering::Relaxed) + l.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        unsafe { System.dealloc(p, l) };
        LIVE.fetch_sub(l.size(), Ordering::Relaxed);
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// The tests measure peaks: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

/// A ConfigMap of `keys` entries of `value_bytes` each, plus `big` (`big_bytes`).
fn configmap(keys: usize, value_bytes: usize, big_bytes: usize) -> Value {
    let mut data = serde_json::Map::new();
    for i in 0..keys {
        data.insert(format!("k{i:05}"), json!("v".repeat(value_bytes)));
    }
    data.insert("big".into(), json!("x".repeat(big_bytes)));
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "victim", "namespace": "tenant-a"}, "data": data})
}

/// Judges `obj` by `current`; returns the verdict, the time and the peak bytes above the
/// baseline the evaluation reached.
#[allow(clippy::disallowed_methods)] // a test's own stopwatch, not the core's clock
fn judge(current: &str, obj: &Value) -> (Assessment, Duration, usize) {
    let rules = health::compile(&[HealthCheckExpr {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        current: current.into(),
        in_progress: None,
        failed: None,
    }])
    .expect("compiles");
    let base = LIVE.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let t = Instant::now();
    let a = health::assess(obj, &rules);
    let took = t.elapsed();
    let peak = PEAK.load(Ordering::Relaxed).saturating_sub(base);
    eprintln!(
        "{current}\n  -> {:?} in {took:?}, peak {} KiB: {}",
        a.status,
        peak / 1024,
        a.message
    );
    (a, took, peak)
}

/// Generous for a debug build on a shared machine; the attacks took minutes before.
const FAST: Duration = Duration::from_secs(5);
/// The 8 MiB budget, the object's own size aside, and room for the allocator's slack.
const PEAK_CAP: usize = 24 * 1024 * 1024;

fn assert_stopped(current: &str, obj: &Value) -> Assessment {
    let (a, took, peak) = judge(current, obj);
    assert_eq!(a.status, HealthStatus::Failed, "{current}: {}", a.message);
    assert!(
        a.message
            .starts_with("health expression of ConfigMap stopped after "),
        "{current}: {}",
        a.message
    );
    assert!(took < FAST, "{current} took {took:?}");
    assert!(peak < PEAK_CAP, "{current} peaked at {peak} bytes");
    a
}

/// Item 1: strings doubled inside three nested `map`s over the tenant's 46 keys.
#[test]
fn nested_maps_building_strings_stop_at_the_byte_budget() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let cm = configmap(45, 16, 32 * 1024);
    let a = assert_stopped(
        "size(data.map(a, data.map(b, data.map(c, data.big + data.big)))) > 0",
        &cm,
    );
    // The numbers are in the message, and the limits.
    assert!(a.message.contains(" bytes (current: "), "{}", a.message);
    assert!(a.message.contains("8388608 bytes"), "{}", a.message);
    // Lists alone, no strings: the slots `map` builds are bytes too.
    assert_stopped(
        "size(data.map(a, data.map(b, data.map(c, [a, b, c, a, b, c])))) > 0",
        &cm,
    );
    // Concatenation that doubles: stopped long before it is large.
    assert_stopped(
        "size([data.big].map(a, a + a).map(a, a + a).map(a, a + a).map(a, a + a)\
         .map(a, a + a).map(a, a + a).map(a, a + a).map(a, a + a)) > 0",
        &cm,
    );
}

/// Item 2: a regular expression per key, compiled from the object's own values.
#[test]
fn a_regex_per_key_stops_at_the_budget_and_literal_patterns_compile_once() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut data = serde_json::Map::new();
    for i in 0..2_000 {
        data.insert(
            format!("k{i:05}"),
            json!(format!("^(k0*{i}|[a-z]{{1,40}}[0-9]{{1,40}}){{1,30}}$")),
        );
    }
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "victim"}, "data": data});
    assert_stopped("data.all(k, k.matches(data[k]))", &cm);
    // One literal pattern over every value: compiled once with the expression, each match
    // counted by the bytes it scans, and the verdict comes.
    let (a, took, _) = judge(
        "data.all(k, data[k].matches('^[\\\\^$(){}|,a-z0-9*\\\\[\\\\]-]+$'))",
        &cm,
    );
    assert_eq!(a.status, HealthStatus::Current, "{}", a.message);
    assert!(took < FAST, "{took:?}");
}

/// Item 2: comparing a big map with itself is counted element by element.
#[test]
fn equality_of_big_maps_is_counted_per_element() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let cm = configmap(20_000, 8, 8);
    // Once: linear, within the budget, judged.
    let (a, took, _) = judge("self == self", &cm);
    assert_eq!(a.status, HealthStatus::Current, "{}", a.message);
    assert!(took < FAST, "{took:?}");
    // Once per key: 20 000 × 20 000 comparisons, stopped.
    assert_stopped("data.all(k, self == self)", &cm);
    // Nested loops over the keys, the old static estimate's case.
    assert_stopped("data.all(k, data.all(j, size(k + j) > 0))", &cm);
}

/// SPEC §24: a CEL error never quotes a value of the object.
#[test]
fn an_error_names_the_expression_and_kind_never_a_value() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let secret = "s3cr3t-t0ken-of-another-tenant";
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "victim"},
        "data": {"token": secret, "n": "42"},
        "spec": {"env": [{"name": "TOKEN", "value": secret}]}});
    for expr in [
        "data.token - 1 > 0",
        "spec.env[0].value - 1 > 0",
        "int(data.token) > 0",
        "data[data.token] == 'x'",
        "spec.env[0].value",
        "data.token.matches(data.token + '(')",
        "spec.env[1].value == 'x'",
        "spec.env[0].value.missing == 'x'",
        "{data.token: 1, data.token: 2}.size() > 0",
    ] {
        let (a, _, _) = judge(expr, &cm);
        assert_ne!(a.status, HealthStatus::Current, "{expr}");
        assert!(!a.message.contains(secret), "{expr}: {}", a.message);
        assert!(!a.message.contains("s3cr3t"), "{expr}: {}", a.message);
    }
}

/// Ordinary health rules are unaffected: a verdict, no budget in sight.
#[test]
fn ordinary_rules_still_judge() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let obj = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "w"},
        "status": {"phase": "Running", "replicas": 3, "ready": 3,
          "conditions": [{"type": "Ready", "status": "True"}, {"type": "Synced", "status": "True"}]}});
    for expr in [
        "status.phase == 'Running'",
        "status.conditions.exists(c, c.type == 'Ready' && c.status == 'True')",
        "status.conditions.all(c, c.status == 'True')",
        "status.ready >= status.replicas",
        "has(status.phase) && !has(status.failure)",
        "status.conditions.filter(c, c.status == 'True').size() == 2",
        "status.conditions.map(c, c.type).exists_one(t, t == 'Synced')",
        "'Ready' in status.conditions.map(c, c.type)",
        "status.phase.startsWith('Run') && status.phase.matches('^R[a-z]+$')",
        "double(status.ready) / double(status.replicas) == 1.0",
        "status.ready == 3u && status.ready == 3.0",
        "size(status.phase) == 7 && status.phase.lowerAscii() == 'running'",
        "{'a': 1}.a == 1 && [1, 2] + [3] == [1, 2, 3]",
        "string(status.ready) + '/' + string(status.replicas) == '3/3'",
        "status.replicas > 0 ? status.ready * 100 / status.replicas == 100 : false",
        "false || status.missing == 1 || true",
    ] {
        let (a, _, _) = judge(expr, &obj);
        assert_eq!(a.status, HealthStatus::Current, "{expr}: {}", a.message);
    }
}
