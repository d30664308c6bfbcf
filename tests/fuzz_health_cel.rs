//! Fuzzes `healthCheckExprs` (SPEC §24, §26): generated CEL expressions (macros nested in
//! macros, string and list building, regular expressions hostile and not, conversions,
//! indexing, type errors) over generated ConfigMap-shaped objects, from tiny to near the
//! API server's 1 MiB (lists of thousands, strings of 64 KiB). For every evaluation: no
//! panic; a verdict, or a stop whose reported steps and bytes are at the budget; the
//! memory it really allocated (a counting global allocator) within a few times the 8 MiB
//! budget; and its time within a bound. Prints the largest peak allocation and the
//! longest time seen.
//!
//! `OPM_FUZZ_CASES` sets the count (default 2 000; `make fuzz` runs 100 000),
//! `OPM_FUZZ_SEED` the seed.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use opm_core::api::HealthCheckExpr;
use opm_core::health::{self, CEL_MAX_BYTES, CEL_MAX_STEPS, HealthStatus};
use serde_json::{Map, Value, json};

/// Counts live bytes and their peak, process-wide (this binary runs one test).
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

/// Real allocation allowed above the object itself: "a few times the cap" (SPEC §24).
const PEAK_CAP: usize = 3 * CEL_MAX_BYTES as usize;
/// One evaluation's time bound in this (debug) build: a million steps take well under it.
const TIME_CAP: Duration = Duration::from_secs(5);
/// What the CRD lets a tenant write (SPEC §24).
const MAX_EXPR_BYTES: usize = 1024;

/// splitmix64.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    fn pick<'a>(&mut self, xs: &[&'a str]) -> &'a str {
        xs[self.below(xs.len())]
    }
    /// Mostly small, sometimes up to `max`.
    fn size(&mut self, max: usize) -> usize {
        match self.below(10) {
            0..6 => self.below(8),
            6..9 => self.below(max / 16 + 1),
            _ => self.below(max + 1),
        }
    }
}

const FIELDS: &[&str] = &[
    "data",
    "status",
    "spec",
    "metadata",
    "self",
    "items",
    "big",
    "phase",
    "conditions",
    "k00001",
    "name",
    "missing",
];
const PATTERNS: &[&str] = &[
    "'^[a-z]+$'",
    "'(a+)+$'",
    "'.*.*.*.*x'",
    "'^(k0*1|[a-z]{1,40}[0-9]{1,40}){1,30}$'",
    "'['",
    "'\\\\d{1,1000}'",
    "'x'",
];
const BINARY: &[&str] = &[
    "+", "+", "+", "-", "*", "/", "%", "==", "!=", "<", "<=", ">", ">=", "&&", "||", "in",
];

/// A CEL expression of at most `depth` levels over `vars`.
fn expr(r: &mut Rng, depth: u32, vars: &mut Vec<String>) -> String {
    if depth == 0 || r.below(5) == 0 {
        return leaf(r, vars);
    }
    let d = depth - 1;
    match r.below(14) {
        0 => format!("!{}", expr(r, d, vars)),
        1 => format!("-{}", expr(r, d, vars)),
        2 => {
            let f = r.pick(&["size", "int", "string", "double", "uint", "bool", "dyn"]);
            format!("{f}({})", expr(r, d, vars))
        }
        3 => {
            let m = r.pick(&["size()", "lowerAscii()", "upperAscii()"]);
            format!("{}.{m}", expr(r, d, vars))
        }
        4..7 => {
            let op = r.pick(BINARY);
            format!("({} {op} {})", expr(r, d, vars), expr(r, d, vars))
        }
        7 => format!(
            "({} ? {} : {})",
            expr(r, d, vars),
            expr(r, d, vars),
            expr(r, d, vars)
        ),
        8 => format!("{}[{}]", expr(r, d, vars), expr(r, d, vars)),
        9 => {
            let m = r.pick(&["contains", "startsWith", "endsWith"]);
            format!("{}.{m}({})", expr(r, d, vars), expr(r, d, vars))
        }
        10 => {
            let p = if r.below(3) == 0 {
                expr(r, d, vars)
            } else {
                r.pick(PATTERNS).to_string()
            };
            format!("{}.matches({p})", expr(r, d, vars))
        }
        11 => format!("[{}, {}]", expr(r, d, vars), expr(r, d, vars)),
        12 => format!("{{'a': {}, 'b': {}}}", expr(r, d, vars), expr(r, d, vars)),
        _ => {
            let range = expr(r, d, vars);
            let v = format!("v{}", vars.len());
            vars.push(v.clone());
            let body = expr(r, d, vars);
            let out = match r.below(6) {
                0 => format!("{range}.all({v}, {body})"),
                1 => format!("{range}.exists({v}, {body})"),
                2 => format!("{range}.exists_one({v}, {body})"),
                3 => format!("{range}.filter({v}, {body})"),
                4 => format!("{range}.map({v}, {v}, {body})"),
                _ => format!("{range}.map({v}, {body})"),
            };
            vars.pop();
            out
        }
    }
}

