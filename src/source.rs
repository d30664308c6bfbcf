//! The per-kind source step (SPEC §8, §16-18): where the configuration comes from. How its
//! failures are classified is [`crate::exits`].

use crate::api::{ModuleRef, SourceRef};
use crate::constants::{FLUX_SOURCE_API_VERSION, SOURCE_KINDS};
use crate::digest;
use crate::effect::SourceLocator;
use crate::outcome::Failure;
use crate::reason::Reason;

/// A spec value for a message: quoted with escapes (a NUL or an RTL mark shows as such) and
/// cut at 64 characters, since it may be anything an older CRD let through.
fn shown(v: &str) -> String {
    let cut: String = v.chars().take(64).collect();
    if cut.len() < v.len() {
        format!("{cut:?}…")
    } else {
        format!("{cut:?}")
    }
}

/// `sourceRef.apiVersion`, `name` and `namespace` must be able to name a Flux source. The CRD
/// refuses other values (SPEC §16); this stalls an object stored before it did, with the
/// field named, rather than sending a request that can only fail.
fn check_source_ref(r: &SourceRef) -> Result<(), Failure> {
    let bad = |field: &str, value: &str, want: &str| {
        Err(Failure::stalled(
            Reason::SourceNotReady,
            format!("spec.sourceRef.{field} {} is invalid: {want}", shown(value)),
        ))
    };
    if !r.api_version.is_empty() && r.api_version != FLUX_SOURCE_API_VERSION {
        return bad(
            "apiVersion",
            &r.api_version,
            "the only supported source API is source.toolkit.fluxcd.io/v1 (or leave it empty)",
        );
    }
    if !crate::names::is_dns1123_subdomain(&r.name) {
        return bad(
            "name",
            &r.name,
            "a source name is a DNS-1123 subdomain (lowercase letters, digits, '-' and '.', at most 253 characters)",
        );
    }
    if !r.namespace.is_empty() && !crate::names::is_dns1123_label(&r.namespace) {
        return bad(
            "namespace",
            &r.namespace,
            "a namespace is a DNS-1123 label (lowercase letters, digits and '-', at most 63 characters)",
        );
    }
    Ok(())
}

/// The Flux source of a Release, checked against kind and cross-namespace policy.
pub(crate) fn locate(
    source_ref: &SourceRef,
    release_namespace: &str,
    allow_cross_namespace: bool,
) -> Result<SourceLocator, Failure> {
    check_source_ref(source_ref)?;
    if !SOURCE_KINDS.contains(&source_ref.kind.as_str()) {
        return Err(Failure::stalled(
            Reason::SourceNotReady,
            format!(
                "unsupported source kind \"{}\" (expected OCIRepository, GitRepository or Bucket)",
                source_ref.kind
            ),
        ));
    }
    let namespace = if source_ref.namespace.is_empty() {
        release_namespace.to_string()
    } else {
        source_ref.namespace.clone()
    };
    if namespace != release_namespace && !allow_cross_namespace {
        return Err(Failure::stalled(
            Reason::CrossNamespaceRefDenied,
            format!(
                "cross-namespace reference to {} {namespace}/{} is not allowed (--allow-cross-namespace-refs is off)",
                source_ref.kind, source_ref.name
            ),
        ));
    }
    let api_version = if source_ref.api_version.is_empty() {
        FLUX_SOURCE_API_VERSION.to_string()
    } else {
        source_ref.api_version.clone()
    };
    Ok(SourceLocator {
        api_version,
        kind: source_ref.kind.clone(),
        namespace,
        name: source_ref.name.clone(),
    })
}

/// `<Kind>/<namespace>/<name>`, as in `status.source.ref`.
pub(crate) fn locator_ref(l: &SourceLocator) -> String {
    format!("{}/{}/{}", l.kind, l.namespace, l.name)
}

/// A digest the artifact can be verified against: `sha256:` + 64 lowercase hex.
pub(crate) fn check_artifact_digest(d: &str) -> Result<(), Failure> {
    if digest::is_sha256(d) {
        Ok(())
    } else {
        Err(Failure::stalled(
            Reason::InvalidArtifact,
            format!(
                "invalid artifact: unsupported digest \"{d}\" (expected sha256:<64 lowercase hex>)"
            ),
        ))
    }
}

