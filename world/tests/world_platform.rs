//! The Platform (SPEC §30) in the simulated world, through the same core path as the
//! operator: OPM releases (an OPM module's `ModuleRelease`, an OPM instance package's
//! `Release`) soft-block with `PlatformNotReady` without a Ready Platform, re-trigger when
//! it turns Ready, re-render when its digest changes; plain releases never notice it. The
//! attempt memo never answers across a Platform event. A property drives random Platform
//! histories (created, bumped, failing, deleted, releases switched to and from an OPM
//! module version) through the shared base world of the property tests.

mod world_support;

use std::time::Duration;

use jiff::Timestamp;
use opm_core::Effect;
use opm_core::api::ReleaseStatus;
use opm_core::opm::platform::Evaluation;
use opm_core::outcome::Outcome;
use opm_core::{Config, ReleaseKey};
use opm_world::{
    ArtifactDef, ModuleDef, PlatformDef, Retention, SourceId, TimelineEntry, World, WorldEvent,
    fixtures,
};
use proptest::prelude::*;
use serde_json::json;

const PLAIN: &str = "example.com/modules/web@v0";
const OPM: &str = "example.com/modules/opm-web@v1";
const CATALOG: &str = "opmodel.dev/catalogs/opm@v2";

fn t0() -> Timestamp {
    "2026-01-01T00:00:00Z".parse().unwrap()
}

fn at(secs: u64) -> Timestamp {
    t0() + Duration::from_secs(secs)
}

fn status<'a>(w: &'a World, key: &ReleaseKey) -> &'a ReleaseStatus {
    w.release(key).and_then(|o| o.status()).unwrap()
}

fn ready(w: &World, key: &ReleaseKey) -> String {
    let c = status(w, key)
        .conditions
        .iter()
        .find(|c| c.type_ == "Ready")
        .unwrap();
    format!("{}/{}", c.status, c.reason)
}

fn attempts<'a>(w: &'a World, key: &ReleaseKey) -> Vec<&'a TimelineEntry> {
    w.timeline().iter().filter(|e| &e.key == key).collect()
}

/// Objects in the store named after the release.
fn objects_of(w: &World, name: &str) -> usize {
    w.store()
        .objects()
        .filter(|o| o.id.name.starts_with(name))
        .count()
}

/// A world with an OPM `ModuleRelease` (`web`), an OPM instance `Release` (`shop`) and a
/// plain `ModuleRelease` (`plain`), all created at 0 without a Platform.
fn world(retention: Retention, memo: bool) -> (World, [ReleaseKey; 3]) {
    let mut w = World::new(
        Config::default().with_operator_identity(opm_core::AllowOperatorIdentity::On),
        t0(),
        3,
    )
    .with_retention(retention)
    .with_attempt_memo(memo);
    w.add_module(PLAIN, "v0.2.1", ModuleDef::web());
    w.add_module(OPM, "v1.0.0", ModuleDef::opm_web());
    let mut instance = ArtifactDef::package(
        "v1",
        "./shop",
        "shop",
        "demo",
        json!({"config": {"cm": {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "shop"}, "data": {"tier": "gold"}}}}),
    );
    instance.opm = true;
    w.publish(
        &SourceId::new("OCIRepository", "demo", "instances"),
        instance,
    );
    let web = w
        .create_release(fixtures::module_release("demo", "web", OPM, "v1.0.0"))
        .unwrap();
    let shop = w
        .create_release(fixtures::release("demo", "shop", "instances", "./shop"))
        .unwrap();
    let plain = w
        .create_release(fixtures::module_release("demo", "plain", PLAIN, "v0.2.1"))
        .unwrap();
    (w, [web, shop, plain])
}

