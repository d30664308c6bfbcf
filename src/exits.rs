//! SPEC §4's exit table, row by row in the section's order: which reason, class and message
//! each failed exit gets, and where that is decided. A reader can hold this beside SPEC §4.
//!
//! The classifiers of errors that arrive from effects live here; a row decided while
//! checking a spec or a rendered object is decided where that check runs, named below.
//!
//! | SPEC §4 row | reason, class | decided by |
//! |---|---|---|
//! | dependency not ready / not found | `DependenciesNotReady`, soft | [`crate::deps::evaluate`] |
//! | dependency cycle or self-reference | `DependenciesNotReady`, stalled | [`crate::deps::precheck`], [`crate::deps::find_cycle`] |
//! | cross-namespace ref not allowed | `CrossNamespaceRefDenied`, stalled | [`crate::deps::precheck`], `crate::source::locate` |
//! | source kind unsupported / source not found | `SourceNotReady`, stalled | `crate::source::locate`, [`source_failure`] |
//! | source not ready / no artifact | `SourceNotReady`, soft | [`source_failure`] |
//! | source read failed (API) | `SourceNotReady`, transient | [`source_failure`] |
//! | artifact download failed, HTTP ≠ 200, timeout, digest mismatch | `FetchFailed`, transient | [`fetch_failure`] |
//! | artifact content invalid | `InvalidArtifact`, stalled | [`fetch_failure`], `crate::source::check_artifact_digest` |
//! | `spec.path` missing / not a dir / escapes | `PathNotFound`, stalled | [`render_failure`] |
//! | no `release.cue` at path | `ReleaseFileNotFound`, stalled | [`render_failure`] |
//! | exported kind ≠ `ModuleRelease` or missing | `UnsupportedKind`, stalled | [`render_failure`], [`crate::render_value::build`] |
//! | module/dependency cannot be fetched from the registry | `ResolutionFailed`, stalled | [`render_failure`], `crate::source::check_module`, [`crate::values_from::credentials`] |
//! | CUE evaluation error, values invalid, malformed objects | `RenderFailed`, stalled | [`render_failure`], [`crate::render_value::build`], [`crate::policy::extract`] |
//! | registry unreachable / `cue` timed out | `RenderFailed`, transient | [`render_failure`] |
//! | no effective ServiceAccount and no `--allow-operator-identity` | `ImpersonationFailed`, stalled | the machine's impersonation step (`machine/flow.rs`) |
//! | effective ServiceAccount missing (apply path) | `ImpersonationFailed`, stalled | [`service_account`] |
//! | `valuesFrom` object or key missing and not `optional` | `ValuesNotFound`, stalled | [`crate::values_from::compose`] |
//! | rendered object outside the namespace, or cluster-scoped, as the operator | `ApplyFailed`, stalled | [`crate::impersonation::check_operator_identity`] |
//! | object owned by another release, or pre-existing | `OwnershipConflict`, stalled | [`crate::ownership::decide`] |
//! | render over `--max-render-objects` / `--max-render-bytes` | `RenderFailed`, stalled | [`crate::render_value::check_caps`], [`render_failure`] |
//! | apply/prune/dry-run Forbidden while impersonating | `ImpersonationFailed`, stalled | [`apply_failure`], [`prune_failure`], [`crate::ownership::decide`] |
//! | apply: 422 Invalid or field conflict | `ApplyFailed`, stalled | [`apply_failure`] |
//! | apply: 5xx, 429, timeout, connection, namespace not found yet | `ApplyFailed`, transient | [`apply_failure`] |
//! | prune failed (any object) | `PruneFailed`, transient | [`prune_failure`] |
//! | attempt exceeded `timeout` | `ReconcileTimeout`, transient | [`timeout`] |
//! | health Failed, or not all healthy within `timeout` | `HealthCheckFailed`, transient | the machine's health wait (`machine/health_wait.rs`) |
//!
//! The remaining rows (waiting for health, no-op, applied, applied and pruned) are not
//! failures: the machine's exits (`machine/exit.rs`) write them. Requeue by class is
//! [`Failure::requeue`]; the event action of each reason is [`Reason::action`].

use std::time::Duration;

use crate::effect::SourceLocator;
use crate::input::{ApiError, FetchError, RenderError, SourceError};
use crate::object::ResourceId;
use crate::outcome::Failure;
use crate::reason::Reason;

/// Classifies a failed source read (SPEC §4 rows "source …").
pub fn source_failure(err: &SourceError, l: &SourceLocator) -> Failure {
    let what = format!("source {} {}/{}", l.kind, l.namespace, l.name);
    match err {
        SourceError::NotFound => {
            Failure::stalled(Reason::SourceNotReady, format!("{what} not found"))
        }
        SourceError::NotReady { message } if message.is_empty() => {
            Failure::soft(Reason::SourceNotReady, format!("{what} is not ready"))
        }
        SourceError::NotReady { message } => Failure::soft(
            Reason::SourceNotReady,
            format!("{what} is not ready: {message}"),
        ),
        SourceError::NoArtifact => {
            Failure::soft(Reason::SourceNotReady, format!("{what} has no artifact"))
        }
        SourceError::Api { error } => Failure::transient(
            Reason::SourceNotReady,
            format!("reading {what} failed: {error}"),
        ),
    }
}

