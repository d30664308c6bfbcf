//! Digests parse or are refused as the contract says, and every failure maps to its SPEC §4 row.

use super::*;
use crate::effects::local::Verdict;
use opm_core::outcome::FailureClass;

#[test]
fn parses_valid_digest_and_round_trips() {
    let d = Sha256Digest::of(b"");
    let s = d.to_string();
    assert_eq!(
        s,
        "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    );
    assert_eq!(Sha256Digest::parse(&s).unwrap(), d);
}

#[test]
fn other_algorithms_are_invalid_artifacts() {
    let err = Sha256Digest::parse("sha512:abcd").unwrap_err();
    assert!(
        matches!(err, FetchError::UnsupportedDigest { ref algorithm } if algorithm == "sha512")
    );
    assert_eq!(err.class(), FailureClass::Stalled);
    assert_eq!(err.reason(), "InvalidArtifact");
}

#[test]
fn uppercase_short_or_missing_prefix_is_malformed() {
    let upper = format!("sha256:{}", "A".repeat(64));
    let short = format!("sha256:{}", "a".repeat(63));
    let non_hex = format!("sha256:{}", "g".repeat(64));
    for bad in [
        upper.as_str(),
        short.as_str(),
        non_hex.as_str(),
        "e3b0c442",
        "",
    ] {
        let err = Sha256Digest::parse(bad).unwrap_err();
        assert!(
            matches!(err, FetchError::MalformedDigest { .. }),
            "{bad}: {err:?}"
        );
        assert_eq!(err.class(), FailureClass::Stalled);
    }
}

#[test]
fn transient_variants_map_to_fetch_failed() {
    let url = "http://x".to_owned();
    for e in [
        FetchError::Connect {
            url: url.clone(),
            detail: String::new(),
        },
        FetchError::HttpStatus {
            url: url.clone(),
            status: 503,
        },
        FetchError::Timeout {
            url: url.clone(),
            after: Duration::from_secs(1),
        },
        FetchError::Truncated {
            url,
            received: 1,
            detail: String::new(),
        },
        FetchError::DigestMismatch {
            expected: "a".into(),
            actual: "b".into(),
        },
    ] {
        assert_eq!(e.class(), FailureClass::Transient, "{e}");
        assert_eq!(e.reason(), "FetchFailed");
    }
    assert_eq!(
        FetchError::TooLarge { limit: 1 }.reason(),
        "InvalidArtifact"
    );
}

#[tokio::test]
async fn non_http_urls_are_refused_before_any_io() {
    let dir = tempfile::tempdir().unwrap();
    let f = Fetcher::new(FetchConfig::default()).unwrap();
    let digest = Sha256Digest::of(b"x").to_string();
    for url in ["file:///etc/passwd", "ftp://127.0.0.1/a.tgz", "not a url"] {
        let err = f.fetch(url, &digest, dir.path()).await.unwrap_err();
        assert!(
            matches!(err, FetchError::UnsupportedUrl { .. }),
            "{url}: {err:?}"
        );
    }
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}
