//! The artifact cache against a real HTTP server: one download per digest, LRU bounds, handles
//! that outlive eviction, failures not cached, temporary files removed on every path.

mod support;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use opm_core::outcome::FailureClass;
use opm_operator::artifact::artifact_cache::{ArtifactCache, ArtifactError, CacheLimits};
use opm_operator::artifact::extract::{ExtractError, ExtractLimits};
use opm_operator::artifact::fetch::{FetchConfig, FetchError, Fetcher};
use opm_operator::effects::local::Verdict;
use support::{Route, TestServer, digest_of, file, names_in, symlink, tar_gz};

fn cache(dir: &std::path::Path, limits: CacheLimits) -> ArtifactCache {
    let fetcher = Fetcher::new(FetchConfig {
        timeout: Duration::from_secs(10),
        max_bytes: 1 << 20,
    })
    .unwrap();
    ArtifactCache::new(dir, fetcher, ExtractLimits::default(), limits).unwrap()
}

fn artifact(n: u8) -> Vec<u8> {
    tar_gz(&[file("release.cue", &vec![b'a' + n; 1000])])
}

#[tokio::test]
async fn concurrent_requests_for_one_digest_download_once() {
    let a = artifact(0);
    let srv = TestServer::start(vec![(
        "/a",
        Route::Slow(Duration::from_millis(200), a.clone()),
    )])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let c = Arc::new(cache(dir.path(), CacheLimits::default()));
    let url = srv.url("/a");
    let d = digest_of(&a);
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let (c, url, d) = (c.clone(), url.clone(), d.clone());
            tokio::spawn(async move { c.get(&url, &d).await })
        })
        .collect();
    let mut roots = Vec::new();
    for t in tasks {
        let h = t.await.unwrap().expect("artifact");
        assert_eq!(
            std::fs::read(h.root().join("release.cue")).unwrap(),
            vec![b'a'; 1000]
        );
        roots.push(h.root().to_path_buf());
    }
    roots.dedup();
    assert_eq!(roots.len(), 1, "all callers share one extracted tree");
    assert_eq!(srv.hits("/a"), 1);
    assert_eq!(c.stats().downloads.load(Ordering::Relaxed), 1);
    assert_eq!(
        c.stats().bytes_downloaded.load(Ordering::Relaxed),
        a.len() as u64
    );
    // A later request is a hit, with no HTTP request at all.
    c.get(&url, &d).await.unwrap();
    assert_eq!(srv.hits("/a"), 1);
    assert!(c.stats().hits.load(Ordering::Relaxed) >= 1);
    assert!(names_in(&dir.path().join("downloads")).is_empty());
}