/// Classifies a failed download/extraction (SPEC §17).
pub fn fetch_failure(err: &FetchError) -> Failure {
    match err {
        FetchError::Http { .. }
        | FetchError::Timeout
        | FetchError::Connection { .. }
        | FetchError::DigestMismatch { .. }
        | FetchError::Io { .. } => Failure::transient(
            Reason::FetchFailed,
            format!("artifact download failed: {err}"),
        ),
        FetchError::InvalidArtifact { .. } | FetchError::TooLarge { .. } => {
            Failure::stalled(Reason::InvalidArtifact, format!("invalid artifact: {err}"))
        }
    }
}

/// Classifies a failed render (SPEC §4 render rows, DESIGN §3).
pub fn render_failure(err: &RenderError) -> Failure {
    match err {
        RenderError::Resolution { message } => {
            Failure::stalled(Reason::ResolutionFailed, message.clone())
        }
        RenderError::Evaluation { message } => {
            Failure::stalled(Reason::RenderFailed, message.clone())
        }
        RenderError::UnsupportedKind { kind: Some(k) } => Failure::stalled(
            Reason::UnsupportedKind,
            format!("exported kind \"{k}\" is not supported (expected ModuleRelease)"),
        ),
        RenderError::UnsupportedKind { kind: None } => Failure::stalled(
            Reason::UnsupportedKind,
            "exported value has no kind (expected ModuleRelease)",
        ),
        RenderError::PathNotFound { message } => {
            Failure::stalled(Reason::PathNotFound, message.clone())
        }
        RenderError::ReleaseFileNotFound { message } => {
            Failure::stalled(Reason::ReleaseFileNotFound, message.clone())
        }
        RenderError::InvalidArtifact { message } => Failure::stalled(
            Reason::InvalidArtifact,
            format!("invalid artifact: {message}"),
        ),
        RenderError::Timeout { message }
        | RenderError::RegistryUnreachable { message }
        | RenderError::Io { message } => Failure::transient(Reason::RenderFailed, message.clone()),
        RenderError::TooLarge { .. } => Failure::stalled(
            Reason::RenderFailed,
            crate::render_value::too_large_message(err),
        ),
        RenderError::Refetch { error } => fetch_failure(error),
        RenderError::PlatformNotReady { message } => Failure::soft(
            Reason::PlatformNotReady,
            format!("waiting for Platform cluster: {message}"),
        ),
        RenderError::CoreV0 { what } => {
            Failure::stalled(Reason::RenderFailed, crate::opm::core_v0_message(what))
        }
        RenderError::Verdicts { verdicts } => {
            Failure::stalled(Reason::RenderFailed, crate::opm::verdict_message(verdicts))
        }
        RenderError::OutOfMemory { limit_bytes } => Failure::stalled(
            Reason::RenderFailed,
            format!(
                "cue ran out of memory: the limit of one render is {} (--render-memory-limit)",
                crate::render_value::human_bytes(*limit_bytes)
            ),
        ),
    }
}

/// Classifies a failed apply (SPEC §4 apply rows): `failures` are the objects the server
/// refused; `reported` of `expected` objects came back at all. Forbidden while impersonating
/// stalls on the identity; 422 or a field conflict needs a change; anything else is retried.
pub fn apply_failure(
    failures: &[(&ResourceId, &ApiError)],
    reported: usize,
    expected: usize,
    impersonating: Option<&str>,
) -> Failure {
    if failures.is_empty() {
        return Failure::transient(
            Reason::ApplyFailed,
            format!("apply reported {reported} of {expected} objects"),
        );
    }
    let described: Vec<String> = failures
        .iter()
        .map(|(id, e)| format!("{}: {e}", id.display()))
        .collect();
    let detail = described.join("; ");
    let forbidden = failures
        .iter()
        .any(|(_, e)| matches!(e, ApiError::Forbidden { .. }));
    if let (true, Some(user)) = (forbidden, impersonating) {
        Failure::stalled(
            Reason::ImpersonationFailed,
            format!("apply forbidden while impersonating {user}: {detail}"),
        )
    } else if failures
        .iter()
        .any(|(_, e)| matches!(e, ApiError::Invalid { .. } | ApiError::Conflict { .. }))
    {
        Failure::stalled(Reason::ApplyFailed, format!("apply failed: {detail}"))
    } else {
        Failure::transient(Reason::ApplyFailed, format!("apply failed: {detail}"))
    }
}

