//! Fuzzes the CUE-value → objects conversion (`render_value::build`, SPEC §18) with generated
//! JSON: mostly release-shaped values with hostile objects (missing or mistyped fields,
//! cluster-scoped kinds with namespaces, operator labels set to other values, duplicates,
//! deep nesting), sometimes any JSON at all. For every input: no panic, the same answer twice,
//! and either stamped objects that keep every promise of §6/§18 or a stall with a reason the
//! status can show (`RenderFailed` or `UnsupportedKind`) and a message.
//!
//! `OPM_FUZZ_CASES` sets the count (default 20 000; `make fuzz` runs a million),
//! `OPM_FUZZ_SEED` the seed.

use std::collections::BTreeSet;
use std::time::Instant;

use arbitrary::{Arbitrary, Unstructured};
use opm_core::constants::labels;
use opm_core::outcome::FailureClass;
use opm_core::render_value::{ReleaseIdentity, build, release_uuid, stages};
use opm_core::{Kind, Reason};
use serde_json::{Map, Value, json};

const API_VERSIONS: [&str; 6] = [
    "v1",
    "apps/v1",
    "",
    "rbac.authorization.k8s.io/v1",
    "a/b/c",
    "example.com/v1",
];
const KINDS: [&str; 8] = [
    "ConfigMap",
    "Namespace",
    "ClusterRole",
    "Secret",
    "",
    "Deployment",
    "Widget",
    "CustomResourceDefinition",
];
const NAMES: [&str; 6] = ["web", "web", "", "..", "a/b", "ü"];
const LABEL_KEYS: [&str; 5] = [
    labels::MANAGED_BY,
    labels::RELEASE_NAME,
    labels::RELEASE_UUID,
    labels::COMPONENT,
    "app",
];

/// Mostly a string from the field's table; one time in eight a wrong type or nothing.
#[derive(Arbitrary, Debug)]
struct Pick(u8);

#[derive(Arbitrary, Debug)]
enum Any {
    Null,
    Bool(bool),
    Num(i64),
    Str(String),
    List(Vec<Any>),
    Obj(Vec<(u8, Any)>),
}

#[derive(Arbitrary, Debug)]
struct Obj {
    api_version: Pick,
    kind: Pick,
    metadata: (u8, Meta),
    extra: Option<Any>,
}

#[derive(Arbitrary, Debug)]
struct Meta {
    name: Pick,
    namespace: Pick,
    labels: Option<Vec<(u8, bool)>>,
    /// One in thirty-two: labels that are not an object.
    labels_not_object: u8,
}

#[derive(Arbitrary, Debug)]
struct Entry {
    /// One entry in sixteen is not an object at all.
    junk: u8,
    object: Obj,
    other: Any,
}

/// Components by generated key, each either not an object (`None`) or entries by key.
type Components = Option<Vec<(u8, Option<Vec<(u8, Entry)>>)>>;

#[derive(Arbitrary, Debug)]
enum Top {
    Release { kind: Pick, components: Components },
    Release2 { kind: Pick, components: Components },
    Release3 { kind: Pick, components: Components },
    Anything(Any),
}

fn any_value(a: &Any, depth: u32) -> Value {
    if depth > 6 {
        return Value::Null;
    }
    match a {
        Any::Null => Value::Null,
        Any::Bool(b) => json!(b),
        Any::Num(n) => json!(n),
        Any::Str(s) => json!(s),
        Any::List(v) => Value::Array(v.iter().take(8).map(|x| any_value(x, depth + 1)).collect()),
        Any::Obj(v) => Value::Object(
            v.iter()
                .take(8)
                .map(|(k, x)| (format!("k{}", k % 6), any_value(x, depth + 1)))
                .collect(),
        ),
    }
}

fn pick(p: &Pick, table: &[&str]) -> Option<Value> {
    let b = p.0;
    if b < 224 {
        return Some(json!(table[usize::from(b) % table.len()]));
    }
    match b % 4 {
        0 => Some(Value::Null),
        1 => Some(json!(i32::from(b))),
        2 => Some(json!(b.is_multiple_of(2))),
        _ => None,
    }
}

