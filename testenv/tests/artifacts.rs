//! The artifact server over real HTTP on 127.0.0.1, including its injected faults.

use std::time::{Duration, Instant};

use opm_testenv::archive::{self, Entry};
use opm_testenv::{ArtifactServer, Fault};

fn http() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::new()
}

#[tokio::test]
async fn serves_bytes_and_404s() {
    let server = ArtifactServer::start().await.unwrap();
    let tgz = archive::tar_gz(&[Entry::new("release.cue", "package release\n")]).unwrap();
    let (url, digest) = server.put_with_digest("/a/release.tar.gz", tgz.clone());
    assert!(url.starts_with("http://127.0.0.1:"));
    let got = http().get(&url).send().await.unwrap();
    assert_eq!(got.status(), 200);
    let body = got.bytes().await.unwrap();
    assert_eq!(body.as_ref(), tgz.as_slice());
    assert_eq!(archive::sha256_digest(&body), digest);

    let missing = http().get(server.url("nope")).send().await.unwrap();
    assert_eq!(missing.status(), 404);
    server.remove("/a/release.tar.gz");
    assert_eq!(http().get(&url).send().await.unwrap().status(), 404);
    assert_eq!(server.hits("a/release.tar.gz"), 2);
}

#[tokio::test]
async fn injected_faults() {
    let server = ArtifactServer::start().await.unwrap();
    let bytes = vec![7u8; 64 * 1024];
    let url = server.put("blob", bytes.clone());

    server.set_fault("blob", Fault::status(503));
    assert_eq!(http().get(&url).send().await.unwrap().status(), 503);

    server.set_fault("blob", Fault::truncate_to(10));
    let short = http()
        .get(&url)
        .send()
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    assert_eq!(short.len(), 10);
    assert_ne!(
        archive::sha256_digest(&short),
        archive::sha256_digest(&bytes)
    );

    server.set_fault("blob", Fault::abort_after(100));
    let resp = http().get(&url).send().await.unwrap();
    assert_eq!(resp.content_length(), Some(bytes.len() as u64));
    assert!(
        resp.bytes().await.is_err(),
        "an aborted body must not read as complete"
    );

    server.set_fault("blob", Fault::delay(Duration::from_millis(300)));
    let started = Instant::now();
    let slow = http()
        .get(&url)
        .send()
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert_eq!(slow.len(), bytes.len());

    let timeout = http()
        .get(&url)
        .timeout(Duration::from_millis(50))
        .send()
        .await;
    assert!(timeout.is_err());

    server.clear_fault("blob");
    assert_eq!(
        http()
            .get(&url)
            .send()
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap()
            .len(),
        bytes.len()
    );
}

#[tokio::test]
async fn server_stops_when_dropped() {
    let server = ArtifactServer::start().await.unwrap();
    let url = server.put("x", "y");
    drop(server);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(http().get(&url).send().await.is_err());
}
