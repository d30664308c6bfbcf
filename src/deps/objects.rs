//! `dependsOn` entries naming any object (SPEC §32): the verdict on what the interpreter
//! read of each, under the release's effective identity.
//!
//! In spec order, the first blocker is named:
//! - unreadable because forbidden: the release waits, saying who may not read what (an
//!   RBAC grant fixes it, seen at the next 30 s check);
//! - absent (or its kind not served yet): the release waits;
//! - any other read error: a transient failure, retried with backoff;
//! - with `readyExpr`: ready when it is true; false, or failing on this object (a field not
//!   there yet), the release waits; out of its step or byte budget, a stall naming it;
//! - without: ready when its health (SPEC §26) is `Current` (existence, for kinds without a
//!   status).

use serde_json::Value;

use crate::health::{self, HealthRules, HealthStatus, ReadyExpr, ReadyExprError};
use crate::input::{ApiError, HealthObject};
use crate::outcome::Failure;
use crate::reason::Reason;

use super::ObjectDependency;

/// `Kind ns/name` (or `Kind name` when cluster-scoped) with its API version.
fn describe(d: &ObjectDependency) -> String {
    let id = &d.id;
    if id.namespace.is_empty() {
        format!("{} {} {}", id.api_version(), id.kind, id.name)
    } else {
        format!(
            "{} {} {}/{}",
            id.api_version(),
            id.kind,
            id.namespace,
            id.name
        )
    }
}

/// The verdict on `deps`, given what was read of each (`reads`, matched by position of the
/// same object; `reader` names the identity in messages).
pub(crate) fn evaluate(
    deps: &[ObjectDependency],
    reads: &[HealthObject],
    reader: &str,
) -> Result<(), Failure> {
    for d in deps {
        let what = describe(d);
        let obj = read_object(d, reads, &what, reader)?;
        ready(d, obj, &what)?;
    }
    Ok(())
}

/// The object read for `d`, or why the release cannot go on without it.
fn read_object<'a>(
    d: &ObjectDependency,
    reads: &'a [HealthObject],
    what: &str,
    reader: &str,
) -> Result<&'a Value, Failure> {
    let read = reads
        .iter()
        .find(|r| r.id.kind == d.id.kind && r.id.group == d.id.group && r.id.name == d.id.name);
    match read.map(|r| &r.result) {
        None => Err(Failure::transient(
            Reason::DependenciesNotReady,
            format!("dependency {what} was not read"),
        )),
        Some(Ok(Some(o))) => Ok(o),
        Some(Ok(None) | Err(ApiError::NotFound { .. })) => Err(Failure::soft(
            Reason::DependenciesNotReady,
            format!("waiting for dependency {what}: not found"),
        )),
        Some(Err(ApiError::Forbidden { message })) => Err(Failure::soft(
            Reason::DependenciesNotReady,
            format!(
                "cannot read dependency {what} as {reader}: forbidden ({message}); \
                 grant it get on that kind there, or remove the entry"
            ),
        )),
        Some(Err(e)) => Err(Failure::transient(
            Reason::DependenciesNotReady,
            format!("reading dependency {what} failed: {e}"),
        )),
    }
}