#[test]
fn without_a_platform_opm_releases_wait_with_platform_not_ready_every_30s() {
    let (mut w, [web, shop, plain]) = world(Retention::Full, true);
    w.drive_until(at(95)).unwrap();
    for k in [&web, &shop] {
        assert_eq!(ready(&w, k), "False/PlatformNotReady", "{k:?}");
        let a = attempts(&w, k);
        assert_eq!(
            a.iter().map(|e| e.started_at).collect::<Vec<_>>(),
            [at(0), at(30), at(60), at(90)],
            "{k:?}: soft-blocked, retried every 30s"
        );
        for e in a {
            assert_eq!(e.outcome, Some(Outcome::FailedTransient));
            assert_eq!(e.reason, "PlatformNotReady");
            assert_eq!(e.requeue_after, Some(Duration::from_secs(30)));
            assert!(
                e.message.starts_with(
                    "waiting for Platform cluster: no Platform cluster exists; create one"
                ),
                "{}",
                e.message
            );
        }
    }
    // Nothing of theirs was applied; the plain release beside them is Ready.
    assert_eq!(objects_of(&w, "web"), 0);
    assert_eq!(objects_of(&w, "shop"), 0);
    assert_eq!(ready(&w, &plain), "True/ReconciliationSucceeded");
    assert!(objects_of(&w, "plain") > 0);
}

#[test]
fn a_platform_created_later_retriggers_the_waiting_releases_at_once_and_they_converge() {
    let (mut w, [web, shop, plain]) = world(Retention::Full, true);
    w.drive_until(at(95)).unwrap();
    let plain_attempts = attempts(&w, &plain).len();
    // Between two 30s retries: only the re-trigger can explain an attempt at 100s.
    w.schedule(
        at(100),
        WorldEvent::CreatePlatform {
            platform: PlatformDef::catalog(CATALOG, "v2.0.0"),
        },
    );
    w.drive_until(at(100)).unwrap();
    let digest = w.platform_ready().unwrap();
    for k in [&web, &shop] {
        let last = *attempts(&w, k).last().unwrap();
        assert_eq!(last.started_at, at(100), "{k:?}");
        assert_eq!(last.outcome, Some(Outcome::Applied), "{k:?}");
        assert_eq!(ready(&w, k), "True/ReconciliationSucceeded");
        assert!(
            w.triggers()
                .iter()
                .any(|t| &t.key == k && t.at == at(100) && t.why == "platformReady")
        );
        // The OPM config digest covers the Platform's digest (SPEC §30).
        let s = status(&w, k);
        assert_ne!(s.last_applied_config_digest, "");
        assert!(!digest.is_empty());
    }
    assert!(objects_of(&w, "web") > 0 && objects_of(&w, "shop") > 0);
    // The plain release was not disturbed.
    assert_eq!(attempts(&w, &plain).len(), plain_attempts);
    // And they stay converged: periodic NoOps.
    w.drive_until(at(100 + 3 * 300)).unwrap();
    for k in [&web, &shop] {
        let a = attempts(&w, k);
        assert!(
            a.iter()
                .rev()
                .take(3)
                .all(|e| e.outcome == Some(Outcome::NoOp))
        );
    }
    assert!(w.unsettled().is_empty(), "{:?}", w.unsettled());
}

