//! Leader election against the real API server: one holder at a time, release hands over at
//! once, an expired Lease is taken over.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;
use opm_operator::ops::leader::{LEASE_NAME, LeaderLease};

use crate::harness::namespace;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_holder_at_a_time_with_handover_and_expiry() {
    let (_env, ns) = namespace().await;
    let d = Duration::from_secs(2);
    let a = LeaderLease::new(ns.client.clone(), &ns.name, "a".into(), d);
    let b = LeaderLease::new(ns.client.clone(), &ns.name, "b".into(), d);
    assert!(
        a.try_acquire_or_renew().await.unwrap(),
        "a takes the free Lease"
    );
    assert!(!b.try_acquire_or_renew().await.unwrap(), "b must wait");
    assert!(a.try_acquire_or_renew().await.unwrap(), "a renews");
    a.release().await;
    assert!(
        b.try_acquire_or_renew().await.unwrap(),
        "b takes over after release"
    );
    assert!(!a.try_acquire_or_renew().await.unwrap());
    // b stops renewing: after the duration the Lease is free for a.
    tokio::time::sleep(d + Duration::from_millis(1500)).await;
    assert!(
        a.try_acquire_or_renew().await.unwrap(),
        "a takes the expired Lease"
    );
    let lease = Api::<Lease>::namespaced(ns.client.clone(), &ns.name)
        .get(LEASE_NAME)
        .await
        .unwrap();
    let spec = lease.spec.unwrap();
    assert_eq!(spec.holder_identity.as_deref(), Some("a"));
    assert_eq!(spec.lease_transitions, Some(2));
}
