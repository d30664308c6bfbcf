//! Artifact download against a real HTTP server on 127.0.0.1 (SPEC §17, §4 rows
//! `FetchFailed` / `InvalidArtifact`).

mod support;

use std::time::{Duration, Instant};

use opm_core::outcome::FailureClass;
use opm_operator::artifact::fetch::{FetchConfig, FetchError, Fetcher};
use opm_operator::effects::local::Verdict;
use support::{Route, TestServer, digest_of, names_in, tar_gz};

fn fetcher(timeout: Duration, max_bytes: u64) -> Fetcher {
    Fetcher::new(FetchConfig { timeout, max_bytes }).expect("client")
}

fn sample_tgz() -> Vec<u8> {
    tar_gz(&[support::file("release.cue", b"package release\n")])
}

#[tokio::test]
async fn downloads_and_verifies_tar_gz_and_zip() {
    let tgz = sample_tgz();
    let zip = support::zip_bytes(&[support::ZipEntry::File("release.cue", b"package release\n")]);
    let big: Vec<u8> = (0..300_000u32).flat_map(|i| i.to_le_bytes()).collect();
    let srv = TestServer::start(vec![
        ("/a.tar.gz", Route::Bytes(tgz.clone())),
        ("/a.zip", Route::Bytes(zip.clone())),
        ("/chunked", Route::Chunked(big.clone())),
    ])
    .await;
    let tmp = tempfile::tempdir().unwrap();
    let f = fetcher(Duration::from_secs(10), 64 * 1024 * 1024);
    for (path, bytes) in [("/a.tar.gz", &tgz), ("/a.zip", &zip), ("/chunked", &big)] {
        let got = f
            .fetch(&srv.url(path), &digest_of(bytes), tmp.path())
            .await
            .expect(path);
        assert_eq!(got.size, bytes.len() as u64);
        assert_eq!(got.digest.to_string(), digest_of(bytes));
        assert_eq!(&std::fs::read(got.file.path()).unwrap(), bytes);
    }
    // Every download was a temporary file, removed with its value.
    assert!(names_in(tmp.path()).is_empty());
}

#[tokio::test]
async fn http_errors_are_transient() {
    let srv = TestServer::start(vec![
        ("/500", Route::Status(500)),
        ("/503", Route::Status(503)),
    ])
    .await;
    let tmp = tempfile::tempdir().unwrap();
    let f = fetcher(Duration::from_secs(10), 1024);
    let d = digest_of(b"x");
    for (path, status) in [("/missing", 404), ("/500", 500), ("/503", 503)] {
        let err = f.fetch(&srv.url(path), &d, tmp.path()).await.unwrap_err();
        assert_eq!(
            err,
            FetchError::HttpStatus {
                url: srv.url(path),
                status
            }
        );
        assert_eq!(err.class(), FailureClass::Transient);
        assert_eq!(err.reason(), "FetchFailed");
    }
    assert!(names_in(tmp.path()).is_empty());
}

#[tokio::test]
async fn connection_refused_is_transient() {
    let tmp = tempfile::tempdir().unwrap();
    let url = format!("http://127.0.0.1:{}/a.tar.gz", support::closed_port());
    let err = fetcher(Duration::from_secs(5), 1024)
        .fetch(&url, &digest_of(b"x"), tmp.path())
        .await
        .unwrap_err();
    assert!(matches!(err, FetchError::Connect { .. }), "{err:?}");
    assert_eq!(err.class(), FailureClass::Transient);
}

#[tokio::test]
async fn a_slow_server_times_out() {
    let tgz = sample_tgz();
    let srv = TestServer::start(vec![(
        "/slow",
        Route::Slow(Duration::from_secs(10), tgz.clone()),
    )])
    .await;
    let tmp = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let err = fetcher(Duration::from_millis(300), 1024 * 1024)
        .fetch(&srv.url("/slow"), &digest_of(&tgz), tmp.path())
        .await
        .unwrap_err();
    assert!(matches!(err, FetchError::Timeout { .. }), "{err:?}");
    assert_eq!(err.class(), FailureClass::Transient);
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    assert!(names_in(tmp.path()).is_empty());
}

#[tokio::test]
async fn a_short_body_is_truncated_and_transient() {
    let tgz = sample_tgz();
    let (url, task) = support::serve_short_body(tgz.len() + 500, tgz.clone()).await;
    let tmp = tempfile::tempdir().unwrap();
    let err = fetcher(Duration::from_secs(5), 1024 * 1024)
        .fetch(&url, &digest_of(&tgz), tmp.path())
        .await
        .unwrap_err();
    assert!(matches!(err, FetchError::Truncated { .. }), "{err:?}");
    assert_eq!(err.class(), FailureClass::Transient);
    assert!(names_in(tmp.path()).is_empty());
    task.abort();
}

#[tokio::test]
async fn a_stream_broken_by_the_server_is_truncated() {
    let srv = TestServer::start(vec![("/broken", Route::Broken(vec![7u8; 50_000]))]).await;
    let tmp = tempfile::tempdir().unwrap();
    let err = fetcher(Duration::from_secs(5), 1024 * 1024)
        .fetch(&srv.url("/broken"), &digest_of(b"x"), tmp.path())
        .await
        .unwrap_err();
    assert!(matches!(err, FetchError::Truncated { .. }), "{err:?}");
    assert_eq!(err.class(), FailureClass::Transient);
}