#[test]
fn a_platform_change_rerenders_every_opm_release_and_leaves_plain_ones_alone() {
    let (mut w, [web, shop, plain]) = world(Retention::Full, true);
    w.apply_platform(&PlatformDef::catalog(CATALOG, "v2.0.0"));
    w.drive_until(at(1000)).unwrap();
    let before: Vec<ReleaseStatus> = [&web, &shop, &plain]
        .iter()
        .map(|k| status(&w, k).clone())
        .collect();
    let old_digest = w.platform_ready().unwrap();
    let plain_attempts = attempts(&w, &plain).len();
    // A catalog version bump between periodic attempts (they fall on multiples of 300s).
    w.schedule(
        at(1010),
        WorldEvent::ChangePlatform {
            platform: PlatformDef::catalog(CATALOG, "v2.1.0"),
        },
    );
    w.drive_until(at(1010)).unwrap();
    assert_ne!(w.platform_ready().unwrap(), old_digest);
    for (k, b) in [&web, &shop].into_iter().zip(&before) {
        let last = *attempts(&w, k).last().unwrap();
        assert_eq!(
            last.started_at,
            at(1010),
            "{k:?}: re-triggered by the change"
        );
        assert_eq!(last.outcome, Some(Outcome::Applied), "{k:?}");
        let s = status(&w, k);
        assert_ne!(
            s.last_applied_config_digest, b.last_applied_config_digest,
            "{k:?}: the Platform digest is part of the config digest"
        );
        assert_eq!(s.last_applied_source_digest, b.last_applied_source_digest);
        assert_eq!(ready(&w, k), "True/ReconciliationSucceeded");
    }
    assert_eq!(
        attempts(&w, &plain).len(),
        plain_attempts,
        "plain: no attempt"
    );
    assert_eq!(status(&w, &plain), &before[2], "plain: status untouched");
    // A plain release's periodic attempt after the change is still a NoOp.
    w.drive_until(at(1500)).unwrap();
    let last = *attempts(&w, &plain).last().unwrap();
    assert!(last.started_at > at(1010));
    assert_eq!(last.outcome, Some(Outcome::NoOp));
    assert_eq!(
        status(&w, &plain).last_applied_config_digest,
        before[2].last_applied_config_digest
    );
}

#[test]
fn a_platform_that_is_not_ready_or_deleted_retriggers_nothing_and_objects_stay() {
    let (mut w, [web, shop, _plain]) = world(Retention::Full, true);
    // Evaluated but failed: not Ready, so nothing re-triggers; the releases see why.
    let failing = PlatformDef {
        evaluation: Some(Evaluation::Failed {
            message: "cannot find module providing package opmodel.dev/catalogs/opm@v2".into(),
            transient: false,
        }),
        ..PlatformDef::catalog(CATALOG, "v2.0.0")
    };
    w.schedule(
        at(10),
        WorldEvent::CreatePlatform {
            platform: failing.clone(),
        },
    );
    w.drive_until(at(29)).unwrap();
    assert_eq!(attempts(&w, &web).len(), 1, "no attempt at 10s");
    w.drive_until(at(30)).unwrap();
    let last = *attempts(&w, &web).last().unwrap();
    assert_eq!(last.reason, "PlatformNotReady");
    assert!(
        last.message.contains("Ready=False ResolutionFailed"),
        "{}",
        last.message
    );
    // Fixed: Ready, re-triggered at once.
    w.schedule(
        at(40),
        WorldEvent::CreatePlatform {
            platform: PlatformDef::catalog(CATALOG, "v2.0.0"),
        },
    );
    w.drive_until(at(40)).unwrap();
    assert_eq!(ready(&w, &web), "True/ReconciliationSucceeded");
    assert_eq!(
        w.platform().unwrap().metadata.generation,
        Some(1),
        "same spec"
    );
    let applied = objects_of(&w, "web");
    // Deleted: nothing re-triggers; the next periodic attempt (340s) waits again, and the
    // applied objects stay.
    w.schedule(at(100), WorldEvent::DeletePlatform);
    w.drive_until(at(339)).unwrap();
    assert_eq!(ready(&w, &web), "True/ReconciliationSucceeded");
    w.drive_until(at(340)).unwrap();
    for k in [&web, &shop] {
        let last = *attempts(&w, k).last().unwrap();
        assert_eq!(last.started_at, at(340), "{k:?}");
        assert_eq!(last.reason, "PlatformNotReady");
    }
    assert_eq!(objects_of(&w, "web"), applied);
    // A change without a Platform changes nothing.
    w.apply_event(WorldEvent::ChangePlatform {
        platform: PlatformDef::catalog(CATALOG, "v2.1.0"),
    })
    .unwrap();
    assert!(w.platform().is_none());
}

