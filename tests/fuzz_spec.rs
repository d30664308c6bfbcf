//! Fuzzes whole reconcile attempts from generated spec values (issue 13 item 3: one field
//! must never take the operator down). Each case is a `ModuleRelease` or `Release` whose spec
//! is mostly CRD-valid — durations at the edges up to 24h and in odd spellings, DNS names
//! up to their length limits, values with U+FEFF, RTL marks, NUL, noncharacters and deep
//! nesting, odd annotations and a stored status with extreme counters — and one time in
//! eight anything at all (over-long durations, garbage, names the CRD refuses: an object
//! stored before the CRD said so). The machine is driven through the attempt, each effect
//! answered with a generated result (errors with odd messages included).
//!
//! For every case: no panic, a `Done` within a bounded number of steps, every batch well
//! shaped, every requeue at most 24h, every status patch serialisable, and the trace replays.
//!
//! `OPM_FUZZ_CASES` sets the count (default 2 000; `make fuzz` runs 100 000),
//! `OPM_FUZZ_SEED` the seed.

use std::time::{Duration, Instant};

use jiff::Timestamp;
use opm_core::backoff::MAX_REQUEUE;
use opm_core::effect::Effect;
use opm_core::input::*;
use opm_core::machine::batch_shape_ok;
use opm_core::trace::{Recorder, TraceHeader, replay};
use opm_core::{Attempt, Config, Input, InputKind, ReleaseObject};
use serde_json::{Map, Value, json};

/// splitmix64: a dependency-free, seeded source of choices.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn one_in(&mut self, n: u64) -> bool {
        self.below(n) == 0
    }
    fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len() as u64) as usize]
    }
}

/// Characters that break naive string handling: BOM, bidi controls, NUL, noncharacters,
/// combining marks, astral plane, the last scalar value.
const ODD: [&str; 14] = [
    "\u{feff}",
    "\u{200f}",
    "\u{202e}",
    "\u{0}",
    "\u{ffff}",
    "\u{fffe}",
    "\u{10ffff}",
    "e\u{301}",
    "😀",
    "\u{2028}",
    "\t",
    "\"",
    "\\",
    "ü",
];

fn odd_string(r: &mut Rng, max: u64) -> String {
    let mut s = String::new();
    for _ in 0..r.below(max + 1) {
        match r.below(4) {
            0 => s.push_str(r.pick::<&str>(&ODD)),
            1 => s.push(char::from(b'a' + r.below(26) as u8)),
            2 => s.push_str(r.pick::<&str>(&["-", ".", "/", "..", "@", ":", " "])),
            _ => s.push(char::from(b'0' + r.below(10) as u8)),
        }
    }
    s
}

/// A DNS-1123 label of 1..=max characters.
fn dns_label(r: &mut Rng, max: u64) -> String {
    let len = 1 + r.below(max);
    let alnum = |r: &mut Rng| {
        let c = r.below(36) as u8;
        char::from(if c < 26 { b'a' + c } else { b'0' + c - 26 })
    };
    (0..len)
        .map(|i| {
            if i > 0 && i + 1 < len && r.one_in(5) {
                '-'
            } else {
                alnum(r)
            }
        })
        .collect()
}

/// A DNS-1123 subdomain, sometimes at its 253-character limit.
fn dns_name(r: &mut Rng) -> String {
    if r.one_in(16) {
        let long = [63, 63, 63, 61].map(|n| "a".repeat(n)).join(".");
        return long;
    }
    let parts = 1 + r.below(3);
    (0..parts)
        .map(|_| dns_label(r, 20))
        .collect::<Vec<_>>()
        .join(".")
}

/// A name: mostly valid, one in eight anything.
fn name(r: &mut Rng) -> String {
    if r.one_in(8) {
        odd_string(r, 40)
    } else {
        dns_name(r)
    }
}