/// Catches a module version whose major does not match the path's `@vN` before `cue` runs.
pub(crate) fn check_module(m: &ModuleRef) -> Result<(), Failure> {
    if m.path.is_empty() || m.version.is_empty() {
        return Err(Failure::stalled(
            Reason::ResolutionFailed,
            "spec.module.path and spec.module.version must be set",
        ));
    }
    if let Some((_, major)) = m.path.rsplit_once('@') {
        let version_major = m.version.split('.').next().unwrap_or_default();
        if major != version_major {
            return Err(Failure::stalled(
                Reason::ResolutionFailed,
                format!(
                    "module {}: version {} does not match major version {major}",
                    m.path, m.version
                ),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outcome::FailureClass;

    fn sref(kind: &str, ns: &str) -> SourceRef {
        SourceRef {
            api_version: String::new(),
            kind: kind.into(),
            name: "repo".into(),
            namespace: ns.into(),
        }
    }

    #[test]
    fn locate_checks_kind_and_namespace() {
        let l = locate(&sref("OCIRepository", ""), "demo", false).unwrap();
        assert_eq!(l.namespace, "demo");
        assert_eq!(l.api_version, "source.toolkit.fluxcd.io/v1");
        let e = locate(&sref("HelmRepository", ""), "demo", true).unwrap_err();
        assert_eq!(
            (e.reason, e.class),
            (Reason::SourceNotReady, FailureClass::Stalled)
        );
        let e = locate(&sref("Bucket", "flux-system"), "demo", false).unwrap_err();
        assert_eq!(e.reason, Reason::CrossNamespaceRefDenied);
        assert!(locate(&sref("GitRepository", "flux-system"), "demo", true).is_ok());
    }

    #[test]
    fn source_refs_that_can_name_no_flux_source_stall_with_the_field_named() {
        let with = |f: &dyn Fn(&mut SourceRef)| {
            let mut r = sref("OCIRepository", "");
            f(&mut r);
            locate(&r, "demo", true)
        };
        let mut explicit = sref("OCIRepository", "");
        explicit.api_version = "source.toolkit.fluxcd.io/v1".into();
        assert!(locate(&explicit, "demo", false).is_ok());
        type Edit<'a> = &'a dyn Fn(&mut SourceRef);
        let cases: [(Edit<'_>, &str); 7] = [
            (
                &|r| r.api_version = "v1".into(),
                "spec.sourceRef.apiVersion \"v1\"",
            ),
            (
                &|r| r.api_version = "source.toolkit.fluxcd.io/v1beta2".into(),
                "spec.sourceRef.apiVersion",
            ),
            (&|r| r.name = String::new(), "spec.sourceRef.name \"\""),
            (&|r| r.name = "../../etc".into(), "spec.sourceRef.name"),
            (&|r| r.name = "repo\u{0}x".into(), "\\0"),
            (&|r| r.name = "a".repeat(300), "…"),
            (
                &|r| r.namespace = "Other NS".into(),
                "spec.sourceRef.namespace",
            ),
        ];
        for (edit, want) in cases {
            let e = with(edit).unwrap_err();
            assert_eq!(
                (e.reason, e.class),
                (Reason::SourceNotReady, FailureClass::Stalled)
            );
            assert!(e.message.contains(want), "{want:?} in {}", e.message);
        }
    }

    #[test]
    fn module_major_must_match() {
        let m = |p: &str, v: &str| ModuleRef {
            path: p.into(),
            version: v.into(),
            secret_ref: None,
        };
        assert!(check_module(&m("example.com/modules/web@v0", "v0.2.1")).is_ok());
        assert!(check_module(&m("example.com/modules/web", "v1.0.0")).is_ok());
        let e = check_module(&m("example.com/modules/web@v0", "v1.0.0")).unwrap_err();
        assert_eq!(e.reason, Reason::ResolutionFailed);
    }
}