/// Drives the same Platform history with or without the attempt memo (timeline only). The
/// Platform is changed through the world's own commands ([`World::apply_platform`],
/// [`World::delete_platform`]), not only through scheduled events, so each must bump the
/// epoch itself.
fn history(memo: bool) -> (World, [ReleaseKey; 3]) {
    let (mut w, keys) = world(Retention::Timeline, memo);
    w.drive_until(at(100)).unwrap();
    w.apply_platform(&PlatformDef::catalog(CATALOG, "v2.0.0"));
    // A change that re-triggers, then one in a Platform's status only (an evaluation that
    // fails: not Ready, nothing re-triggers) and a deletion: only the next periodic attempt
    // can see those two, and no memo made before them may answer it.
    w.drive_until(at(1010)).unwrap();
    w.change_platform(&PlatformDef::catalog(CATALOG, "v2.1.0"));
    w.drive_until(at(2010)).unwrap();
    w.change_platform(&PlatformDef {
        evaluation: Some(Evaluation::Failed {
            message: "registry unreachable".into(),
            transient: true,
        }),
        ..PlatformDef::catalog(CATALOG, "v2.1.0")
    });
    w.drive_until(at(2510)).unwrap();
    w.apply_platform(&PlatformDef::catalog(CATALOG, "v2.1.0"));
    w.drive_until(at(3010)).unwrap();
    w.delete_platform();
    // The same through scheduled events.
    w.schedule(
        at(3500),
        WorldEvent::CreatePlatform {
            platform: PlatformDef::catalog(CATALOG, "v2.2.0"),
        },
    );
    w.schedule(at(4010), WorldEvent::DeletePlatform);
    w.drive_until(at(5000)).unwrap();
    (w, keys)
}

#[test]
fn a_platform_event_bumps_the_epoch_so_no_memo_answers_across_it() {
    let (memo, [web, _, _]) = history(true);
    let (every, _) = history(false);
    assert!(memo.memoised_attempts() > 0, "the memo was used");
    assert_eq!(every.memoised_attempts(), 0);
    assert_eq!(memo.timeline(), every.timeline());
    let web_attempts: Vec<_> = memo.timeline().iter().filter(|e| e.key == web).collect();
    // After the failed evaluation, the next periodic attempt waits (not a memo's NoOp).
    let after_fail = web_attempts
        .iter()
        .find(|e| e.started_at > at(2010))
        .unwrap();
    assert_eq!(after_fail.reason, "PlatformNotReady");
    // After the deletion too.
    let after_delete = web_attempts
        .iter()
        .find(|e| e.started_at > at(3010))
        .unwrap();
    assert_eq!(after_delete.reason, "PlatformNotReady");
    let after_event = web_attempts
        .iter()
        .find(|e| e.started_at > at(4010))
        .unwrap();
    assert_eq!(after_event.reason, "PlatformNotReady");
}

/// The full-log run of the Platform history: waiting, created, bumped, failing, deleted.
fn full_history() -> World {
    let (mut w, _) = world(Retention::Full, true);
    w.schedule(
        at(100),
        WorldEvent::CreatePlatform {
            platform: PlatformDef::catalog(CATALOG, "v2.0.0"),
        },
    );
    w.schedule(
        at(1010),
        WorldEvent::ChangePlatform {
            platform: PlatformDef::catalog(CATALOG, "v2.1.0"),
        },
    );
    w.schedule(at(2010), WorldEvent::DeletePlatform);
    w.drive_until(at(2500)).unwrap();
    w
}

