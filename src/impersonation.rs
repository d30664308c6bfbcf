//! The effective ServiceAccount (SPEC §15).

use crate::effect::Impersonation;

/// `spec.serviceAccountName`, else `--default-service-account`, else none (the operator's
/// own identity). Empty strings count as unset.
pub fn effective_service_account(spec: Option<&str>, default: Option<&str>) -> Option<String> {
    spec.filter(|s| !s.is_empty())
        .or(default.filter(|s| !s.is_empty()))
        .map(str::to_string)
}

/// The identity requests are sent as: the ServiceAccount in the release's namespace.
pub fn impersonation(namespace: &str, service_account: &str) -> Impersonation {
    Impersonation {
        namespace: namespace.to_string(),
        service_account: service_account.to_string(),
        user: format!("system:serviceaccount:{namespace}:{service_account}"),
        groups: vec![
            "system:serviceaccounts".to_string(),
            format!("system:serviceaccounts:{namespace}"),
            "system:authenticated".to_string(),
        ],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_wins_then_default_then_none() {
        assert_eq!(
            effective_service_account(Some("a"), Some("b")),
            Some("a".into())
        );
        assert_eq!(
            effective_service_account(Some(""), Some("b")),
            Some("b".into())
        );
        assert_eq!(effective_service_account(None, Some("b")), Some("b".into()));
        assert_eq!(effective_service_account(None, None), None);
        assert_eq!(effective_service_account(None, Some("")), None);
    }

    #[test]
    fn user_and_groups() {
        let i = impersonation("demo", "deployer");
        assert_eq!(i.user, "system:serviceaccount:demo:deployer");
        assert_eq!(
            i.groups,
            [
                "system:serviceaccounts",
                "system:serviceaccounts:demo",
                "system:authenticated"
            ]
        );
    }
}
