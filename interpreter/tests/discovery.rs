//! Discovery against the real API server (issue 31 item 9): kinds the server does not
//! serve are answered from what it said a moment ago, so a render naming thousands of
//! bogus kinds costs a couple of discovery requests, not one per kind, and a kind that
//! appears (a CRD applied) is found once its resolution is forgotten.

use std::sync::Arc;

use opm_core::ApiError;
use opm_operator::kube::discovery::Resolver;
use opm_operator::kube::impersonate::{RequestCounts, counted_client};
use opm_testenv::TestEnv;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_thousand_bogus_kinds_cost_a_few_discovery_requests() {
    let env = TestEnv::global().await;
    let counts = Arc::new(RequestCounts::default());
    let client = counted_client(env.config(), counts.clone()).unwrap();
    let resolver = Resolver::new(client);
    // Known kinds resolve, in the core group and in a named one.
    let cm = resolver.resolve("", "v1", "ConfigMap").await.unwrap();
    assert!(cm.namespaced);
    let crb = resolver
        .resolve("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding")
        .await
        .unwrap();
    assert!(!crb.namespaced);
    let (before, counted) = (counts.snapshot().get, resolver.requests());
    // 5 000 bogus kinds: in served group/versions, in unserved versions of served
    // groups, and in groups nobody serves.
    for i in 0..5000 {
        let (group, version) = match i % 4 {
            0 => ("", "v1"),
            1 => ("apps", "v1"),
            2 => ("apps", "v9"),
            _ => ("bogus.example.com", "v1"),
        };
        let kind = format!("Bogus{i}");
        let got = resolver.resolve(group, version, &kind).await;
        assert!(
            matches!(&got, Err(ApiError::NotFound { message }) if message.contains(&kind)),
            "{kind}: {:?}",
            got.map(|r| r.resource)
        );
    }
    let sent = counts.snapshot().get - before;
    println!("discovery requests for 5 000 bogus kinds: {sent}");
    assert!(
        sent <= 4,
        "{sent} discovery requests for 5 000 bogus kinds (the old resolver sent one per kind)"
    );
    assert_eq!(
        resolver.requests() - counted,
        sent,
        "the counter counts each request"
    );
    // A kind forgotten (as after applying its CRD) is asked for again.
    resolver.forget("apps", "v1", "Deployment");
    let before = counts.snapshot().get;
    resolver.resolve("apps", "v1", "Deployment").await.unwrap();
    assert!(counts.snapshot().get > before);
}