/// A duration the CRD accepts (Go syntax, at most 24h) in edge and odd spellings.
fn crd_duration(r: &mut Rng) -> String {
    const EDGES: [&str; 22] = [
        "24h",
        "0",
        "0s",
        "1ns",
        "9s",
        "10s",
        "10.000000001s",
        "86400s",
        "1440m",
        "23h59m59.999s",
        "23h59m59.999999999s",
        "86399999999999ns",
        "86400000000000ns",
        "1h0m0s",
        "0.5h",
        "1.000000000000000000001s",
        "00000000000000000000024h",
        "1µs",
        "1us",
        "5m",
        "1h30m",
        "0.000000000001h",
    ];
    if r.one_in(2) {
        return (*r.pick(&EDGES)).to_string();
    }
    // A composition of up to 5 components whose total stays within 24h.
    let mut left = 86_400_000u64; // ms
    let mut out = String::new();
    for _ in 0..1 + r.below(5) {
        let (unit, ms) = *r.pick(&[("h", 3_600_000u64), ("m", 60_000), ("s", 1000), ("ms", 1)]);
        let n = r.below(left / ms + 1);
        left -= n * ms;
        out.push_str(&format!("{n}{unit}"));
    }
    out
}

/// A duration: CRD-valid mostly; one in eight what an older CRD let through or garbage.
fn duration(r: &mut Rng) -> Value {
    if r.one_in(8) {
        let bad = [
            "5124095576030431h".to_string(),
            "99999999999999999999999h".to_string(),
            format!("{}h", u64::MAX),
            "25h".into(),
            "-5s".into(),
            "".into(),
            "1.s".into(),
            "5".into(),
            odd_string(r, 12),
            "2562047h47m16.854775807s".into(),
            format!("{}ns", u128::MAX),
        ];
        json!(r.pick(&bad))
    } else {
        json!(crd_duration(r))
    }
}

/// A JSON value with odd strings and keys, up to `depth` levels deep.
fn value(r: &mut Rng, depth: u32) -> Value {
    if depth == 0 {
        return json!(odd_string(r, 8));
    }
    match r.below(7) {
        0 => Value::Null,
        1 => json!(r.one_in(2)),
        2 => json!(*r.pick(&[i64::MIN, -1, 0, 1, i64::MAX])),
        3 => json!(*r.pick(&[0.5, -0.0, 1e308, f64::MIN_POSITIVE])),
        4 => json!(odd_string(r, 24)),
        5 => Value::Array((0..r.below(4)).map(|_| value(r, depth - 1)).collect()),
        _ => {
            let mut m = Map::new();
            for _ in 0..r.below(4) {
                m.insert(odd_string(r, 6), value(r, depth - 1));
            }
            Value::Object(m)
        }
    }
}

/// Deep nesting: a chain of `n` single-key objects.
fn deep(n: u32) -> Value {
    (0..n).fold(json!("\u{feff}bottom"), |v, _| json!({ "n": v }))
}

fn spec_common(r: &mut Rng) -> Map<String, Value> {
    let mut m = Map::new();
    if !r.one_in(3) {
        m.insert("interval".into(), duration(r));
    }
    if !r.one_in(3) {
        m.insert("timeout".into(), duration(r));
    }
    m.insert("prune".into(), json!(r.one_in(2)));
    m.insert("suspend".into(), json!(r.one_in(6)));
    if !r.one_in(4) {
        m.insert("serviceAccountName".into(), json!(name(r)));
    }
    if r.one_in(4) {
        let deps: Vec<Value> = (0..r.below(3))
            .map(|_| {
                json!({"name": name(r), "namespace": if r.one_in(2) { String::new() } else { name(r) },
                       "kind": *r.pick(&["", "ModuleRelease", "Release", "Widget"])})
            })
            .collect();
        m.insert("dependsOn".into(), json!(deps));
    }
    if r.one_in(3) {
        m.insert(
            "driftDetection".into(),
            json!({"mode": *r.pick(&["Warn", "Correct", "Disabled"])}),
        );
    }
    if r.one_in(4) {
        m.insert("rollout".into(), json!({"forceConflicts": r.one_in(2)}));
    }
    m
}

fn status(r: &mut Rng) -> Value {
    let counter = |r: &mut Rng| *r.pick(&[0i64, 1, 7, 63, 64, i64::MAX, -1, i64::MIN]);
    let entries: Vec<Value> = (0..r.below(4))
        .map(|_| json!({"kind": "ConfigMap", "namespace": name(r), "name": name(r), "v": "v1"}))
        .collect();
    json!({
        "observedGeneration": counter(r),
        "failureCounters": {"reconcile": counter(r), "apply": counter(r), "prune": counter(r), "drift": counter(r)},
        "conditions": [{"type": "Ready", "status": *r.pick(&["True", "False", "Unknown", "\u{feff}"]),
                        "reason": *r.pick(&["Suspended", "Progressing", "", "\u{202e}x"]),
                        "message": odd_string(r, 30)}],
        "inventory": {"revision": counter(r), "count": entries.len(), "entries": entries},
        "lastAppliedRenderDigest": odd_string(r, 8),
    })
}

