use kube::ResourceExt;
use opm_testenv::archive::{self, Entry};
use opm_testenv::flux::{self, Artifact, SourceKind};
use opm_testenv::{ArtifactServer, tools};

fn http() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::new()
}

#[tokio::test]
async fn oci_repository_artifact_can_be_read_back_and_downloaded() {
    let env = opm_testenv::TestEnv::global().await;
    let ns = env.namespace().await.unwrap();
    let server = ArtifactServer::start().await.unwrap();

    let bytes = archive::tar_gz_dir(&tools::examples_dir().join("releases/web")).unwrap();
    let url = server.put("releases/web.tar.gz", bytes.clone());
    let artifact = Artifact::for_bytes(&url, &bytes);
    flux::create_source_with_artifact(
        &ns.client,
        &ns.name,
        SourceKind::OciRepository,
        "web",
        &artifact,
    )
    .await
    .unwrap();

    // Read it back as the operator will.
    let source = flux::get_source(&ns.client, &ns.name, SourceKind::OciRepository, "web")
        .await
        .unwrap();
    assert_eq!(source.name_any(), "web");
    let status = &source.data["status"];
    assert_eq!(status["artifact"]["url"], url.as_str());
    assert_eq!(status["artifact"]["digest"], artifact.digest.as_str());
    assert_eq!(status["artifact"]["revision"], artifact.revision.as_str());
    assert_eq!(status["artifact"]["size"], bytes.len() as u64);
    let ready = &status["conditions"][0];
    assert_eq!(ready["type"], "Ready");
    assert_eq!(ready["status"], "True");

    // The artifact downloads over real HTTP and its digest matches.
    let downloaded = http()
        .get(status["artifact"]["url"].as_str().unwrap())
        .send()
        .await
        .unwrap()
        .error_for_status()
        .unwrap()
        .bytes()
        .await
        .unwrap();
    assert_eq!(archive::sha256_digest(&downloaded), artifact.digest);
    assert_eq!(server.hits("releases/web.tar.gz"), 1);
}

#[tokio::test]
async fn git_repository_and_bucket_sources_are_served_too() {
    let env = opm_testenv::TestEnv::global().await;
    let ns = env.namespace().await.unwrap();
    let zip = archive::zip(&[Entry::new("release.cue", "package release\n")]).unwrap();
    let artifact = Artifact::for_bytes("http://127.0.0.1:1/x.zip", &zip);
    for (kind, name) in [
        (SourceKind::GitRepository, "git"),
        (SourceKind::Bucket, "bucket"),
    ] {
        flux::create_source_with_artifact(&ns.client, &ns.name, kind, name, &artifact)
            .await
            .unwrap();
        let read = flux::get_source(&ns.client, &ns.name, kind, name)
            .await
            .unwrap();
        assert_eq!(
            read.data["status"]["artifact"]["digest"],
            artifact.digest.as_str()
        );
    }

    let not_ready = flux::set_not_ready(
        &ns.client,
        &ns.name,
        SourceKind::GitRepository,
        "git",
        "GitOperationFailed",
        "no such branch",
    )
    .await
    .unwrap();
    let status = &not_ready.data["status"];
    assert!(status.get("artifact").is_none());
    assert_eq!(status["conditions"][0]["status"], "False");
    assert_eq!(status["conditions"][0]["reason"], "GitOperationFailed");
}