/// Whether `obj` is ready: its `readyExpr` is true, or, without one, its health is `Current`.
fn ready(d: &ObjectDependency, obj: &Value, what: &str) -> Result<(), Failure> {
    match &d.ready_expr {
        Some(src) => {
            let expr = ReadyExpr::compile(src).map_err(|e| {
                Failure::stalled(
                    Reason::DependenciesNotReady,
                    format!("readyExpr of dependency {what} does not compile: {e}"),
                )
            })?;
            match expr.ready(obj) {
                Ok(true) => {}
                Ok(false) => {
                    return Err(Failure::soft(
                        Reason::DependenciesNotReady,
                        format!("waiting for dependency {what}: readyExpr is false"),
                    ));
                }
                Err(ReadyExprError::Failed(e)) => {
                    return Err(Failure::soft(
                        Reason::DependenciesNotReady,
                        format!("waiting for dependency {what}: readyExpr: {e}"),
                    ));
                }
                Err(ReadyExprError::Stopped { steps, bytes }) => {
                    return Err(Failure::stalled(
                        Reason::DependenciesNotReady,
                        format!(
                            "readyExpr of dependency {what} stopped after {steps} steps / \
                             {bytes} bytes (the budget of one evaluation is {} steps and \
                             {} bytes); walk fewer or shorter lists, build fewer strings",
                            health::CEL_MAX_STEPS,
                            health::CEL_MAX_BYTES
                        ),
                    ));
                }
            }
        }
        None => {
            let a = health::assess(obj, &HealthRules::default());
            if a.status != HealthStatus::Current {
                return Err(Failure::soft(
                    Reason::DependenciesNotReady,
                    format!(
                        "waiting for dependency {what}: {} ({})",
                        a.status.as_str(),
                        a.message
                    ),
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::object::ResourceId;
    use crate::outcome::FailureClass;
    use serde_json::{Value, json};

    fn dep(api: &str, kind: &str, name: &str, expr: Option<&str>) -> ObjectDependency {
        let (group, version) = api.rsplit_once('/').unwrap_or(("", api));
        ObjectDependency {
            id: ResourceId {
                group: group.into(),
                kind: kind.into(),
                namespace: "demo".into(),
                name: name.into(),
                version: version.into(),
            },
            ready_expr: expr.map(str::to_string),
        }
    }

    fn read(d: &ObjectDependency, r: Result<Option<Value>, ApiError>) -> HealthObject {
        HealthObject {
            id: d.id.clone(),
            result: r,
            pods: vec![],
        }
    }

    const SA: &str = "system:serviceaccount:demo:deployer";

    #[test]
    fn existence_and_health_without_an_expression() {
        let secret = dep("v1", "Secret", "creds", None);
        let f = evaluate(
            std::slice::from_ref(&secret),
            &[read(&secret, Ok(None))],
            SA,
        )
        .unwrap_err();
        assert_eq!(f.class, FailureClass::SoftBlocked);
        assert_eq!(
            f.message,
            "waiting for dependency v1 Secret demo/creds: not found"
        );
        let there = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "creds"}});
        assert!(
            evaluate(
                std::slice::from_ref(&secret),
                &[read(&secret, Ok(Some(there)))],
                SA
            )
            .is_ok()
        );

        let crd = dep(
            "apiextensions.k8s.io/v1",
            "CustomResourceDefinition",
            "dbs.example.com",
            None,
        );
        let pending = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "dbs.example.com"},
            "status": {"conditions": [{"type": "Established", "status": "False"}]}});
        let f = evaluate(
            std::slice::from_ref(&crd),
            &[read(&crd, Ok(Some(pending)))],
            SA,
        )
        .unwrap_err();
        assert!(f.message.starts_with("waiting for dependency apiextensions.k8s.io/v1 CustomResourceDefinition demo/dbs.example.com: InProgress"), "{}", f.message);
        let established = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "dbs.example.com"},
            "status": {"conditions": [{"type": "Established", "status": "True"}]}});
        assert!(
            evaluate(
                std::slice::from_ref(&crd),
                &[read(&crd, Ok(Some(established)))],
                SA
            )
            .is_ok()
        );
    }

    #[test]
    fn ready_expr_decides_with_self_and_dep() {
        let db = dep(
            "example.com/v1",
            "Database",
            "main",
            Some("dep.status.phase == 'Ready' && self.spec.size > 1"),
        );
        let obj = |phase: &str| json!({"spec": {"size": 2}, "status": {"phase": phase}});
        assert!(
            evaluate(
                std::slice::from_ref(&db),
                &[read(&db, Ok(Some(obj("Ready"))))],
                SA
            )
            .is_ok()
        );
        let f = evaluate(
            std::slice::from_ref(&db),
            &[read(&db, Ok(Some(obj("Creating"))))],
            SA,
        )
        .unwrap_err();
        assert_eq!(f.class, FailureClass::SoftBlocked);
        assert!(f.message.ends_with("readyExpr is false"), "{}", f.message);
        // No status yet: waits, saying why.
        let f = evaluate(
            std::slice::from_ref(&db),
            &[read(&db, Ok(Some(json!({"spec": {"size": 2}}))))],
            SA,
        )
        .unwrap_err();
        assert_eq!(f.class, FailureClass::SoftBlocked);
        assert!(
            f.message.contains("readyExpr: no such key"),
            "{}",
            f.message
        );
    }

    #[test]
    fn a_hostile_expression_is_stopped_and_stalls() {
        let src = "[1,2,3,4,5,6,7,8,9,10].all(a, [1,2,3,4,5,6,7,8,9,10].all(b, \
                   [1,2,3,4,5,6,7,8,9,10].all(c, [1,2,3,4,5,6,7,8,9,10].all(d, \
                   [1,2,3,4,5,6,7,8,9,10].all(e, [1,2,3,4,5,6,7,8,9,10].all(f, \
                   [1,2,3,4,5,6,7,8,9,10].all(g, a + b + c + d + e + f + g > 0)))))))";
        let d = dep("v1", "ConfigMap", "x", Some(src));
        let f = evaluate(
            std::slice::from_ref(&d),
            &[read(&d, Ok(Some(json!({}))))],
            SA,
        )
        .unwrap_err();
        assert_eq!(f.class, FailureClass::Stalled, "{}", f.message);
        assert!(
            f.message
                .starts_with("readyExpr of dependency v1 ConfigMap demo/x stopped after"),
            "{}",
            f.message
        );
    }

    #[test]
    fn forbidden_and_failed_reads() {
        let d = dep("v1", "Secret", "creds", None);
        let forbidden = ApiError::Forbidden {
            message: "secrets \"creds\" is forbidden".into(),
        };
        let f = evaluate(std::slice::from_ref(&d), &[read(&d, Err(forbidden))], SA).unwrap_err();
        assert_eq!(f.class, FailureClass::SoftBlocked);
        assert!(f.message.starts_with("cannot read dependency v1 Secret demo/creds as system:serviceaccount:demo:deployer: forbidden"), "{}", f.message);
        let down = ApiError::Unavailable {
            message: "etcd".into(),
        };
        let f = evaluate(std::slice::from_ref(&d), &[read(&d, Err(down))], SA).unwrap_err();
        assert_eq!(f.class, FailureClass::Transient);
    }
}