/// A release object as the API server would hand it to the operator.
fn release(r: &mut Rng, now: Timestamp) -> Value {
    let module_kind = r.one_in(2);
    let mut spec = spec_common(r);
    let values = match r.below(4) {
        0 => deep(1 + r.below(100) as u32),
        1 => value(r, 4),
        2 => json!({"message": odd_string(r, 40), "\u{feff}key": "\u{200f}v\u{0}"}),
        _ => Value::Null,
    };
    if module_kind {
        spec.insert(
            "module".into(),
            json!({"path": if r.one_in(6) { odd_string(r, 30) } else { "example.com/modules/web@v0".into() },
                   "version": *r.pick(&["v0.2.1", "v1.0.0", "", "v0.2.1\u{feff}", "v0"])}),
        );
        if !values.is_null() {
            spec.insert("values".into(), values);
        }
    } else {
        let mut sref = json!({
            "kind": *r.pick(&["OCIRepository", "GitRepository", "Bucket", "HelmRepository", ""]),
            "name": name(r),
        });
        if r.one_in(3) {
            sref["apiVersion"] = json!(*r.pick(&[
                "source.toolkit.fluxcd.io/v1",
                "",
                "v1",
                "source.toolkit.fluxcd.io/v1beta2"
            ]));
        }
        if r.one_in(3) {
            sref["namespace"] = json!(if r.one_in(4) {
                odd_string(r, 10)
            } else {
                dns_label(r, 63)
            });
        }
        spec.insert("sourceRef".into(), sref);
        spec.insert(
            "path".into(),
            json!(*r.pick(&[".", "a/b", "../x", "/abs", "\u{feff}", "ü/./.."])),
        );
    }
    let mut annotations = Map::new();
    if r.one_in(3) {
        annotations.insert(
            "reconcile.opmodel.dev/requestedAt".into(),
            json!(odd_string(r, 20)),
        );
    }
    if r.one_in(6) {
        annotations.insert(
            "opm.dev/force-delete-orphan".into(),
            json!(*r.pick(&["true", "True", "\u{feff}true"])),
        );
    }
    let mut meta = json!({
        "name": dns_name(r),
        "namespace": dns_label(r, 63),
        "generation": *r.pick(&[1i64, 2, i64::MAX, 0, -1]),
        "annotations": annotations,
    });
    if !r.one_in(4) {
        meta["finalizers"] = json!(["releases.opmodel.dev/cleanup"]);
    }
    if r.one_in(8) {
        meta["deletionTimestamp"] = json!(now.to_string());
    }
    let mut obj = json!({
        "apiVersion": "releases.opmodel.dev/v1alpha1",
        "kind": if module_kind { "ModuleRelease" } else { "Release" },
        "metadata": meta,
        "spec": spec,
    });
    if r.one_in(2) {
        obj["status"] = status(r);
    }
    obj
}

fn api_error(r: &mut Rng) -> ApiError {
    let message = odd_string(r, 20);
    match r.below(8) {
        0 => ApiError::Forbidden { message },
        1 => ApiError::NotFound { message },
        2 => ApiError::Conflict { message },
        3 => ApiError::Invalid { message },
        4 => ApiError::Unavailable { message },
        5 => ApiError::TooManyRequests {
            message,
            retry_after_secs: if r.one_in(2) {
                Some(r.below(1 << 20))
            } else {
                None
            },
        },
        6 => ApiError::Timeout { message },
        _ => ApiError::Other {
            code: *r.pick(&[0u16, 418, 500, u16::MAX]),
            message,
        },
    }
}

