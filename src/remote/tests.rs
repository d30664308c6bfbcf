use super::*;
use crate::outcome::FailureClass;

fn facts(insecure: &[&str], server: &str) -> KubeConfigFacts {
    KubeConfigFacts {
        key: "value".into(),
        digest: crate::digest::sha256(b"kc"),
        server: server.into(),
        insecure: insecure.iter().map(|s| s.to_string()).collect(),
    }
}

#[test]
fn a_kubeconfig_that_runs_a_command_or_reads_a_file_is_refused_naming_the_field() {
    for field in [
        "users[ci].user.exec",
        "users[ci].user.auth-provider",
        "users[ci].user.tokenFile",
        "users[ci].user.client-certificate",
        "users[ci].user.client-key",
        "clusters[prod].cluster.certificate-authority",
    ] {
        let f = check(
            &facts(&[field], "https://10.0.0.1:6443"),
            "team",
            "kc",
            false,
        )
        .expect_err(field);
        assert_eq!(f.reason, Reason::InvalidKubeConfig);
        assert_eq!(f.class, FailureClass::Stalled);
        assert!(f.message.contains(field), "{}", f.message);
        assert!(f.message.contains("--allow-insecure-kubeconfig"));
        assert!(f.message.contains("Secret team/kc (key value)"));
        let ok = check(
            &facts(&[field], "https://10.0.0.1:6443"),
            "team",
            "kc",
            true,
        )
        .expect("allowed by the flag");
        assert_eq!(ok.server, "https://10.0.0.1:6443");
    }
    let f = check(
        &facts(
            &["users[a].user.exec", "users[b].user.tokenFile"],
            "https://x",
        ),
        "team",
        "kc",
        false,
    )
    .unwrap_err();
    assert!(f.message.contains("(and 1 more)"), "{}", f.message);
}

#[test]
fn the_server_is_shown_without_credentials() {
    assert_eq!(
        display_server("https://admin:s3cret@api.example.com:6443/prefix?token=abc#x"),
        "https://api.example.com:6443/prefix"
    );
    assert_eq!(
        display_server("https://10.0.0.1:6443"),
        "https://10.0.0.1:6443"
    );
    assert_eq!(display_server("host:443"), "host:443");
    let c = check(&facts(&[], "https://u:p@h:1"), "n", "s", false).unwrap();
    assert_eq!(c.server, "https://h:1");
    assert!(!c.server.contains("p@"));
    let none = check(&facts(&[], ""), "n", "s", false).unwrap_err();
    assert_eq!(none.reason, Reason::InvalidKubeConfig);
    assert!(none.message.contains("names no server"));
}

#[test]
fn missing_or_unusable_content_stalls_and_a_failed_read_is_transient() {
    let stalls = [
        (KubeConfigError::SecretNotFound, "not found"),
        (
            KubeConfigError::KeyNotFound {
                keys: vec!["other".into()],
            },
            "has no key value or value.yaml (it has keys other)",
        ),
        (
            KubeConfigError::TooLarge { bytes: 70_000 },
            "is 70000 bytes; the cap is 65536 (--max-kubeconfig-bytes)",
        ),
        (
            KubeConfigError::Unparsable {
                message: "no current context".into(),
            },
            "no current context",
        ),
    ];
    for (e, says) in stalls {
        let f = read_failure(&e, "team", "kc", None, 65536);
        assert_eq!(f.reason, Reason::InvalidKubeConfig);
        assert_eq!(f.class, FailureClass::Stalled, "{e:?}");
        assert!(f.message.contains(says), "{}", f.message);
    }
    let f = read_failure(
        &KubeConfigError::Api {
            error: ApiError::Unavailable {
                message: "etcd".into(),
            },
        },
        "team",
        "kc",
        Some("config"),
        1,
    );
    assert_eq!(f.class, FailureClass::Transient);
    assert!(f.message.contains("(key config)"));
}

#[test]
fn an_unreachable_cluster_is_transient_and_named() {
    let c = RemoteCluster {
        digest: crate::digest::sha256(b"x"),
        server: "https://10.0.0.9:6443".into(),
    };
    let f = unreachable(
        &c,
        &ApiError::Unreachable {
            message: "connection refused".into(),
        },
    );
    assert_eq!(f.reason, Reason::ClusterUnreachable);
    assert_eq!(f.class, FailureClass::Transient);
    assert_eq!(
        f.message,
        "cluster https://10.0.0.9:6443 cannot be reached: connection refused"
    );
}

fn entry(name: &str) -> InventoryEntry {
    InventoryEntry {
        kind: "ConfigMap".into(),
        namespace: "team".into(),
        name: name.into(),
        v: "v1".into(),
        ..Default::default()
    }
}

#[test]
fn a_move_to_another_server_leaves_the_old_inventory_and_names_it() {
    let inv = Inventory {
        cluster: "https://old:6443".into(),
        entries: (0..60).map(|i| entry(&format!("cm-{i}"))).collect(),
        ..Default::default()
    };
    let same = RemoteCluster {
        digest: "sha256:rotated-token".into(),
        server: "https://old:6443".into(),
    };
    let other = RemoteCluster {
        digest: "sha256:new".into(),
        server: "https://new:6443".into(),
    };
    assert!(
        !moved(Some(&inv), Some(&same)),
        "a new token for the same server"
    );
    assert!(moved(Some(&inv), Some(&other)));
    assert!(
        moved(Some(&inv), None),
        "back to the operator's own cluster"
    );
    assert!(!moved(None, Some(&other)), "nothing applied yet");
    let local = Inventory {
        entries: vec![entry("a")],
        ..Default::default()
    };
    assert!(moved(Some(&local), Some(&other)));
    assert!(!moved(Some(&local), None));

    let left = left_behind(&inv, jiff::Timestamp::UNIX_EPOCH);
    assert_eq!(left.cluster, "https://old:6443");
    assert_eq!(left.count, 60);
    assert_eq!(left.entries.len(), LEFT_BEHIND_ENTRIES);
    let note = moved_message(&left, Some(&other));
    assert!(note.contains("https://new:6443") && note.contains("60 objects"));
    assert!(note.contains("https://old:6443"));
}
