//! The client's request rate as shipped (docs/src/operations.md, "Client request rate"): no client-side
//! limit by default, the same default in the binary, `deploy/` and the Helm chart, and a
//! 429 from the API server retried after its `Retry-After` instead of failing the attempt.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::Router;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use opm_operator::commands::run::{DEFAULT_KUBE_API_BURST, DEFAULT_KUBE_API_QPS};
use opm_operator::kube::impersonate::{RequestCounts, limited_client};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn yaml(path: &str) -> serde_json::Value {
    let text = std::fs::read_to_string(repo().join(path)).unwrap();
    serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// `--name=value` among the kustomize Deployment's container args.
fn deploy_arg(name: &str) -> String {
    let d = yaml("deploy/manager/deployment.yaml");
    let args = d["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .expect("args")
        .clone();
    let prefix = format!("{name}=");
    args.iter()
        .filter_map(|a| a.as_str())
        .find_map(|a| a.strip_prefix(&prefix).map(str::to_owned))
        .unwrap_or_else(|| panic!("deploy/manager/deployment.yaml does not set {name}"))
}

#[test]
fn binary_deploy_and_chart_ship_the_same_client_rate() {
    assert_eq!(
        DEFAULT_KUBE_API_QPS, 0.0,
        "the shipped default is no client-side limit"
    );
    let qps: f32 = deploy_arg("--kube-api-qps").parse().unwrap();
    let burst: u32 = deploy_arg("--kube-api-burst").parse().unwrap();
    assert_eq!(
        (qps, burst),
        (DEFAULT_KUBE_API_QPS, DEFAULT_KUBE_API_BURST),
        "deploy/manager/deployment.yaml differs from the binary's defaults"
    );
    let values = yaml("deploy/helm/opm-operator/values.yaml");
    assert_eq!(
        (
            values["kubeApiQps"].as_f64().expect("kubeApiQps") as f32,
            values["kubeApiBurst"].as_u64().expect("kubeApiBurst") as u32
        ),
        (DEFAULT_KUBE_API_QPS, DEFAULT_KUBE_API_BURST),
        "the chart's values.yaml differs from the binary's defaults"
    );
    let template =
        std::fs::read_to_string(repo().join("deploy/helm/opm-operator/templates/deployment.yaml"))
            .unwrap();
    assert!(template.contains("--kube-api-qps={{ .Values.kubeApiQps }}"));
    assert!(template.contains("--kube-api-burst={{ .Values.kubeApiBurst }}"));
}

/// The chart as Helm renders it (tools/install builds `helm`; `OPM_HELM_BIN`).
#[test]
fn the_rendered_chart_passes_the_default_rate() {
    let helm = std::env::var("OPM_HELM_BIN")
        .expect("OPM_HELM_BIN is not set: eval \"$(tools/install --env)\"");
    let out = std::process::Command::new(helm)
        .args(["template", "x", "--kube-version", "1.37.2"])
        .arg(repo().join("deploy/helm/opm-operator"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    for arg in [
        format!("- --kube-api-qps={DEFAULT_KUBE_API_QPS}"),
        format!("- --kube-api-burst={DEFAULT_KUBE_API_BURST}"),
    ] {
        assert!(
            text.lines().any(|l| l.trim() == arg),
            "helm template lacks {arg}"
        );
    }
}

#[test]
fn run_help_shows_the_unlimited_default() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_opm-operator"))
        .args(["run", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    let line = help
        .lines()
        .skip_while(|l| !l.contains("--kube-api-qps"))
        .find(|l| l.contains("[default:"))
        .unwrap_or_else(|| panic!("no default shown for --kube-api-qps:\n{help}"));
    assert!(line.contains("[default: 0]"), "{line}");
}

/// An API server stand-in (a real HTTP server) that answers the first `busy` GETs with 429,
/// `Retry-After: 1` and the Status body the API server sends, then the ConfigMap.
async fn busy_server(busy: usize) -> (String, Arc<AtomicUsize>) {
    let hits = Arc::new(AtomicUsize::new(0));
    let seen = hits.clone();
    let app = Router::new().route(
        "/api/v1/namespaces/{ns}/configmaps/{name}",
        get(move || {
            let seen = seen.clone();
            async move {
                let n = seen.fetch_add(1, Ordering::SeqCst);
                if n < busy {
                    let status = serde_json::json!({
                        "kind": "Status", "apiVersion": "v1", "status": "Failure",
                        "message": "Too many requests, please try again later.",
                        "reason": "TooManyRequests", "code": 429,
                        "details": {"retryAfterSeconds": 1}
                    });
                    let mut r: Response =
                        (StatusCode::TOO_MANY_REQUESTS, status.to_string()).into_response();
                    r.headers_mut()
                        .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
                    r.headers_mut().insert(
                        header::CONTENT_TYPE,
                        HeaderValue::from_static("application/json"),
                    );
                    return r;
                }
                let cm = serde_json::json!({
                    "apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "x", "namespace": "d", "resourceVersion": "7"},
                    "data": {"k": "v"}
                });
                let mut r: Response = (StatusCode::OK, cm.to_string()).into_response();
                r.headers_mut().insert(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/json"),
                );
                r
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}"), hits)
}

#[tokio::test]
async fn a_429_is_retried_after_its_retry_after_within_one_request() {
    let (url, hits) = busy_server(2).await;
    let config = kube::Config::new(url.parse().unwrap());
    assert!(config.default_retry, "kube's 429/503/504 retry is on");
    let counts = Arc::new(RequestCounts::default());
    // As shipped: no client-side limit.
    let client = limited_client(config, counts.clone(), None).unwrap();
    let cm = Api::<ConfigMap>::namespaced(client, "d")
        .get("x")
        .await
        .expect("the GET succeeds once the server stops answering 429");
    assert_eq!(cm.data.unwrap()["k"], "v");
    assert_eq!(hits.load(Ordering::SeqCst), 3, "two 429s, then the answer");
    // The retries happen below the counting layer: the operator sent one request.
    assert_eq!(counts.snapshot().get, 1);
}