/// A render output: a release value with a few objects, names from the generator.
fn render_output(r: &mut Rng) -> Value {
    let mut comps = Map::new();
    for c in 0..r.below(3) {
        let mut objs = Map::new();
        for k in 0..r.below(3) {
            objs.insert(
                format!("o{k}"),
                json!({"apiVersion": "v1", "kind": *r.pick(&["ConfigMap", "Secret", "Namespace"]),
                       "metadata": {"name": name(r)}, "data": {"k": odd_string(r, 10)}}),
            );
        }
        comps.insert(format!("c{c}"), Value::Object(objs));
    }
    json!({"kind": "ModuleRelease", "metadata": {"name": "x"}, "components": comps})
}

/// A generated answer to `effect`, or `None` for an effect this harness does not know
/// (added after it was written): the case then ends early, counted as unanswered.
// `filter_map(.. then ..)`: one generator drives both the choice and the value, which a
// `filter` + `map` pair cannot both borrow.
#[allow(clippy::filter_map_bool_then)]
fn respond(effect: &Effect, r: &mut Rng) -> Option<InputKind> {
    let fail = r.one_in(4);
    Some(match effect {
        Effect::AddFinalizer { .. } => InputKind::FinalizerAdded {
            result: if fail { Err(api_error(r)) } else { Ok(()) },
        },
        Effect::RemoveFinalizer { .. } => InputKind::FinalizerRemoved {
            result: if fail { Err(api_error(r)) } else { Ok(()) },
        },
        Effect::CheckDependencies { refs, .. } => InputKind::DependenciesChecked {
            result: if fail {
                Err(api_error(r))
            } else {
                Ok(DependencyReport {
                    releases: refs
                        .iter()
                        .filter_map(|k| {
                            (!r.one_in(5)).then(|| ReleaseSnapshot {
                                key: k.clone(),
                                generation: *r.pick(&[1, i64::MAX]),
                                observed_generation: *r.pick(&[1, 0, i64::MAX]),
                                ready: (*r.pick(&["True", "False", ""])).into(),
                                depends_on: vec![],
                                deleting: false,
                            })
                        })
                        .collect(),
                    objects: Vec::new(),
                })
            },
        },
        Effect::ListDependents { release } => InputKind::DependentsListed {
            result: if fail {
                Err(api_error(r))
            } else {
                Ok(DependencyReport {
                    releases: (0..r.below(3))
                        .map(|i| ReleaseSnapshot {
                            key: opm_core::ReleaseKey {
                                name: format!("dependent-{i}"),
                                ..release.clone()
                            },
                            generation: 1,
                            observed_generation: 1,
                            ready: String::new(),
                            depends_on: vec![release.clone()],
                            deleting: r.one_in(2),
                        })
                        .collect(),
                    objects: Vec::new(),
                })
            },
        },
        Effect::ResolveSource { .. } => InputKind::SourceResolved {
            result: match r.below(6) {
                0 => Err(SourceError::NotFound),
                1 => Err(SourceError::NoArtifact),
                2 => Err(SourceError::NotReady {
                    message: odd_string(r, 20),
                }),
                3 => Err(SourceError::Api {
                    error: api_error(r),
                }),
                _ => Ok(SourceArtifact {
                    url: (*r.pick(&["http://src/a.tgz", "", "ftp://x", "http://\u{feff}"])).into(),
                    revision: odd_string(r, 10),
                    digest: if r.one_in(3) {
                        odd_string(r, 10)
                    } else {
                        format!("sha256:{}", "ab".repeat(32))
                    },
                }),
            },
        },
        Effect::FetchArtifact { digest, .. } => InputKind::ArtifactFetched {
            result: match r.below(5) {
                0 => Err(FetchError::Timeout),
                1 => Err(FetchError::Io {
                    message: odd_string(r, 20),
                }),
                2 => Err(FetchError::InvalidArtifact {
                    message: odd_string(r, 20),
                }),
                _ => Ok(FetchedArtifact {
                    digest: digest.clone(),
                    size: *r.pick(&[0, 1, u64::MAX]),
                }),
            },
        },
        Effect::Render { .. } => InputKind::Rendered {
            result: match r.below(5) {
                0 => Err(RenderError::Evaluation {
                    message: odd_string(r, 30),
                }),
                1 => Err(RenderError::Timeout {
                    message: odd_string(r, 10),
                }),
                2 if r.one_in(8) => Err(RenderError::TooLarge {
                    bytes_at_least: r.below(u64::MAX),
                    cap: r.below(u64::MAX),
                }),
                2 => Ok(RenderOutput {
                    value: value(r, 3),
                    cluster_scoped: vec![],
                    bytes: r.below(1 << 26),
                    platform: String::new(),
                }),
                _ => Ok(RenderOutput {
                    value: render_output(r),
                    cluster_scoped: vec![],
                    bytes: r.below(1 << 20),
                    platform: String::new(),
                }),
            },
        },
        Effect::CheckServiceAccount { .. } => InputKind::ServiceAccountChecked {
            result: if fail {
                Err(api_error(r))
            } else {
                Ok(!r.one_in(4))
            },
        },
        Effect::CheckDrift { objects, .. } => InputKind::DriftChecked {
            report: DriftReport {
                drifted: objects
                    .iter()
                    .filter(|_| r.one_in(2))
                    .map(|o| o.id.clone())
                    .collect(),
                errors: objects
                    .iter()
                    .filter_map(|o| {
                        (fail && r.one_in(2)).then(|| ObjectResult {
                            id: o.id.clone(),
                            result: Err(api_error(r)),
                        })
                    })
                    .collect(),
                details: Vec::new(),
            },
        },
        Effect::Apply { stages, .. } => InputKind::Applied {
            report: ApplyReport {
                objects: stages
                    .iter()
                    .flat_map(|s| s.objects.iter())
                    .map(|o| AppliedObject {
                        id: o.id.clone(),
                        result: if fail && r.one_in(2) {
                            Err(api_error(r))
                        } else {
                            Ok(*r.pick(&[
                                ApplyAction::Created,
                                ApplyAction::Updated,
                                ApplyAction::Unchanged,
                                ApplyAction::Recreated,
                            ]))
                        },
                    })
                    .collect(),
            },
        },
        Effect::InspectStale { targets, .. } => InputKind::StaleInspected {
            objects: targets
                .iter()
                .map(|t| LiveObject {
                    id: t.clone(),
                    result: if fail {
                        Err(api_error(r))
                    } else if r.one_in(3) {
                        Ok(None)
                    } else {
                        Ok(Some(LiveMeta {
                            uid: odd_string(r, 6),
                            labels: Default::default(),
                        }))
                    },
                })
                .collect(),
        },
        Effect::Prune { deletions, .. } => InputKind::Pruned {
            results: deletions
                .iter()
                .map(|d| ObjectResult {
                    id: d.id.clone(),
                    result: if fail { Err(api_error(r)) } else { Ok(()) },
                })
                .collect(),
        },
        Effect::PatchStatus { .. } => InputKind::StatusPatched {
            result: if fail { Err(api_error(r)) } else { Ok(()) },
        },
        Effect::AwaitTermination { targets, .. } => InputKind::TerminationAwaited {
            remaining: targets
                .iter()
                .filter(|_| fail && r.one_in(2))
                .map(|d| d.id.clone())
                .collect(),
            error: if fail && r.one_in(2) {
                Some(api_error(r))
            } else {
                None
            },
        },
        _ => return None,
    })
}