#[tokio::test]
async fn digest_mismatch_is_transient_and_leaves_nothing() {
    let tgz = sample_tgz();
    let srv = TestServer::start(vec![("/a.tar.gz", Route::Bytes(tgz.clone()))]).await;
    let tmp = tempfile::tempdir().unwrap();
    let wrong = digest_of(b"something else");
    let err = fetcher(Duration::from_secs(5), 1024 * 1024)
        .fetch(&srv.url("/a.tar.gz"), &wrong, tmp.path())
        .await
        .unwrap_err();
    assert_eq!(
        err,
        FetchError::DigestMismatch {
            expected: wrong,
            actual: digest_of(&tgz)
        }
    );
    assert_eq!(err.class(), FailureClass::Transient);
    assert!(names_in(tmp.path()).is_empty());
}

#[tokio::test]
async fn unsupported_or_malformed_digests_are_invalid_without_a_request() {
    let tgz = sample_tgz();
    let srv = TestServer::start(vec![("/a.tar.gz", Route::Bytes(tgz.clone()))]).await;
    let tmp = tempfile::tempdir().unwrap();
    let f = fetcher(Duration::from_secs(5), 1024 * 1024);
    let sha512 = format!("sha512:{}", "a".repeat(128));
    let upper = digest_of(&tgz).to_uppercase().replace("SHA256", "sha256");
    for d in [sha512.as_str(), upper.as_str(), "md5:abc"] {
        let err = f
            .fetch(&srv.url("/a.tar.gz"), d, tmp.path())
            .await
            .unwrap_err();
        assert_eq!(err.class(), FailureClass::Stalled, "{d}: {err:?}");
        assert_eq!(err.reason(), "InvalidArtifact");
    }
    assert_eq!(srv.hits("/a.tar.gz"), 0);
}

#[tokio::test]
async fn oversize_downloads_are_invalid_with_or_without_content_length() {
    let big = vec![1u8; 200_000];
    let srv = TestServer::start(vec![
        ("/big", Route::Bytes(big.clone())),
        ("/big-chunked", Route::Chunked(big.clone())),
    ])
    .await;
    let tmp = tempfile::tempdir().unwrap();
    let f = fetcher(Duration::from_secs(5), 100_000);
    for path in ["/big", "/big-chunked"] {
        let err = f
            .fetch(&srv.url(path), &digest_of(&big), tmp.path())
            .await
            .unwrap_err();
        assert_eq!(err, FetchError::TooLarge { limit: 100_000 }, "{path}");
        assert_eq!(err.class(), FailureClass::Stalled);
        assert_eq!(err.reason(), "InvalidArtifact");
    }
    assert!(names_in(tmp.path()).is_empty());
    // Exactly at the cap is accepted.
    let f = fetcher(Duration::from_secs(5), 200_000);
    assert!(
        f.fetch(&srv.url("/big-chunked"), &digest_of(&big), tmp.path())
            .await
            .is_ok()
    );
}

#[tokio::test]
async fn a_body_that_stalls_mid_stream_times_out() {
    let srv = TestServer::start(vec![(
        "/stall",
        Route::Stall(vec![1u8; 10_000], Duration::from_secs(10)),
    )])
    .await;
    let tmp = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let err = fetcher(Duration::from_millis(400), 1024 * 1024)
        .fetch(&srv.url("/stall"), &digest_of(b"x"), tmp.path())
        .await
        .unwrap_err();
    assert!(matches!(err, FetchError::Timeout { .. }), "{err:?}");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    assert!(names_in(tmp.path()).is_empty());
}

#[tokio::test]
async fn redirects_are_followed_only_within_the_same_origin() {
    // Issue 13 item 8: a redirect must not take the operator's GET (from inside the
    // cluster network) to another host: a metadata service, an internal API.
    let tgz = sample_tgz();
    let other = TestServer::start(vec![("/a.tar.gz", Route::Bytes(tgz.clone()))]).await;
    let other_port = other.base.rsplit(':').next().unwrap().to_owned();
    let srv = TestServer::start(vec![
        ("/a.tar.gz", Route::Bytes(tgz.clone())),
        ("/same", Route::Redirect("/a.tar.gz".into())),
        (
            "/cross-host",
            Route::Redirect(format!("http://localhost:{other_port}/a.tar.gz")),
        ),
        ("/cross-port", Route::Redirect(other.url("/a.tar.gz"))),
    ])
    .await;
    let tmp = tempfile::tempdir().unwrap();
    let f = fetcher(Duration::from_secs(10), 1024 * 1024);
    let d = digest_of(&tgz);
    let got = f.fetch(&srv.url("/same"), &d, tmp.path()).await;
    assert!(got.is_ok(), "a same-origin redirect is followed: {got:?}");
    drop(got);
    for path in ["/cross-host", "/cross-port"] {
        let err = f.fetch(&srv.url(path), &d, tmp.path()).await.unwrap_err();
        eprintln!("{path}: {err}");
        assert_eq!(err.reason(), "FetchFailed", "{err:?}");
        assert_eq!(err.class(), FailureClass::Transient);
        let msg = err.to_string();
        assert!(
            msg.contains("redirect") && msg.contains(&other_port) && msg.contains(path),
            "names the redirect and both ends: {msg}"
        );
    }
    assert_eq!(
        other.hits("/a.tar.gz"),
        0,
        "the other host never saw a request"
    );
    assert!(names_in(tmp.path()).is_empty());
}
