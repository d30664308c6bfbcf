//! Kubernetes name rules (RFC 1123), checked in the core so a spec field that could never
//! name an object stops the release with a clear reason instead of a confusing API error.

/// Longest DNS-1123 subdomain (the name of most namespaced objects).
pub(crate) const DNS1123_SUBDOMAIN_MAX: usize = 253;
/// Longest DNS-1123 label (the name of a namespace).
pub(crate) const DNS1123_LABEL_MAX: usize = 63;

/// A DNS-1123 label: lowercase ASCII letters, digits and `-`, starting and ending with a
/// letter or digit, at most 63 characters.
pub(crate) fn is_dns1123_label(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= DNS1123_LABEL_MAX
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b[0] != b'-'
        && b[b.len() - 1] != b'-'
}

/// A DNS-1123 subdomain: dot-separated labels, at most 253 characters in all.
pub fn is_dns1123_subdomain(s: &str) -> bool {
    s.len() <= DNS1123_SUBDOMAIN_MAX && s.split('.').all(is_dns1123_label)
}

/// SPEC §24 "names", again in the core for an object stored before the CRD had its
/// patterns (the API server checks only on write): every name a spec gives for an object
/// the operator reads or impersonates must be one, else the release stalls with the reason
/// of the step that would have used it, naming the field. Checked before anything is read.
pub(crate) fn check_spec(
    common: &crate::api::ReleaseCommon,
    values_from: &[crate::api::values_from::ValuesReference],
    secret_ref: Option<&str>,
) -> Result<(), crate::outcome::Failure> {
    use crate::outcome::Failure;
    use crate::reason::Reason;
    let name = |field: String, value: &str, reason: Reason| {
        (!is_dns1123_subdomain(value)).then(|| {
            Failure::stalled(
                reason,
                format!("{field} {value:?} is not a valid name (a DNS-1123 subdomain)"),
            )
        })
    };
    let namespace = |field: String, value: &str, reason: Reason| {
        (!value.is_empty() && !is_dns1123_label(value)).then(|| {
            Failure::stalled(
                reason,
                format!("{field} {value:?} is not a valid namespace (a DNS-1123 label)"),
            )
        })
    };
    let mut bad = Vec::new();
    if let Some(sa) = common.service_account_name.as_deref() {
        bad.push(name(
            "spec.serviceAccountName".into(),
            sa,
            Reason::ImpersonationFailed,
        ));
    }
    for (i, d) in common.depends_on.iter().enumerate() {
        let r = Reason::DependenciesNotReady;
        bad.push(name(format!("spec.dependsOn[{i}].name"), &d.name, r));
        bad.push(namespace(
            format!("spec.dependsOn[{i}].namespace"),
            &d.namespace,
            r,
        ));
    }
    for (i, v) in values_from.iter().enumerate() {
        let f = format!("spec.valuesFrom[{i}].name");
        bad.push(name(f, &v.name, Reason::ValuesNotFound));
    }
    if let Some(s) = secret_ref {
        let f = "spec.module.secretRef.name".to_string();
        bad.push(name(f, s, Reason::ResolutionFailed));
    }
    for (i, h) in common.health_checks.iter().enumerate() {
        let r = Reason::HealthCheckFailed;
        bad.push(name(format!("spec.healthChecks[{i}].name"), &h.name, r));
        bad.push(namespace(
            format!("spec.healthChecks[{i}].namespace"),
            &h.namespace,
            r,
        ));
    }
    match bad.into_iter().flatten().next() {
        Some(f) => Err(f),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spec_stored_before_the_patterns_stalls_naming_the_field() {
        use crate::api::ReleaseCommon;
        use crate::reason::Reason;
        let ok = ReleaseCommon {
            service_account_name: Some("deployer".into()),
            ..Default::default()
        };
        assert!(check_spec(&ok, &[], Some("reg-cred")).is_ok());
        let sa = ReleaseCommon {
            service_account_name: Some("a/../b".into()),
            ..Default::default()
        };
        let f = check_spec(&sa, &[], None).unwrap_err();
        assert_eq!(f.reason, Reason::ImpersonationFailed);
        assert_eq!(
            f.message,
            r#"spec.serviceAccountName "a/../b" is not a valid name (a DNS-1123 subdomain)"#
        );
        let mut dep = ReleaseCommon::default();
        dep.depends_on.push(crate::api::DependencyRef {
            name: "web\u{1b}[2J".into(),
            ..Default::default()
        });
        let f = check_spec(&dep, &[], None).unwrap_err();
        assert_eq!(f.reason, Reason::DependenciesNotReady);
        assert!(
            f.message
                .starts_with("spec.dependsOn[0].name \"web\\u{1b}[2J\""),
            "{}",
            f.message
        );
        let mut hc = ReleaseCommon::default();
        hc.health_checks.push(crate::api::HealthCheckRef {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            name: "x".into(),
            namespace: "Other NS".into(),
        });
        assert_eq!(
            check_spec(&hc, &[], None).unwrap_err().reason,
            Reason::HealthCheckFailed
        );
        let vf = [crate::api::values_from::ValuesReference {
            name: "../etc".into(),
            ..Default::default()
        }];
        let f = check_spec(&ReleaseCommon::default(), &vf, None).unwrap_err();
        assert_eq!(f.reason, Reason::ValuesNotFound);
        let f = check_spec(&ReleaseCommon::default(), &[], Some("Reg Cred")).unwrap_err();
        assert_eq!(f.reason, Reason::ResolutionFailed);
    }

    #[test]
    fn labels_and_subdomains() {
        for ok in ["a", "web", "a-b", "0", "a1"] {
            assert!(is_dns1123_label(ok), "{ok}");
        }
        for bad in [
            "",
            "-a",
            "a-",
            "A",
            "a_b",
            "a.b",
            "ü",
            "a\u{feff}",
            &"a".repeat(64),
        ] {
            assert!(!is_dns1123_label(bad), "{bad}");
        }
        assert!(is_dns1123_label(&"a".repeat(63)));
        for ok in ["a.b", "a-b.c-d", "flux-system", "x"] {
            assert!(is_dns1123_subdomain(ok), "{ok}");
        }
        for bad in [
            "",
            ".",
            "a.",
            ".a",
            "a..b",
            "../etc",
            "Bad_Name",
            "a/b",
            &"a".repeat(254),
        ] {
            assert!(!is_dns1123_subdomain(bad), "{bad}");
        }
        let long = [
            "a".repeat(63),
            "b".repeat(63),
            "c".repeat(63),
            "d".repeat(61),
        ]
        .join(".");
        assert_eq!(long.len(), 253);
        assert!(is_dns1123_subdomain(&long));
    }
}