#[test]
fn platform_runs_are_deterministic_and_their_traces_replay_identically() {
    let a = full_history();
    let b = full_history();
    let trace = |w: &World| -> Vec<String> {
        w.logs()
            .iter()
            .flat_map(|l| l.trace_lines(w.config()))
            .collect()
    };
    let ta = trace(&a);
    assert_eq!(ta, trace(&b), "same history, same bytes");
    // The traces carry what the operator's would: soft blocks, and renders with the digest.
    let text = ta.join("\n");
    assert!(text.contains("\"platformNotReady\""));
    assert!(text.contains("\"platform\":\"sha256:"));
    for log in a.logs() {
        let lines = log.trace_lines(a.config());
        opm_core::trace::replay(lines.iter().map(String::as_str))
            .unwrap_or_else(|d| panic!("attempt {} of {:?}: {d}", log.id, log.key));
    }
    // A render input claiming another Platform digest gives other effects.
    let log = a
        .logs()
        .iter()
        .find(|l| {
            l.trace_lines(a.config())
                .iter()
                .any(|x| x.contains("\"platform\":\"sha256:"))
        })
        .unwrap();
    let lines: Vec<String> = log
        .trace_lines(a.config())
        .into_iter()
        .map(|l| {
            if l.contains("\"in\"") && l.contains("\"platform\":\"sha256:") {
                let i = l.find("\"platform\":\"sha256:").unwrap() + "\"platform\":\"sha256:".len();
                format!("{}{}{}", &l[..i], "0".repeat(64), &l[i + 64..])
            } else {
                l
            }
        })
        .collect();
    assert!(opm_core::trace::replay(lines.iter().map(String::as_str)).is_err());
}

const HORIZON: u32 = 2 * 3600;

/// Platform events, and releases switched between the plain (`v0.2.1`) and the OPM
/// ([`world_support::OPM_VERSION`]) version of the module, with restarts and reconcile
/// requests between them.
fn platform_history() -> impl Strategy<Value = Vec<(u32, world_support::Ev)>> {
    use world_support::Ev;
    let ev = prop_oneof![
        3 => (0u8..4).prop_map(|variant| Ev::Platform { variant }),
        3 => (0usize..4, prop::sample::select(vec![0u8, 3]))
            .prop_map(|(r, variant)| Ev::Version { r, variant }),
        1 => Just(Ev::Restart),
        1 => (0usize..4, any::<u8>()).prop_map(|(r, token)| Ev::Request { r, token }),
    ];
    prop::collection::vec((0..HORIZON, ev), 1..16)
}

proptest! {
    #![proptest_config(world_support::pt_config("proptest-regressions/world_platform.txt", 24))]

    /// Whatever the Platform did, a release waiting for it applied and pruned nothing and
    /// came back in 30s; once a Ready Platform exists, every release converges within the
    /// shared bound, as after any heal.
    #[test]
    fn opm_releases_never_apply_without_a_ready_platform_and_converge_once_it_is(
        s in world_support::setup(),
        h in platform_history(),
    ) {
        let mut w = world_support::run(&s, &h, HORIZON);
        for log in w.logs() {
            if log.reason != "PlatformNotReady" {
                continue;
            }
            prop_assert_eq!(log.outcome, Some(Outcome::FailedTransient));
            prop_assert_eq!(log.requeue_after, Some(Duration::from_secs(30)));
            prop_assert!(
                !log.effects().any(|e| matches!(e, Effect::Apply { .. } | Effect::Prune { .. })),
                "{:?} applied or pruned while waiting for the Platform",
                log.key
            );
        }
        // Every attempt's trace replays through a fresh machine to the same effects.
        for log in w.logs() {
            let lines = log.trace_lines(w.config());
            opm_core::trace::replay(lines.iter().map(String::as_str)).map_err(|d| {
                TestCaseError::fail(format!("attempt {} of {:?}: {d}", log.id, log.key))
            })?;
        }
        w.apply_platform(&world_support::platform("v2.1.0"));
        let used = w
            .drive_bounded(world_support::BOUND)
            .map_err(|e| TestCaseError::fail(format!("{e}")))?;
        prop_assert!(used <= world_support::BOUND);
        world_support::check_converged(&w)?;
    }
}
