//! SPEC §30 and §4's OPM rows through the reconcile machine: `PlatformNotReady` is
//! soft-blocked, each verdict is a `RenderFailed` stall naming it, a core v0 module stalls
//! with the move-to-v2 message, and the Platform digest is part of an OPM release's config
//! digest (a Platform change is not a NoOp; the same Platform is).

mod support;

use opm_core::api::ReleaseStatus;
use opm_core::input::{RenderError, RenderOutput};
use opm_core::opm::{self, Verdict};
use opm_core::{Outcome, digest};
use serde_json::json;
use support::*;

fn opm_render(platform: &str) -> Result<RenderOutput, RenderError> {
    Ok(RenderOutput {
        bytes: 0,
        value: exported(json!({})),
        cluster_scoped: vec![],
        platform: platform.into(),
    })
}

#[test]
fn no_ready_platform_is_soft_blocked_with_a_normal_event() {
    let canned = Canned {
        render: Err(RenderError::PlatformNotReady {
            message: "no Platform cluster exists".into(),
        }),
        ..Default::default()
    };
    let r = run_mr(&operator_cfg(), module_release(), &canned);
    assert_soft(
        &r,
        "PlatformNotReady",
        "Render",
        "waiting for Platform cluster: no Platform cluster exists",
        &ReleaseStatus::default(),
    );
    let r = run_rel(&operator_cfg(), release(), &canned);
    assert_eq!(r.reason, "PlatformNotReady");
    assert_eq!(r.requeue, Some(secs(30)));
}

#[test]
fn each_verdict_is_a_render_failed_stall_naming_it() {
    let cases = [
        (
            Verdict::Unmatched {
                component: "db".into(),
            },
            r#"OPM render failed: component "db" is matched by no transformer of the Platform"#,
        ),
        (
            Verdict::Unhandled {
                component: "web".into(),
                kind: "trait".into(),
                fqn: "opm.test/traits@v2#Expose".into(),
            },
            r#"OPM render failed: component "web" has trait "opm.test/traits@v2#Expose" that no matched transformer handles"#,
        ),
        (
            Verdict::Duplicate {
                transformer: "deployment".into(),
                catalogs: vec!["a.test/c@v2".into(), "b.test/c@v2".into()],
            },
            r#"OPM render failed: transformer "deployment" is provided by more than one catalog: a.test/c@v2, b.test/c@v2"#,
        ),
        (
            Verdict::Incomplete {
                component: "web".into(),
                transformer: "c@v2#D".into(),
                field: "spec.replicas".into(),
            },
            r#"OPM render failed: component "web": the output of transformer "c@v2#D" is not concrete at spec.replicas"#,
        ),
    ];
    for (v, msg) in cases {
        let canned = Canned {
            render: Err(RenderError::Verdicts { verdicts: vec![v] }),
            ..Default::default()
        };
        let r = run_mr(&operator_cfg(), module_release(), &canned);
        assert_stall(&r, "RenderFailed", "Render", msg);
    }
}

#[test]
fn a_core_v0_module_stalls_saying_to_move_to_v2() {
    let canned = Canned {
        render: Err(RenderError::CoreV0 {
            what: "module example.com/modules/old@v0@v0.5.1".into(),
        }),
        ..Default::default()
    };
    let r = run_mr(&operator_cfg(), module_release(), &canned);
    assert_stall(
        &r,
        "RenderFailed",
        "Render",
        &opm::core_v0_message("module example.com/modules/old@v0@v0.5.1"),
    );
    assert!(
        r.status.conditions[0]
            .message
            .contains("core v0 modules must move to core v2")
    );
}

#[test]
fn the_platform_digest_is_in_the_config_digest() {
    let first = run_mr(
        &operator_cfg(),
        module_release(),
        &Canned {
            render: opm_render("sha256:aaaa"),
            ..Default::default()
        },
    );
    assert_eq!(first.outcome, Outcome::Applied);
    let plain = digest::module_config(module_release().spec.values.as_ref());
    assert_eq!(
        first.status.last_applied_config_digest,
        opm::config_digest(&plain, "sha256:aaaa")
    );
    let mut mr = module_release();
    mr.status = Some(first.status.clone());
    // Same Platform, same render: NoOp.
    let again = run_mr(
        &operator_cfg(),
        mr.clone(),
        &Canned {
            render: opm_render("sha256:aaaa"),
            ..Default::default()
        },
    );
    assert_eq!(again.outcome, Outcome::NoOp);
    // Another Platform: the same objects are applied again, not a NoOp.
    let changed = run_mr(
        &operator_cfg(),
        mr,
        &Canned {
            render: opm_render("sha256:bbbb"),
            ..Default::default()
        },
    );
    assert_eq!(changed.outcome, Outcome::Applied);
    assert_eq!(
        changed.status.last_applied_config_digest,
        opm::config_digest(&plain, "sha256:bbbb")
    );
}