/// Steps an attempt may take before it must have finished.
const MAX_STEPS: usize = 256;

#[derive(Default)]
struct Tally {
    cases: u64,
    rejected_by_serde: u64,
    unanswered: u64,
    done: u64,
    outcomes: std::collections::BTreeMap<String, u64>,
}

/// Drives one attempt; `Err` names what broke.
fn drive(r: &mut Rng, t: &mut Tally) -> Result<(), String> {
    let t0: Timestamp = *r.pick(&[
        "2026-03-01T10:00:00Z".parse::<Timestamp>().unwrap(),
        "9999-12-30T00:00:00Z".parse().unwrap(),
        "1970-01-01T00:00:00Z".parse().unwrap(),
    ]);
    let raw = release(r, t0);
    let obj: ReleaseObject = match raw["kind"].as_str() {
        Some("ModuleRelease") => match serde_json::from_value(raw.clone()) {
            Ok(o) => ReleaseObject::ModuleRelease(o),
            Err(_) => {
                t.rejected_by_serde += 1;
                return Ok(());
            }
        },
        _ => match serde_json::from_value(raw.clone()) {
            Ok(o) => ReleaseObject::Release(o),
            Err(_) => {
                t.rejected_by_serde += 1;
                return Ok(());
            }
        },
    };
    let cfg = Config {
        requeue_dependency: *r.pick(&[
            Duration::from_secs(30),
            Duration::ZERO,
            Duration::from_secs(86_400),
            Duration::MAX,
        ]),
        allow_cross_namespace_refs: r.one_in(2),
        default_service_account: if r.one_in(2) { Some(name(r)) } else { None },
        allow_operator_identity: *r.pick(&[
            opm_core::config::AllowOperatorIdentity::Off,
            opm_core::config::AllowOperatorIdentity::On,
            opm_core::config::AllowOperatorIdentity::Cluster,
        ]),
        ..Config::default()
    };
    let key = obj.key();
    let mut rec = Recorder::new(&TraceHeader::new(&cfg, key.clone()));
    let first = Input::new(
        t0,
        InputKind::Observed {
            key,
            object: Some(Box::new(obj)),
        },
    );
    rec.input(&first);
    let (mut a, mut batch) = Attempt::start(&cfg, first);
    let mut now = t0;
    for _ in 0..MAX_STEPS {
        rec.effects(&batch);
        if !batch_shape_ok(&batch) {
            return Err(format!("bad batch {batch:?}"));
        }
        for e in &batch {
            if let Effect::PatchStatus { .. } = e {
                serde_json::to_string(e).map_err(|x| format!("status patch: {x}"))?;
            }
        }
        let last = batch.last().unwrap().clone();
        if let Effect::Done {
            outcome,
            requeue_after,
            ..
        } = &last
        {
            if requeue_after.is_some_and(|d| d > MAX_REQUEUE) {
                return Err(format!("requeue {requeue_after:?} over 24h"));
            }
            *t.outcomes.entry(format!("{outcome:?}")).or_default() += 1;
            t.done += 1;
            replay(rec.lines().iter().map(String::as_str))
                .map_err(|d| format!("trace does not replay: {d}"))?;
            return Ok(());
        }
        let Some(answer) = respond(&last, r) else {
            t.unanswered += 1;
            return Ok(());
        };
        // Time moves on, sometimes a lot, sometimes backwards (a clock step).
        let jump = *r.pick(&[0i64, 1, 30, 3600, 90_000, -5, i64::from(i32::MAX)]);
        now = now
            .checked_add(jiff::SignedDuration::from_secs(jump))
            .unwrap_or(now);
        let input = Input::new(now, answer);
        rec.input(&input);
        batch = a
            .step(input)
            .map_err(|e| format!("answer refused: {e:?}"))?;
    }
    Err(format!("no Done after {MAX_STEPS} steps"))
}

