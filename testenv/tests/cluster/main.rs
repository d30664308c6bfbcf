//! Cluster behaviour the operator relies on, checked against the real kube-apiserver
//! (one per test binary: all cluster tests live in this one binary).

mod flux;
mod objects;
mod rbac;
mod ssa;

/// The HTTP status of an API error, if it is one.
pub fn status_code(err: &kube::Error) -> Option<u16> {
    match err {
        kube::Error::Api(status) => Some(status.code),
        _ => None,
    }
}

#[tokio::test]
async fn server_reports_the_pinned_version_and_is_ready() {
    let env = opm_testenv::TestEnv::global().await;
    let client = env.client().unwrap();
    let info = client.apiserver_version().await.unwrap();
    assert_eq!(info.git_version, opm_testenv::tools::K8S_VERSION);
    assert_eq!(info.major, "1");
    assert_eq!(info.minor, "37");
    assert!(env.is_running());
    assert!(env.kubeconfig_path().is_file());
    eprintln!("API server started in {:?}", env.startup_time());
}