/// Classifies a failed prune (SPEC §4, §9): `message` lists each failure. Forbidden while
/// impersonating stalls on the identity; any other error is retried.
pub fn prune_failure(message: String, forbidden: bool, impersonating: Option<&str>) -> Failure {
    match (impersonating, forbidden) {
        (Some(user), true) => Failure::stalled(
            Reason::ImpersonationFailed,
            format!("prune forbidden while impersonating {user}: {message}"),
        ),
        _ => Failure::transient(Reason::PruneFailed, message),
    }
}

/// The effective ServiceAccount `sa` of namespace `ns` must exist (SPEC §4, §15): missing
/// stalls until it appears, a failed read is retried.
pub fn service_account(found: &Result<bool, ApiError>, ns: &str, sa: &str) -> Result<(), Failure> {
    match found {
        Ok(true) => Ok(()),
        Ok(false) => Err(Failure::stalled(
            Reason::ImpersonationFailed,
            format!("ServiceAccount \"{sa}\" not found in namespace \"{ns}\""),
        )),
        Err(e) => Err(Failure::transient(
            Reason::ImpersonationFailed,
            format!("reading ServiceAccount {ns}/{sa} failed: {e}"),
        )),
    }
}

/// The attempt ran past `spec.timeout` (SPEC §4): retried with backoff.
pub fn timeout(limit: Duration) -> Failure {
    Failure::transient(
        Reason::ReconcileTimeout,
        format!(
            "reconcile attempt exceeded timeout of {}",
            crate::duration::format(limit)
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outcome::FailureClass;

    #[test]
    fn render_and_fetch_classification() {
        let msg = || "m".to_string();
        let cases = [
            (
                render_failure(&RenderError::Resolution { message: msg() }),
                RESOLUTION,
                FailureClass::Stalled,
            ),
            (
                render_failure(&RenderError::Evaluation { message: msg() }),
                RENDER,
                FailureClass::Stalled,
            ),
            (
                render_failure(&RenderError::Timeout { message: msg() }),
                RENDER,
                FailureClass::Transient,
            ),
            (
                render_failure(&RenderError::RegistryUnreachable { message: msg() }),
                RENDER,
                FailureClass::Transient,
            ),
            (
                render_failure(&RenderError::PathNotFound { message: msg() }),
                Reason::PathNotFound,
                FailureClass::Stalled,
            ),
            (
                fetch_failure(&FetchError::Http { status: 503 }),
                Reason::FetchFailed,
                FailureClass::Transient,
            ),
            (
                fetch_failure(&FetchError::TooLarge { message: msg() }),
                Reason::InvalidArtifact,
                FailureClass::Stalled,
            ),
        ];
        for (f, reason, class) in cases {
            assert_eq!((f.reason, f.class), (reason, class));
        }
    }
    const RESOLUTION: Reason = Reason::ResolutionFailed;
    const RENDER: Reason = Reason::RenderFailed;

    #[test]
    fn apply_and_prune_classification() {
        let id = ResourceId {
            group: "apps".into(),
            version: "v1".into(),
            kind: "Deployment".into(),
            namespace: "demo".into(),
            name: "web".into(),
        };
        let forbidden = ApiError::Forbidden {
            message: "no".into(),
        };
        let invalid = ApiError::Invalid {
            message: "bad".into(),
        };
        let down = ApiError::Unavailable {
            message: "503".into(),
        };
        let class = |f: Failure| (f.reason, f.class);
        assert_eq!(
            class(apply_failure(&[], 1, 2, None)),
            (Reason::ApplyFailed, FailureClass::Transient)
        );
        assert_eq!(
            class(apply_failure(&[(&id, &forbidden)], 1, 1, Some("sa"))),
            (Reason::ImpersonationFailed, FailureClass::Stalled)
        );
        assert_eq!(
            class(apply_failure(&[(&id, &forbidden)], 1, 1, None)),
            (Reason::ApplyFailed, FailureClass::Transient)
        );
        assert_eq!(
            class(apply_failure(&[(&id, &down), (&id, &invalid)], 2, 2, None)),
            (Reason::ApplyFailed, FailureClass::Stalled)
        );
        assert_eq!(
            class(apply_failure(&[(&id, &down)], 1, 1, Some("sa"))),
            (Reason::ApplyFailed, FailureClass::Transient)
        );
        assert_eq!(
            class(prune_failure("m".into(), true, Some("sa"))),
            (Reason::ImpersonationFailed, FailureClass::Stalled)
        );
        assert_eq!(
            class(prune_failure("m".into(), true, None)),
            (Reason::PruneFailed, FailureClass::Transient)
        );
        assert_eq!(
            class(timeout(Duration::from_secs(60))),
            (Reason::ReconcileTimeout, FailureClass::Transient)
        );
    }
}