/// A well-typed expression that walks and builds: macros over the object's lists and maps
/// (nested up to `depth`), bodies that concatenate strings, build lists, compare big
/// values or match patterns. Where the budget matters.
fn costly(r: &mut Rng, depth: u32, vars: &mut Vec<String>) -> String {
    let range = match r.below(7) {
        0 | 1 => "data".to_string(),
        2 => "status.items".to_string(),
        3 => "status.conditions".to_string(),
        4 => "[spec.big, spec.big]".to_string(),
        5 => "data.map(k, data[k])".to_string(),
        _ => "spec.a.b".to_string(),
    };
    let v = format!("v{}", vars.len());
    vars.push(v.clone());
    let s = match r.below(4) {
        0 => "spec.big".to_string(),
        1 => format!("string({v})"),
        2 => format!("({v} in data ? data[{v}] : string({v}))"),
        _ => r.pick(&["data.k00001", "status.phase"]).to_string(),
    };
    let inner = if depth > 0 && r.below(2) == 0 {
        Some(costly(r, depth - 1, vars))
    } else {
        None
    };
    let cond = match (&inner, r.below(6)) {
        (Some(i), _) => format!("size({i}) >= 0"),
        (None, 0) => format!("size({s} + {s}) > 0"),
        (None, 1) => format!("{s}.matches({})", r.pick(PATTERNS)),
        (None, 2) => "self == self".to_string(),
        (None, 3) => format!("{s}.contains({s})"),
        (None, 4) => format!("{v} == {v}"),
        (None, _) => format!("[{v}, {v}] + [{v}] == [{v}, {v}, {v}]"),
    };
    let value = match (&inner, r.below(3)) {
        (Some(i), _) => i.clone(),
        (None, 0) => format!("{s} + {s}"),
        (None, 1) => format!("[{v}, {s}, {v}]"),
        (None, _) => format!("{s}.lowerAscii()"),
    };
    let out = match r.below(6) {
        0 => format!("{range}.all({v}, {cond})"),
        1 => format!("{range}.exists({v}, !({cond}))"),
        2 => format!("{range}.exists_one({v}, {cond})"),
        3 => format!("{range}.filter({v}, {cond})"),
        _ => format!("{range}.map({v}, {value})"),
    };
    vars.pop();
    if out.contains(".map(") || out.contains(".filter(") {
        format!("size({out}) >= 0")
    } else {
        out
    }
}

fn leaf(r: &mut Rng, vars: &[String]) -> String {
    match r.below(8) {
        0 => r
            .pick(&["0", "1", "-7", "3u", "2.5", "true", "false", "null"])
            .into(),
        1 => r
            .pick(&["'x'", "'Running'", "''", "'k00001'", "b'ab'"])
            .into(),
        2 if !vars.is_empty() => vars[r.below(vars.len())].clone(),
        3 => format!(
            "has({}.{})",
            r.pick(&["self", "data", "status"]),
            r.pick(FIELDS)
        ),
        _ => {
            let mut s = r.pick(&["self", "data", "status", "spec"]).to_string();
            for _ in 0..r.below(3) {
                s.push('.');
                s.push_str(r.pick(FIELDS));
            }
            s
        }
    }
}

fn string(r: &mut Rng, max: usize) -> Value {
    let n = r.size(max);
    json!(r.pick(&["x", "ab", "k0", "Running"]).repeat(n / 2 + 1))
}

/// A ConfigMap-shaped object: `data` of up to thousands of keys, lists and long strings.
fn object(r: &mut Rng) -> Value {
    let keys = r.size(3_000);
    let value_max = if keys > 100 { 64 } else { 64 * 1024 };
    let data: Map<String, Value> = (0..keys)
        .map(|i| (format!("k{i:05}"), string(r, value_max)))
        .collect();
    let items: Vec<Value> = (0..r.size(2_000))
        .map(|i| match r.below(3) {
            0 => json!(i),
            1 => string(r, 32),
            _ => json!({"type": "Ready", "status": if i % 2 == 0 { "True" } else { "False" }}),
        })
        .collect();
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "fuzz", "namespace": "tenant"},
        "data": data,
        "status": {"phase": "Running", "items": items, "conditions": [
            {"type": "Ready", "status": "True"}]},
        "spec": {"big": string(r, 64 * 1024), "a": {"b": [1, 2, 3]}, "items": [1, "x", null]}})
}

