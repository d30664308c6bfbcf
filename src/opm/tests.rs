use serde_json::{Map, json};

use super::platform::{self, Evaluation};
use super::*;
use crate::api::platform::{CatalogPin, Platform, PlatformSpec};

fn export(matches: Value) -> Value {
    json!({
        "instance": {"name": "web", "namespace": "demo", "uuid": "u", "module": "m", "version": "v"},
        "matches": matches,
        "unmatched": [],
        "unhandled": [],
        "duplicates": [],
    })
}

fn cm(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": {"module-instance.opmodel.dev/name": "web"}}})
}

#[test]
fn flavour_by_dependency() {
    assert_eq!(flavour(["opmodel.dev/core@v2", "x.dev/y@v1"]), Flavour::Opm);
    assert_eq!(flavour(["example.com/lib@v0"]), Flavour::Plain);
    assert_eq!(flavour(Vec::<&str>::new()), Flavour::Plain);
    assert_eq!(flavour(["opmodel.dev/core@v0"]), Flavour::CoreV0);
    assert_eq!(
        flavour(["opmodel.dev/core/v1alpha1/modulerelease@v1"]),
        Flavour::CoreV0
    );
    // v2 wins over a leftover v0 dependency.
    assert_eq!(
        flavour(["opmodel.dev/core@v0", "opmodel.dev/core@v2"]),
        Flavour::Opm
    );
    // A look-alike path is not core.
    assert_eq!(flavour(["opmodel.dev/core@v22"]), Flavour::Plain);
    assert!(core_v0_message("m@v0.1.0").contains("core v0 modules must move to core v2"));
}

#[test]
fn one_object_and_a_list_flatten_with_labels_and_component() {
    let e = export(json!({
        "web": {"t.dev/c@v2#Deployment": cm("a")},
        "ports": {"t.dev/c@v2#PortService": [cm("p0"), cm("p1")], "t.dev/c@v2#Empty": []},
    }));
    let plain = read_export(e, "web", "demo").unwrap();
    assert_eq!(plain["kind"], "ModuleRelease");
    assert_eq!(
        plain["metadata"],
        json!({"name": "web", "namespace": "demo"})
    );
    let comps = plain["components"].as_object().unwrap();
    assert_eq!(
        comps["web"]["t.dev/c@v2#Deployment"]["metadata"]["name"],
        "a"
    );
    assert_eq!(
        comps["web"]["t.dev/c@v2#Deployment"]["metadata"]["labels"]["module-instance.opmodel.dev/name"],
        "web"
    );
    let ports = comps["ports"].as_object().unwrap();
    assert_eq!(ports.len(), 2);
    assert_eq!(ports["t.dev/c@v2#PortService/1"]["metadata"]["name"], "p1");
    assert_eq!(components(&plain).len(), 2);
}

