//! Kubernetes name rules (RFC 1123), checked in the core so a spec field that could never
//! name an object stops the release with a clear reason instead of a confusing API error.

/// Longest DNS-1123 subdomain (the name of most namespaced objects).
pub const DNS1123_SUBDOMAIN_MAX: usize = 253;
/// Longest DNS-1123 label (the name of a namespace).
pub const DNS1123_LABEL_MAX: usize = 63;

/// A DNS-1123 label: lowercase ASCII letters, digits and `-`, starting and ending with a
/// letter or digit, at most 63 characters.
pub fn is_dns1123_label(s: &str) -> bool {
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

#[cfg(test)]
mod tests {
    use super::*;

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
