//! 1 000 releases (half ModuleReleases, half Releases of ten Flux sources, in ten
//! namespaces) over 24 virtual hours: periodic NoOps, a registry outage, an artifact
//! server outage, new artifacts every few hours and values edits. Prints attempts,
//! outcomes and wall time of one run, then lets criterion time whole days.

use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use jiff::Timestamp;
use opm_core::input::{FetchError, RenderError};
use opm_core::{Config, EffectKind};
use opm_world::{
    ArtifactDef, Fault, FaultError, ModuleDef, Retention, SourceId, World, WorldEvent, fixtures,
};
use serde_json::json;

const MODULE: &str = "example.com/modules/web@v0";
const RELEASES: usize = 1000;

fn t0() -> Timestamp {
    "2026-01-01T00:00:00Z".parse().unwrap()
}

fn hours(h: u64) -> Timestamp {
    t0() + Duration::from_secs(h * 3600)
}

/// One artifact per namespace with a package directory `app-<i>` per Release of it, each
/// exporting three ConfigMaps of its own.
fn package(rev: u32, team: usize) -> ArtifactDef {
    let ns = format!("team-{team}");
    let mut a = ArtifactDef::package(&format!("v{rev}"), ".", "root", &ns, json!({}));
    a.paths.clear();
    for i in (team..RELEASES).step_by(10).filter(|i| i % 2 == 1) {
        let mut comps = serde_json::Map::new();
        for k in 0..3 {
            comps.insert(
                format!("cm{k}"),
                json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": format!("app-{i}-{k}")}, "data": {"rev": rev.to_string()}}),
            );
        }
        let value = opm_world::exported(&format!("app-{i}"), &ns, json!({ "main": comps }));
        a.paths.insert(format!("app-{i}"), Ok(value));
    }
    a
}

fn day() -> World {
    let mut w = World::new(
        Config::default().with_operator_identity(opm_core::AllowOperatorIdentity::Cluster),
        t0(),
        42,
    )
    .with_retention(Retention::Timeline);
    w.add_module(MODULE, "v0.2.1", ModuleDef::web());
    for n in 0..10 {
        let ns = format!("team-{n}");
        w.namespace(&ns);
        w.publish(&SourceId::new("OCIRepository", &ns, "repo"), package(1, n));
    }
    for i in 0..RELEASES {
        let ns = format!("team-{}", i % 10);
        let name = format!("app-{i}");
        let mut o = if i % 2 == 0 {
            fixtures::module_release(&ns, &name, MODULE, "v0.2.1")
        } else {
            fixtures::release(&ns, &name, "repo", &format!("./{name}"))
        };
        fixtures::common_mut(&mut o).prune = i % 3 != 0;
        w.create_release(o).unwrap();
    }
    w.add_fault(
        Fault::always(
            EffectKind::Render,
            FaultError::Render {
                error: RenderError::RegistryUnreachable {
                    message: "cannot do HTTP request".into(),
                },
            },
        )
        .between(hours(3), hours(4)),
    )
    .unwrap();
    w.add_fault(
        Fault::always(
            EffectKind::FetchArtifact,
            FaultError::Fetch {
                error: FetchError::Http { status: 503 },
            },
        )
        .between(hours(10), hours(10) + Duration::from_secs(20 * 60)),
    )
    .unwrap();
    for h in (2..24).step_by(4) {
        for n in 0..10 {
            let ns = format!("team-{n}");
            w.schedule(
                hours(h),
                WorldEvent::NewArtifact {
                    source: SourceId::new("OCIRepository", &ns, "repo"),
                    artifact: package(h as u32, n),
                },
            );
        }
    }
    for i in (0..RELEASES).step_by(20) {
        let key = opm_core::ReleaseKey {
            kind: opm_core::Kind::ModuleRelease,
            namespace: format!("team-{}", i % 10),
            name: format!("app-{i}"),
        };
        w.schedule(
            hours(6 + (i % 12) as u64),
            WorldEvent::EditSpec {
                key,
                patch: json!({"values": {"replicas": 2}}),
            },
        );
    }
    w
}

fn run_until(h: u64) -> World {
    let mut w = day();
    w.drive_until(hours(h)).expect("the day runs");
    w
}

#[allow(clippy::disallowed_methods)] // a benchmark measures wall time by design
fn report() {
    let started = std::time::Instant::now();
    let w = run_until(24);
    let wall = started.elapsed();
    let attempts = w.timeline().len();
    let mut by_outcome = std::collections::BTreeMap::new();
    for e in w.timeline() {
        *by_outcome.entry(format!("{:?}", e.outcome)).or_insert(0u64) += 1;
    }
    println!(
        "simulated_day: {RELEASES} releases, 24 virtual hours: {attempts} attempts in {wall:.2?} wall ({:.0} attempts/s); outcomes {by_outcome:?}; {} objects in the store",
        attempts as f64 / wall.as_secs_f64(),
        w.store().len()
    );
}

/// The whole day runs once (printed above); criterion samples its first hour, which holds
/// the initial applies of all 1 000 releases plus twelve rounds of periodic NoOps, so that
/// ten samples stay affordable on a shared machine.
fn bench(c: &mut Criterion) {
    report();
    let mut g = c.benchmark_group("simulated_day");
    g.sample_size(10);
    g.measurement_time(Duration::from_secs(20));
    g.bench_function("1000_releases_first_hour", |b| b.iter(|| run_until(1)));
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