#[test]
fn each_verdict_fails_closed_naming_it() {
    let mut e = export(json!({"web": {"t#D": cm("a")}}));
    e["unmatched"] = json!(["db"]);
    e["unhandled"] =
        json!([{"component": "web", "kind": "trait", "fqn": "t.dev/traits@v2#Expose"}]);
    e["duplicates"] =
        json!([{"transformer": "deployment", "catalogs": ["b.dev/c@v2", "a.dev/c@v2"]}]);
    let v = read_export(e, "web", "demo").unwrap_err();
    assert_eq!(v.len(), 3);
    let msg = verdict_message(&v);
    assert!(
        msg.contains(r#"component "db" is matched by no transformer"#),
        "{msg}"
    );
    assert!(msg.contains(r#"trait "t.dev/traits@v2#Expose""#), "{msg}");
    assert!(msg.contains(r#"component "web""#), "{msg}");
    assert!(
        msg.contains("deployment") && msg.contains("a.dev/c@v2, b.dev/c@v2"),
        "{msg}"
    );
}

#[test]
fn non_objects_and_bad_shapes_are_refused() {
    let e = export(json!({"web": {"t#D": "text", "t#L": [cm("a"), 3]}}));
    let v = read_export(e, "web", "demo").unwrap_err();
    assert!(v.iter().all(|v| matches!(v, Verdict::NotAnObject { .. })));
    assert_eq!(v.len(), 2);
    for bad in [
        json!([]),
        json!({"unmatched": []}),
        json!({"matches": [], "unmatched": "x"}),
    ] {
        let v = read_export(bad, "web", "demo").unwrap_err();
        assert!(
            v.iter().any(|v| matches!(v, Verdict::Malformed { .. })),
            "{v:?}"
        );
    }
}

#[test]
fn incomplete_output_is_named_from_cues_error_path() {
    let stderr = "matches.web.\"opmodel.dev/catalogs/opm@v2#DeploymentTransformer\".spec.replicas: incomplete value int:\n    ./glue.cue:12:3\n";
    assert_eq!(
        incomplete_output(stderr),
        Some(Verdict::Incomplete {
            component: "web".into(),
            transformer: "opmodel.dev/catalogs/opm@v2#DeploymentTransformer".into(),
            field: "spec.replicas".into(),
        })
    );
    let quoted = "matches.\"my-comp\".\"a\\\"b\": incomplete value string";
    assert_eq!(
        incomplete_output(quoted),
        Some(Verdict::Incomplete {
            component: "my-comp".into(),
            transformer: "a\"b".into(),
            field: String::new(),
        })
    );
    assert_eq!(
        incomplete_output("values.x: conflicting values 1 and 2"),
        None
    );
    assert_eq!(incomplete_output("matches.web: field not allowed"), None);
}

fn spec(entries: &[(&str, &str, Option<bool>)]) -> PlatformSpec {
    PlatformSpec {
        type_: "kubernetes".into(),
        registry: entries
            .iter()
            .map(|(p, v, e)| {
                (
                    (*p).to_owned(),
                    CatalogPin {
                        version: (*v).to_owned(),
                        enable: *e,
                        filter: None,
                    },
                )
            })
            .collect(),
    }
}

#[test]
fn platform_digest_is_of_the_normal_form() {
    let a = spec(&[("opmodel.dev/catalogs/opm@v2", "2.0.0", None)]);
    let b = spec(&[
        ("opmodel.dev/catalogs/opm@v2", "v2.0.0", Some(true)),
        ("x.dev/off@v1", "v1.0.0", Some(false)),
    ]);
    assert_eq!(platform::digest(&a), platform::digest(&b));
    let c = spec(&[("opmodel.dev/catalogs/opm@v2", "v2.0.1", None)]);
    assert_ne!(platform::digest(&a), platform::digest(&c));
    assert_eq!(platform::normalise(&a).catalogs[0].version, "v2.0.0");
    assert!(crate::digest::is_sha256(&platform::digest(&a)));
}

#[test]
fn platform_status_and_readiness() {
    let now: jiff::Timestamp = "2026-12-04T17:00:00Z".parse().unwrap();
    let mut p = Platform::new(
        "cluster",
        spec(&[("opmodel.dev/catalogs/opm@v2", "2.0.0", None)]),
    );
    p.metadata.generation = Some(3);
    assert!(
        platform::ready(None)
            .unwrap_err()
            .contains("no Platform cluster")
    );
    assert!(platform::ready(Some(&p)).is_err());
    let ok = Evaluation::Resolved {
        transformers: vec![("opmodel.dev/catalogs/opm@v2".into(), 6)],
    };
    p.status = Some(platform::status(&p, &ok, now));
    let s = p.status.as_ref().unwrap();
    assert_eq!(s.observed_generation, 3);
    assert_eq!(s.catalogs[0].transformers, 6);
    assert_eq!(s.catalogs[0].version, "v2.0.0");
    assert_eq!(s.conditions[0].message, "6 transformers from 1 catalog");
    assert_eq!(s.conditions[0].reason, "Succeeded");
    assert_eq!(platform::ready(Some(&p)).unwrap().catalogs.len(), 1);
    // A spec change not yet evaluated is not ready.
    p.metadata.generation = Some(4);
    assert!(
        platform::ready(Some(&p))
            .unwrap_err()
            .contains("evaluated again")
    );
    let failed = Evaluation::Failed {
        message: "module not found".into(),
        transient: false,
    };
    p.status = Some(platform::status(&p, &failed, now));
    let s = p.status.as_ref().unwrap();
    assert!(s.conditions.iter().any(|c| c.type_ == "Stalled"));
    let err = platform::ready(Some(&p)).unwrap_err();
    assert!(
        err.contains("ResolutionFailed") && err.contains("module not found"),
        "{err}"
    );
}

#[test]
fn opm_config_digest_changes_with_the_platform() {
    let plain = crate::digest::module_config(None);
    assert_ne!(
        config_digest(&plain, "sha256:a"),
        config_digest(&plain, "sha256:b")
    );
    assert_ne!(config_digest(&plain, "sha256:a"), plain);
}

mod props {
    use super::*;
    use proptest::prelude::*;

    fn name() -> impl Strategy<Value = String> {
        "[a-z][a-z0-9-]{0,8}"
    }

    proptest! {
        /// Every object the glue produced comes out exactly once under its component, with
        /// nothing added: the flattening neither loses nor invents objects.
        #[test]
        fn flatten_keeps_every_object(
            comps in proptest::collection::btree_map(name(), proptest::collection::btree_map(name(), 0usize..4, 0..4), 0..5),
            single in any::<bool>(),
        ) {
            let mut matches = Map::new();
            let mut expected = 0;
            for (c, ts) in &comps {
                let mut by = Map::new();
                for (t, n) in ts {
                    let out = if single && *n == 1 {
                        cm(&format!("{c}-{t}"))
                    } else {
                        Value::Array((0..*n).map(|i| cm(&format!("{c}-{t}-{i}"))).collect())
                    };
                    expected += n;
                    by.insert(t.clone(), out);
                }
                matches.insert(c.clone(), Value::Object(by));
            }
            let plain = read_export(export(Value::Object(matches)), "r", "ns").unwrap();
            let got: usize = plain["components"].as_object().unwrap().values()
                .map(|o| o.as_object().unwrap().len()).sum();
            prop_assert_eq!(got, expected);
            prop_assert_eq!(components(&plain).len(), comps.len());
        }

        /// Any non-empty verdict list fails the render, whatever the matches hold.
        #[test]
        fn any_verdict_fails_closed(unmatched in proptest::collection::vec(name(), 1..4)) {
            let mut e = export(json!({"web": {"t#D": cm("a")}}));
            e["unmatched"] = json!(unmatched);
            prop_assert!(read_export(e, "r", "ns").is_err());
        }
    }
}
