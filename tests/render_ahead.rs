//! Issue 18: a ModuleRelease rendered ahead of its attempt is rendered with exactly the
//! request the attempt sends (so the attempt finds it in the render cache), and only
//! releases whose render needs nothing but their spec, in a generation not yet handled,
//! are rendered ahead.

mod support;

use opm_core::api::values_from::{LocalSecretRef, ValuesKind, ValuesReference};
use opm_core::api::{DependencyRef, ReleaseStatus};
use opm_core::effect::{Effect, EffectKind};
use opm_core::render_ahead::render_ahead;
use serde_json::json;
use support::*;

fn attempts_request(mr: opm_core::api::ModuleRelease) -> opm_core::effect::RenderRequest {
    let r = run_mr(&operator_cfg(), mr, &Canned::default());
    match r.find(EffectKind::Render) {
        Some(Effect::Render { request }) => request.clone(),
        other => panic!("no render: {other:?}"),
    }
}

#[test]
fn the_request_rendered_ahead_is_the_attempts_own() {
    let mut with_values = module_release();
    with_values.spec.values = Some(json!({"replicas": 3, "message": "hi"}));
    let mut without_values = module_release();
    without_values.spec.values = None;
    for mr in [module_release(), with_values, without_values] {
        let ahead = render_ahead(&mr).expect("a new release is rendered ahead");
        assert_eq!(ahead, attempts_request(mr));
    }
}

#[test]
fn only_releases_whose_render_needs_nothing_but_their_spec_are_rendered_ahead() {
    let settled = {
        let mut mr = module_release();
        mr.status = Some(ReleaseStatus {
            observed_generation: 1,
            ..Default::default()
        });
        mr
    };
    let edited = {
        let mut mr = settled.clone();
        mr.metadata.generation = Some(2);
        mr
    };
    assert!(
        render_ahead(&settled).is_none(),
        "its generation was handled"
    );
    assert!(
        render_ahead(&edited).is_some(),
        "a new generation is pending"
    );
    let waited = {
        let mut mr = settled.clone();
        let status = mr.status.as_mut().unwrap();
        status.conditions.push(opm_core::api::Condition {
            type_: "Ready".into(),
            status: "False".into(),
            reason: "PlatformNotReady".into(),
            ..Default::default()
        });
        mr
    };
    assert!(
        render_ahead(&waited).is_some(),
        "its generation was handled while the Platform was not ready: it still needs a render"
    );

    let mut values_from = module_release();
    values_from.spec.values_from = vec![ValuesReference {
        kind: ValuesKind::Secret,
        name: "db".into(),
        ..Default::default()
    }];
    let mut credentials = module_release();
    credentials.spec.module.secret_ref = Some(LocalSecretRef {
        name: "regcred".into(),
    });
    let mut depends = module_release();
    depends.spec.common.depends_on = vec![DependencyRef {
        name: "db".into(),
        ..Default::default()
    }];
    let mut suspended = module_release();
    suspended.spec.common.suspend = true;
    let mut deleting = module_release();
    deleting.metadata.deletion_timestamp =
        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(t0()));
    let mut bad_version = module_release();
    bad_version.spec.module.version = "v1.0.0".into();
    let mut nameless = module_release();
    nameless.metadata.name = None;
    for (why, mr) in [
        ("valuesFrom is read first", values_from),
        ("credentials are read first", credentials),
        ("a dependency may stop the attempt", depends),
        ("suspended", suspended),
        ("being deleted", deleting),
        ("the module reference is refused", bad_version),
        ("no name", nameless),
    ] {
        assert!(render_ahead(&mr).is_none(), "{why}");
    }
}
