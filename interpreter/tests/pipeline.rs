//! The executors chained as a `Release` reconcile uses them: a tar.gz artifact served over real
//! HTTP → cache (download, verify, extract) → `spec.path` → real `cue` → Secret redaction.

mod support;

use opm_operator::effects::local::Verdict;

use std::time::Duration;

use opm_core::effect::RenderRequest;
use opm_core::input::{FetchError as CoreFetch, RenderError as CoreRender};
use opm_operator::artifact::artifact_cache::{ArtifactCache, CacheLimits};
use opm_operator::artifact::extract::ExtractLimits;
use opm_operator::artifact::fetch::{FetchConfig, Fetcher};
use opm_operator::cue::render::{RenderConfig, Renderer};
use opm_operator::cue::secrets::SecretTable;
use opm_operator::effects::local::Local;
use support::cue::cue_bin;
use support::{Route, TestServer, digest_of, dir, file, tar_gz};

const RELEASE: &str = r#"package release

kind: "ModuleRelease"
metadata: {name: "shop", namespace: "prod"}
_ns: metadata.namespace
components: {
	db: {
		secret: {
			apiVersion: "v1"
			kind:       "Secret"
			metadata: name: "shop-db"
			stringData: password: "s3cr3t-value"
		}
		config: {
			apiVersion: "v1"
			kind:       "ConfigMap"
			metadata: name: "shop-db"
			data: host: "db.\(_ns)"
		}
	}
}
"#;

#[tokio::test]
async fn a_release_artifact_goes_from_http_to_redacted_objects() {
    let artifact = tar_gz(&[
        dir("cue.mod/"),
        file(
            "cue.mod/module.cue",
            b"module: \"test.example/shop@v0\"\nlanguage: version: \"v0.17.0\"\n",
        ),
        dir("deploy/"),
        file("deploy/prod/release.cue", RELEASE.as_bytes()),
        file("deploy/README.md", b"no release here"),
    ]);
    let digest = digest_of(&artifact);
    let srv = TestServer::start(vec![("/shop.tar.gz", Route::Bytes(artifact))]).await;
    let cache_dir = tempfile::tempdir().unwrap();
    let fetcher = Fetcher::new(FetchConfig {
        timeout: Duration::from_secs(10),
        max_bytes: 1 << 20,
    })
    .unwrap();
    let cache = ArtifactCache::new(
        cache_dir.path(),
        fetcher,
        ExtractLimits::default(),
        CacheLimits::default(),
    )
    .unwrap();
    let mut cfg = RenderConfig::new(cue_bin());
    cfg.cue_cache_dir = Some(cache_dir.path().join("cue"));
    let renderer = Renderer::new(cfg);

    let handle = cache
        .get(&srv.url("/shop.tar.gz"), &digest)
        .await
        .expect("artifact");
    assert_eq!(
        handle.resolve("deploy").unwrap_err().reason(),
        "ReleaseFileNotFound"
    );
    assert_eq!(
        handle.resolve("deploy/staging").unwrap_err().reason(),
        "PathNotFound"
    );
    let dir = handle.resolve("./deploy/prod").expect("path");
    let rendered = renderer
        .render_package_cached(&digest, "./deploy/prod", &dir)
        .await
        .expect("render");

    let objects: Vec<String> = rendered
        .objects()
        .map(|(c, k, o)| format!("{c}/{k}={}", o["kind"]))
        .collect();
    assert_eq!(objects, ["db/config=\"ConfigMap\"", "db/secret=\"Secret\""]);
    assert_eq!(
        rendered.component("db").unwrap()["config"]["data"]["host"],
        "db.prod"
    );
    // What the driver hands the core: the exported value with Secret values redacted.
    let mut exported = rendered.exported.clone();
    let mut secrets = SecretTable::default();
    secrets.redact_render(&mut exported);
    assert_eq!(secrets.len(), 1);
    let redacted = serde_json::to_string(&exported).unwrap();
    assert!(!redacted.contains("s3cr3t-value"), "{redacted}");
    let secret = secrets
        .restore(&exported["components"]["db"]["secret"])
        .unwrap();
    assert_eq!(secret["stringData"]["password"], "s3cr3t-value");

    // A second reconcile of the same artifact costs neither a download nor a cue run.
    let again = cache.get(&srv.url("/shop.tar.gz"), &digest).await.unwrap();
    let dir = again.resolve("./deploy/prod").unwrap();
    std::fs::write(dir.join("release.cue"), "not cue at all {").unwrap();
    assert!(
        renderer
            .render_package_cached(&digest, "./deploy/prod", &dir)
            .await
            .is_ok()
    );
    assert_eq!(srv.hits("/shop.tar.gz"), 1);
}

/// SPEC §4 at the executor boundary: the Render step finds the artifact evicted from the
/// cache (another artifact pushed it out after the fetch) and the server now answers 503.
/// That is a download failure (`FetchFailed`, backoff), not invalid content (a 30-minute
/// `InvalidArtifact` stall).
#[tokio::test]
async fn an_artifact_evicted_before_render_and_then_refused_is_a_fetch_failure() {
    let package = |name: &str| {
        tar_gz(&[
            dir("cue.mod/"),
            file(
                "cue.mod/module.cue",
                format!("module: \"test.example/{name}@v0\"\nlanguage: version: \"v0.17.0\"\n")
                    .as_bytes(),
            ),
            file("release.cue", RELEASE.as_bytes()),
        ])
    };
    let (a, b) = (package("a"), package("b"));
    let (digest_a, digest_b) = (digest_of(&a), digest_of(&b));
    let srv = TestServer::start(vec![
        ("/a.tar.gz", Route::Bytes(a)),
        ("/b.tar.gz", Route::Bytes(b)),
        ("/a-gone.tar.gz", Route::Status(503)),
    ])
    .await;
    let cache_dir = tempfile::tempdir().unwrap();
    let fetcher = Fetcher::new(FetchConfig {
        timeout: Duration::from_secs(10),
        max_bytes: 1 << 20,
    })
    .unwrap();
    let one_entry = CacheLimits {
        max_entries: 1,
        ..CacheLimits::default()
    };
    let cache = ArtifactCache::new(
        cache_dir.path(),
        fetcher,
        ExtractLimits::default(),
        one_entry,
    )
    .unwrap();
    let mut cfg = RenderConfig::new(cue_bin());
    cfg.cue_cache_dir = Some(cache_dir.path().join("cue"));
    let local = Local {
        cache,
        renderer: Renderer::new(cfg),
        opm: Default::default(),
    };

    local.fetch(&srv.url("/a.tar.gz"), &digest_a).await.unwrap();
    local.fetch(&srv.url("/b.tar.gz"), &digest_b).await.unwrap();
    let request = RenderRequest::Artifact {
        artifact_digest: digest_a.clone(),
        artifact_url: srv.url("/a-gone.tar.gz"),
        path: ".".into(),
    };
    let err = local.render(&request).await.unwrap_err();
    assert_eq!(
        err,
        CoreRender::Refetch {
            error: CoreFetch::Http { status: 503 }
        }
    );
    let failure = opm_core::exits::render_failure(&err);
    assert_eq!(failure.reason, "FetchFailed");
    assert_eq!(failure.class, opm_core::outcome::FailureClass::Transient);
    assert_eq!(
        srv.hits("/a-gone.tar.gz"),
        1,
        "the render tried the download again"
    );
}