/// `N steps / M bytes` of a stop message.
fn spent(msg: &str) -> Option<(u64, u64)> {
    let rest = msg.strip_prefix("health expression of ConfigMap stopped after ")?;
    let (steps, rest) = rest.split_once(" steps / ")?;
    let (bytes, _) = rest.split_once(" bytes")?;
    Some((steps.parse().ok()?, bytes.parse().ok()?))
}

#[test]
#[allow(clippy::disallowed_methods)] // a test's own stopwatch, not the core's clock
fn generated_expressions_stay_within_the_step_byte_and_time_bounds() {
    let cases: u64 = std::env::var("OPM_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2_000);
    let seed: u64 = std::env::var("OPM_FUZZ_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_261_204);
    let mut r = Rng(seed);
    let started = Instant::now();
    let (mut max_peak, mut max_time) = ((0usize, String::new()), (Duration::ZERO, String::new()));
    let mut counts = std::collections::BTreeMap::<&str, u64>::new();
    let mut obj = object(&mut r);
    for case in 0..cases {
        // A new object every 20 expressions: big ones are costly to build.
        if case % 20 == 0 {
            obj = object(&mut r);
        }
        let src = if r.below(2) == 0 {
            costly(&mut r, 2, &mut Vec::new())
        } else {
            expr(&mut r, 4, &mut Vec::new())
        };
        if std::env::var_os("OPM_FUZZ_TRACE").is_some() {
            eprintln!("case {case}: {src}");
        }
        if src.len() > MAX_EXPR_BYTES {
            *counts.entry("longer than the CRD allows").or_default() += 1;
            continue;
        }
        let rules = match health::compile(&[HealthCheckExpr {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            current: src.clone(),
            in_progress: None,
            failed: None,
        }]) {
            Ok(rules) => rules,
            Err(e) => {
                if std::env::var_os("OPM_FUZZ_VERBOSE").is_some() {
                    eprintln!("refused: {e}\n  {src}");
                }
                *counts.entry("refused when compiled").or_default() += 1;
                continue;
            }
        };
        let base = LIVE.load(Ordering::Relaxed);
        PEAK.store(base, Ordering::Relaxed);
        let t = Instant::now();
        let a = health::assess(&obj, &rules);
        let took = t.elapsed();
        let peak = PEAK.load(Ordering::Relaxed).saturating_sub(base);
        let what = match (a.status, spent(&a.message)) {
            (HealthStatus::Failed, Some((steps, bytes))) => {
                // Stopped at the bound: over it by no more than one charge.
                assert!(
                    steps > CEL_MAX_STEPS || bytes > CEL_MAX_BYTES,
                    "case {case}: stopped under both bounds: {}\n{src}",
                    a.message
                );
                assert!(
                    steps <= 2 * CEL_MAX_STEPS && bytes <= 2 * CEL_MAX_BYTES,
                    "case {case}: ran far past the bounds: {}\n{src}",
                    a.message
                );
                "stopped at the budget"
            }
            (HealthStatus::Current, _) => "true",
            (HealthStatus::InProgress, _) if a.message.contains("(current: ") => "an error",
            (HealthStatus::InProgress, _) => "false",
            (s, _) => panic!("case {case}: unexpected {s:?}: {}\n{src}", a.message),
        };
        *counts.entry(what).or_default() += 1;
        assert!(
            peak <= PEAK_CAP,
            "case {case}: allocated {peak} bytes at peak: {src}"
        );
        assert!(took <= TIME_CAP, "case {case}: took {took:?}: {src}");
        if peak > max_peak.0 {
            max_peak = (peak, src.clone());
        }
        if took > max_time.0 {
            max_time = (took, src);
        }
    }
    eprintln!(
        "{cases} cases in {:.1}s: {counts:?}\nlargest peak allocation {} KiB: {}\nlongest \
         evaluation {:?}: {}",
        started.elapsed().as_secs_f64(),
        max_peak.0 / 1024,
        max_peak.1,
        max_time.0,
        max_time.1
    );
}