#[tokio::test]
async fn least_recently_used_entries_are_evicted_but_live_handles_keep_their_files() {
    let arts: Vec<Vec<u8>> = (0..3).map(artifact).collect();
    let srv = TestServer::start(
        arts.iter()
            .enumerate()
            .map(|(i, a)| (["/0", "/1", "/2"][i], Route::Bytes(a.clone())))
            .collect(),
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let c = cache(
        dir.path(),
        CacheLimits {
            max_entries: 2,
            max_bytes: 1 << 30,
        },
    );
    let urls: Vec<String> = ["/0", "/1", "/2"].iter().map(|p| srv.url(p)).collect();
    let digests: Vec<String> = arts.iter().map(|a| digest_of(a)).collect();
    let get = |i: usize| c.get(&urls[i], &digests[i]);
    let h0 = get(0).await.unwrap();
    get(1).await.unwrap();
    get(0).await.unwrap(); // 0 is now more recent than 1
    get(2).await.unwrap(); // evicts 1
    assert_eq!(c.usage().0, 2);
    assert_eq!(c.stats().evictions.load(Ordering::Relaxed), 1);
    get(0).await.unwrap();
    assert_eq!(srv.hits("/0"), 1, "0 stayed cached");
    get(1).await.unwrap();
    assert_eq!(srv.hits("/1"), 2, "1 was evicted and downloaded again");
    // 1 came back and pushed out 2 (0 was used more recently), then 0 is evicted by 2 coming back...
    get(2).await.unwrap();
    assert_eq!(srv.hits("/2"), 2);
    // ...while `h0`, taken before, still has its files.
    assert!(h0.root().join("release.cue").is_file());
    let root0 = h0.root().to_path_buf();
    drop(h0);
    assert!(!root0.exists(), "an evicted tree goes with its last handle");
    // Only the cached trees are on disk.
    assert_eq!(names_in(&dir.path().join("artifacts")).len(), 2);
}

#[tokio::test]
async fn the_byte_bound_evicts_too() {
    let arts: Vec<Vec<u8>> = (0..3).map(artifact).collect();
    let srv = TestServer::start(
        arts.iter()
            .enumerate()
            .map(|(i, a)| (["/0", "/1", "/2"][i], Route::Bytes(a.clone())))
            .collect(),
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let c = cache(
        dir.path(),
        CacheLimits {
            max_entries: 100,
            max_bytes: 2500,
        },
    );
    for (i, a) in arts.iter().enumerate() {
        c.get(&srv.url(["/0", "/1", "/2"][i]), &digest_of(a))
            .await
            .unwrap();
    }
    assert_eq!(c.usage(), (2, 2000));
}

#[tokio::test]
async fn failures_are_classified_not_cached_and_leave_no_files() {
    let good = artifact(0);
    let hostile = tar_gz(&[symlink("l", "../../etc")]);
    let srv = TestServer::start(vec![
        ("/good", Route::Bytes(good.clone())),
        ("/hostile", Route::Bytes(hostile.clone())),
        ("/down", Route::Status(503)),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let c = cache(dir.path(), CacheLimits::default());

    let err = c
        .get(&srv.url("/hostile"), &digest_of(&hostile))
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            ArtifactError::Extract(ExtractError::EscapingLink { .. })
        ),
        "{err:?}"
    );
    assert_eq!(
        (err.class(), err.reason()),
        (FailureClass::Stalled, opm_core::Reason::InvalidArtifact)
    );

    let err = c
        .get(&srv.url("/down"), &digest_of(&good))
        .await
        .unwrap_err();
    assert!(matches!(
        err,
        ArtifactError::Fetch(FetchError::HttpStatus { status: 503, .. })
    ));
    assert_eq!(
        (err.class(), err.reason()),
        (FailureClass::Transient, opm_core::Reason::FetchFailed)
    );

    let err = c
        .get(&srv.url("/hostile"), &digest_of(&good))
        .await
        .unwrap_err();
    assert!(matches!(
        err,
        ArtifactError::Fetch(FetchError::DigestMismatch { .. })
    ));

    // The digest that failed is fetched again on the next request and now succeeds.
    c.get(&srv.url("/good"), &digest_of(&good)).await.unwrap();
    assert_eq!(srv.hits("/hostile"), 2);
    assert_eq!(c.usage().0, 1);
    assert!(names_in(&dir.path().join("downloads")).is_empty());
    assert_eq!(names_in(&dir.path().join("artifacts")).len(), 1);
}

#[tokio::test]
async fn leftovers_of_an_earlier_process_are_removed() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("artifacts/stale")).unwrap();
    std::fs::create_dir_all(dir.path().join("downloads")).unwrap();
    std::fs::write(dir.path().join("downloads/partial"), b"x").unwrap();
    let _c = cache(dir.path(), CacheLimits::default());
    assert!(names_in(&dir.path().join("artifacts")).is_empty());
    assert!(names_in(&dir.path().join("downloads")).is_empty());
}

/// Issue 31 item 9: a digest is not a capability. Tenant A's private artifact is cached;
/// tenant B's source status names A's digest with B's own URL (a forged status). B is not
/// served A's tree from the cache: the cache asks B's URL, which does not serve those
/// bytes, and the digest check refuses. A's URL still hits.
#[tokio::test]
async fn a_digest_alone_never_serves_another_sources_artifact() {
    let private = tar_gz(&[file("release.cue", b"password: \"tenant-a-only\"\n")]);
    let other = artifact(1);
    let srv = TestServer::start(vec![
        (
            "/gitrepository/team-a/app/latest.tar.gz",
            Route::Bytes(private.clone()),
        ),
        (
            "/gitrepository/team-b/forged/latest.tar.gz",
            Route::Bytes(other),
        ),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let c = cache(dir.path(), CacheLimits::default());
    let a_url = srv.url("/gitrepository/team-a/app/latest.tar.gz");
    let b_url = srv.url("/gitrepository/team-b/forged/latest.tar.gz");
    let d = digest_of(&private);
    c.get(&a_url, &d).await.unwrap();
    let err = c.get(&b_url, &d).await.unwrap_err();
    assert!(
        matches!(err, ArtifactError::Fetch(FetchError::DigestMismatch { .. })),
        "B was served A's private tree: {err:?}"
    );
    assert_eq!(srv.hits("/gitrepository/team-b/forged/latest.tar.gz"), 1);
    // A's source still shares its tree.
    c.get(&a_url, &d).await.unwrap();
    assert_eq!(srv.hits("/gitrepository/team-a/app/latest.tar.gz"), 1);
}