fn object(o: &Obj, release: &ReleaseIdentity) -> Value {
    let mut m = Map::new();
    if let Some(v) = pick(&o.api_version, &API_VERSIONS) {
        m.insert("apiVersion".into(), v);
    }
    if let Some(v) = pick(&o.kind, &KINDS) {
        m.insert("kind".into(), v);
    }
    match o.metadata.0 {
        0..=7 => {}
        8..=15 => {
            m.insert("metadata".into(), json!("not an object"));
        }
        _ => {
            let meta = &o.metadata.1;
            let mut md = Map::new();
            if let Some(v) = pick(&meta.name, &NAMES) {
                md.insert("name".into(), v);
            }
            if let Some(v) = pick(&meta.namespace, &["demo", "", "other"]) {
                md.insert("namespace".into(), v);
            }
            if meta.labels_not_object < 8 {
                md.insert("labels".into(), json!(["x"]));
            } else if let Some(ls) = &meta.labels {
                let mut l = Map::new();
                for (k, right) in ls.iter().take(6) {
                    let key = LABEL_KEYS[usize::from(*k) % LABEL_KEYS.len()];
                    // Either the value the operator would stamp anyway, or another one.
                    let value = match (key, right) {
                        (k, true) if k == labels::MANAGED_BY => "opm-controller".to_string(),
                        (k, true) if k == labels::RELEASE_NAME => release.name.clone(),
                        (k, true) if k == labels::RELEASE_UUID => release.uuid.clone(),
                        _ => "someone-else".to_string(),
                    };
                    l.insert(key.into(), json!(value));
                }
                md.insert("labels".into(), Value::Object(l));
            }
            m.insert("metadata".into(), Value::Object(md));
        }
    }
    if let Some(extra) = &o.extra {
        m.insert("data".into(), any_value(extra, 0));
    }
    Value::Object(m)
}

fn exported(top: &Top, release: &ReleaseIdentity) -> (Value, usize) {
    match top {
        Top::Anything(a) => (any_value(a, 0), 0),
        Top::Release { kind, components }
        | Top::Release2 { kind, components }
        | Top::Release3 { kind, components } => {
            let mut m = Map::new();
            if let Some(k) = pick(
                kind,
                &[
                    "ModuleRelease",
                    "ModuleRelease",
                    "ModuleRelease",
                    "Release",
                    "",
                ],
            ) {
                m.insert("kind".into(), k);
            }
            let mut leaves = 0;
            if let Some(cs) = components {
                let mut cm = Map::new();
                for (c, entries) in cs.iter().take(4) {
                    let v = match entries {
                        None => json!(42),
                        Some(es) => {
                            let mut em = Map::new();
                            for (k, e) in es.iter().take(6) {
                                let v = if e.junk < 16 {
                                    any_value(&e.other, 0)
                                } else {
                                    object(&e.object, release)
                                };
                                if em.insert(format!("o{}", k % 8), v).is_none() {
                                    leaves += 1;
                                }
                            }
                            Value::Object(em)
                        }
                    };
                    if let Some(Value::Object(old)) = cm.insert(format!("c{}", c % 3), v) {
                        leaves -= old.len();
                    }
                }
                m.insert("components".into(), Value::Object(cm));
            }
            (Value::Object(m), leaves)
        }
    }
}