#[test]
fn generated_specs_never_panic_the_core() {
    let cases: u64 = std::env::var("OPM_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2_000);
    let seed: u64 = std::env::var("OPM_FUZZ_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_261_201);
    #[allow(clippy::disallowed_methods)] // a test's own stopwatch, not the core's clock
    let started = Instant::now();
    let mut t = Tally::default();
    let mut failures = Vec::new();
    for case in 0..cases {
        // One generator per case, so a failure reproduces from (seed, case) alone.
        let mut r = Rng(seed ^ case.wrapping_mul(0xA24B_AED4_963E_E407));
        t.cases += 1;
        let res = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let mut local = Tally::default();
            let out = drive(&mut r, &mut local);
            (out, local)
        }));
        match res {
            Ok((Ok(()), local)) => {
                t.rejected_by_serde += local.rejected_by_serde;
                t.unanswered += local.unanswered;
                t.done += local.done;
                for (k, v) in local.outcomes {
                    *t.outcomes.entry(k).or_default() += v;
                }
            }
            Ok((Err(why), _)) => failures.push(format!("seed {seed} case {case}: {why}")),
            Err(_) => failures.push(format!("seed {seed} case {case}: the core panicked")),
        }
        if failures.len() >= 5 {
            break;
        }
    }
    let secs = started.elapsed().as_secs_f64();
    eprintln!(
        "fuzz_spec: {} cases in {secs:.1} s ({:.0}/s): {} finished, {} not deserialisable, {} \
         unanswered effects; outcomes {:?}",
        t.cases,
        t.cases as f64 / secs,
        t.done,
        t.rejected_by_serde,
        t.unanswered,
        t.outcomes
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(t.done > t.cases / 2, "most cases must run to Done");
}
