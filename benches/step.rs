//! Throughput of the step function: whole attempts driven with canned results, reported as
//! inputs per second.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use opm_core::api::{ModuleRef, ModuleRelease, ModuleReleaseSpec};
use opm_core::effect::Effect;
use opm_core::input::{AppliedObject, ApplyAction, ApplyReport, DriftReport, RenderOutput};
use opm_core::{Attempt, Config, Input, InputKind, ReleaseObject};
use serde_json::json;

fn release(status_from: Option<&ModuleRelease>) -> ModuleRelease {
    ModuleRelease {
        metadata: ObjectMeta {
            name: Some("web".into()),
            namespace: Some("demo".into()),
            generation: Some(1),
            finalizers: Some(vec!["releases.opmodel.dev/cleanup".into()]),
            ..Default::default()
        },
        spec: ModuleReleaseSpec {
            module: ModuleRef {
                path: "example.com/modules/web@v0".into(),
                version: "v0.2.1".into(),
                secret_ref: None,
            },
            values: Some(json!({"replicas": 2, "image": "nginx:1.27"})),
            values_from: Vec::new(),
            common: Default::default(),
        },
        status: status_from.and_then(|m| m.status.clone()),
    }
}

fn exported(objects: usize) -> serde_json::Value {
    let mut comp = serde_json::Map::new();
    for i in 0..objects {
        comp.insert(
            format!("cm{i}"),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": format!("cm-{i}")}, "data": {"k": "v"}}),
        );
    }
    json!({"kind": "ModuleRelease", "metadata": {"name": "web", "namespace": "demo"}, "components": {"web": comp}})
}

/// Drives one attempt; returns (inputs fed, final status written if any).
fn attempt(
    mr: &ModuleRelease,
    value: &serde_json::Value,
) -> (u64, Option<opm_core::api::ReleaseStatus>) {
    let now: Timestamp = "2026-03-01T10:00:00Z".parse().unwrap();
    let obj = ReleaseObject::ModuleRelease(mr.clone());
    let key = obj.key();
    let (mut a, mut batch) = Attempt::start(
        &Config::default().with_operator_identity(opm_core::AllowOperatorIdentity::Cluster),
        Input::new(
            now,
            InputKind::Observed {
                key,
                object: Some(Box::new(obj)),
            },
        ),
    );
    let mut inputs = 1;
    let mut written = None;
    loop {
        let kind = match batch.last() {
            Some(Effect::Render { .. }) => InputKind::Rendered {
                result: Ok(RenderOutput {
                    bytes: 0,
                    value: value.clone(),
                    cluster_scoped: vec![],
                    platform: String::new(),
                }),
            },
            Some(Effect::CheckDrift { .. }) => InputKind::DriftChecked {
                report: DriftReport::default(),
            },
            Some(Effect::Apply { stages, .. }) => InputKind::Applied {
                report: ApplyReport {
                    objects: stages
                        .iter()
                        .flat_map(|s| &s.objects)
                        .map(|o| AppliedObject {
                            id: o.id.clone(),
                            result: Ok(ApplyAction::Created),
                        })
                        .collect(),
                },
            },
            Some(Effect::PatchStatus { status, .. }) => {
                written = Some((**status).clone());
                InputKind::StatusPatched { result: Ok(()) }
            }
            _ => return (inputs, written),
        };
        inputs += 1;
        batch = a.step(Input::new(now, kind)).expect("accepted");
    }
}

fn bench(c: &mut Criterion) {
    for objects in [3usize, 50] {
        let value = exported(objects);
        let fresh = release(None);
        let (n, status) = attempt(&fresh, &value);
        let mut applied = fresh.clone();
        applied.status = status;
        let mut g = c.benchmark_group(format!("attempt/{objects}-objects"));
        g.throughput(Throughput::Elements(n));
        g.bench_function("first-apply", |b| {
            b.iter(|| attempt(black_box(&fresh), black_box(&value)))
        });
        let (n_noop, _) = attempt(&applied, &value);
        g.throughput(Throughput::Elements(n_noop));
        g.bench_function("no-op", |b| {
            b.iter(|| attempt(black_box(&applied), black_box(&value)))
        });
        g.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