/// The promises a successful conversion keeps; `Err` names the one broken.
fn check_ok(
    value: &Value,
    objs: &[opm_core::DesiredObject],
    release: &ReleaseIdentity,
    leaves: usize,
) -> Result<(), String> {
    if objs.len() != leaves {
        return Err(format!("{} objects from {leaves} entries", objs.len()));
    }
    let mut seen = BTreeSet::new();
    for w in objs.windows(2) {
        if w[0].id.identity() > w[1].id.identity() {
            return Err("objects are not sorted".into());
        }
    }
    for o in objs {
        let mut id = o.id.clone();
        id.version.clear();
        if !seen.insert(id) {
            return Err(format!("duplicate {}", o.id.display()));
        }
        let meta = &o.manifest["metadata"];
        let labels_of = |k: &str| meta["labels"][k].as_str().map(str::to_string);
        let wanted = [
            (labels::MANAGED_BY, "opm-controller".to_string()),
            (labels::RELEASE_NAME, release.name.clone()),
            (labels::RELEASE_NAMESPACE, release.namespace.clone()),
            (labels::RELEASE_UUID, release.uuid.clone()),
            (labels::COMPONENT, o.component.clone()),
        ];
        for (k, v) in wanted {
            if labels_of(k).as_deref() != Some(v.as_str()) {
                return Err(format!(
                    "{}: label {k} is {:?}, want {v}",
                    o.id.display(),
                    labels_of(k)
                ));
            }
        }
        if o.manifest["kind"].as_str() != Some(o.id.kind.as_str())
            || meta["name"].as_str() != Some(o.id.name.as_str())
            || o.id.name.is_empty()
        {
            return Err(format!(
                "{}: identity differs from the manifest",
                o.id.display()
            ));
        }
        match meta.get("namespace") {
            None if o.id.namespace.is_empty() => {}
            Some(Value::String(ns)) if *ns == o.id.namespace && !ns.is_empty() => {}
            other => {
                return Err(format!("{}: metadata.namespace {other:?}", o.id.display()));
            }
        }
    }
    let staged: usize = stages(objs).iter().map(|s| s.objects.len()).sum();
    if staged != objs.len() {
        return Err(format!("stages hold {staged} of {} objects", objs.len()));
    }
    if value["kind"] != json!("ModuleRelease") {
        return Err("accepted a value whose kind is not ModuleRelease".into());
    }
    Ok(())
}

#[test]
fn generated_values_convert_or_fail_with_a_reason() {
    let cases: u64 = std::env::var("OPM_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    let mut state: u64 = std::env::var("OPM_FUZZ_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_261_130);
    // splitmix64: a dependency-free byte source for `arbitrary`.
    let mut next = move || {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    let release = ReleaseIdentity {
        kind: Kind::ModuleRelease,
        namespace: "demo".into(),
        name: "web".into(),
        uuid: release_uuid(Kind::ModuleRelease, "demo", "web"),
    };
    #[allow(clippy::disallowed_methods)] // a test's own stopwatch, not the core's clock
    let started = Instant::now();
    let (mut ok, mut by_reason) = (0u64, std::collections::BTreeMap::<Reason, u64>::new());
    let mut buf = vec![0u8; 768];
    for case in 0..cases {
        for chunk in buf.chunks_mut(8) {
            chunk.copy_from_slice(&next().to_le_bytes()[..chunk.len()]);
        }
        let len = 32 + (next() as usize % (buf.len() - 32));
        let Ok(top) = Top::arbitrary(&mut Unstructured::new(&buf[..len])) else {
            continue;
        };
        let (value, leaves) = exported(&top, &release);
        let first = build(&value, &[], &release);
        let again = build(&value, &[], &release);
        assert_eq!(first, again, "case {case}: not deterministic for {value}");
        match first {
            Ok(objs) => {
                ok += 1;
                if let Err(why) = check_ok(&value, &objs, &release, leaves) {
                    panic!("case {case}: {why}\ninput: {value}");
                }
            }
            Err(f) => {
                *by_reason.entry(f.reason).or_default() += 1;
                assert!(
                    matches!(f.reason, Reason::RenderFailed | Reason::UnsupportedKind),
                    "case {case}: reason {} for {value}",
                    f.reason
                );
                assert_eq!(f.class, FailureClass::Stalled, "case {case}");
                assert!(!f.message.is_empty(), "case {case}: empty message");
            }
        }
    }
    let secs = started.elapsed().as_secs_f64();
    eprintln!(
        "fuzz_render_value: {cases} inputs in {secs:.1} s ({:.0}/s), {ok} converted, failed: {by_reason:?}",
        cases as f64 / secs
    );
    assert!(ok > 0, "no input converted");
    assert!(
        by_reason.len() == 2,
        "both failure reasons must be reached: {by_reason:?}"
    );
}
