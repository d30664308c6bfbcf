//! `/metrics` over real HTTP after real reconciles (SPEC §21): every series with its labels,
//! histogram buckets, and a deleted release's series gone while another's stay.

use std::time::Duration;

use kube::api::{Api, DeleteParams};
use opm_core::api::Release;
use serde_json::json;

use crate::harness::*;

/// Every series of one release's (`kind`, `name`, `namespace`) labels, by metric name.
fn series_of<'a>(text: &'a str, kind: &str, name: &str, ns: &str) -> Vec<&'a str> {
    let labels = format!(r#"kind="{kind}",name="{name}",namespace="{ns}""#);
    text.lines()
        .filter(|l| !l.starts_with('#') && l.contains(&labels))
        .collect()
}

/// The value of the one sample `series` (name plus full label set, as exposed).
fn value(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

pub async fn scrape(addr: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr)
        .await
        .expect("connect to /metrics");
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    assert!(out.starts_with("HTTP/1.1 200"), "{out}");
    assert!(
        out.to_ascii_lowercase()
            .contains("content-type: text/plain; version=0.0.4"),
        "Prometheus text content type: {out}"
    );
    out.split_once("\r\n\r\n")
        .map(|(_, body)| body.to_string())
        .unwrap_or_default()
}

pub fn free_addr() -> String {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    format!("127.0.0.1:{port}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_expose_every_series_and_forget_a_deleted_release() {
    let (env, ns) = namespace().await;
    let op = Operator::start(env, &ns.name, |_| {}).await;
    let addr = free_addr();
    let server = tokio::spawn(opm_operator::ops::endpoints::serve(
        addr.parse().unwrap(),
        op.rt.clone(),
    ));
    // The example module as a ModuleRelease, and a Release of an artifact (fetch series).
    create_mr(
        &ns.client,
        &module_release(&ns.name, "web", json!({}), json!({"prune": true})),
    )
    .await;
    let pkg = Package::start().await;
    let comps = json!({"c": {
        "a": configmap("m-a", json!({"k": "1"})),
        "b": configmap("m-b", json!({"k": "2"})),
    }});
    let first = pkg
        .publish(&ns.client, &ns.name, "src", &release_package("r", &comps))
        .await;
    create_rel(
        &ns.client,
        &release(&ns.name, "r", "src", ".", json!({"prune": true})),
    )
    .await;
    wait_mr(&ns.client, &ns.name, "web", "web Ready", is_ready_mr).await;
    wait_rel(&ns.client, &ns.name, "r", "r Ready", is_ready_rel).await;
    // A new artifact without `m-b`: the Release prunes one object.
    let comps = json!({"c": {"a": configmap("m-a", json!({"k": "1"}))}});
    let second = pkg
        .publish(&ns.client, &ns.name, "src", &release_package("r", &comps))
        .await;
    wait_rel(
        &ns.client,
        &ns.name,
        "r",
        "r applied the new artifact",
        |o| {
            is_ready_rel(o)
                && o.status
                    .as_ref()
                    .and_then(|s| s.inventory.as_ref())
                    .is_some_and(|i| i.count == 1)
        },
    )
    .await;

    let n = &ns.name;
    let web = format!(r#"kind="ModuleRelease",name="web",namespace="{n}""#);
    let r = format!(r#"kind="Release",name="r",namespace="{n}""#);
    // An attempt's metrics are recorded once its status patch has returned, so the status
    // can be seen a moment before them: scrape until the pruning attempt's series are in.
    let pruned = format!(r#"opm_controller_reconcile_total{{{r},outcome="applied_and_pruned"}}"#);
    let inventory = format!("opm_controller_inventory_size{{{r}}}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let text = loop {
        let text = scrape(&addr).await;
        let settled = value(&text, &pruned).is_some() && value(&text, &inventory) == Some(1.0);
        if settled || std::time::Instant::now() > deadline {
            break text;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    };
    assert!(
        value(
            &text,
            &format!(r#"opm_controller_reconcile_total{{{web},outcome="applied"}}"#)
        )
        .is_some_and(|v| v >= 1.0),
        "{text}"
    );
    assert!(
        value(
            &text,
            &format!(r#"opm_controller_reconcile_total{{{r},outcome="applied_and_pruned"}}"#)
        )
        .is_some_and(|v| v >= 1.0),
        "{text}"
    );
    for labels in [&web, &r] {
        // A real histogram: buckets up to +Inf, sum and count agree with the attempts.
        let count = value(
            &text,
            &format!("opm_controller_reconcile_duration_seconds_count{{{labels}}}"),
        )
        .expect("reconcile duration count");
        assert!(count >= 1.0);
        assert_eq!(
            value(
                &text,
                &format!(
                    r#"opm_controller_reconcile_duration_seconds_bucket{{{labels},le="+Inf"}}"#
                )
            ),
            Some(count)
        );
        let buckets = text
            .lines()
            .filter(|l| {
                l.starts_with(&format!(
                    "opm_controller_reconcile_duration_seconds_bucket{{{labels},le="
                ))
            })
            .count();
        assert!(buckets > 5, "histogram buckets: {text}");
        assert!(
            value(
                &text,
                &format!("opm_controller_render_duration_seconds_count{{{labels}}}")
            )
            .is_some_and(|v| v >= 1.0)
        );
        for action in ["created", "updated", "unchanged"] {
            assert!(
                value(
                    &text,
                    &format!(
                        r#"opm_controller_apply_resources_total{{{labels},action="{action}"}}"#
                    )
                )
                .is_some(),
                "apply_resources {action}: {text}"
            );
        }
        assert_eq!(
            value(&text, &format!("opm_controller_release_ready{{{labels}}}")),
            Some(1.0)
        );
        assert_eq!(
            value(
                &text,
                &format!("opm_controller_release_suspended{{{labels}}}")
            ),
            Some(0.0)
        );
    }
    assert_eq!(
        value(
            &text,
            &format!(r#"opm_controller_apply_resources_total{{{web},action="created"}}"#)
        ),
        Some(4.0),
        "the example applies 4 objects"
    );
    assert_eq!(
        value(&text, &format!("opm_controller_inventory_size{{{web}}}")),
        Some(4.0)
    );
    assert_eq!(
        value(&text, &format!("opm_controller_inventory_size{{{r}}}")),
        Some(1.0)
    );
    assert_eq!(
        value(
            &text,
            &format!("opm_controller_prune_resources_total{{{r}}}")
        ),
        Some(1.0)
    );
    assert_eq!(
        value(&text, &format!("opm_controller_fetch_bytes_total{{{r}}}")),
        Some((first.size.unwrap() + second.size.unwrap()) as f64),
        "both archives' bytes"
    );
    assert_eq!(
        value(
            &text,
            &format!("opm_controller_artifact_cache_misses_total{{{r}}}")
        ),
        Some(2.0),
        "two artifacts downloaded"
    );
    assert!(
        value(
            &text,
            &format!("opm_controller_artifact_cache_hits_total{{{r}}}")
        )
        .is_some(),
        "the cache-hit counter exists from the first attempt"
    );
    for family in [
        "opm_controller_reconcile_total",
        "opm_controller_reconcile_duration_seconds",
        "opm_controller_apply_resources_total",
        "opm_controller_prune_resources_total",
        "opm_controller_inventory_size",
        "opm_controller_fetch_bytes_total",
        "opm_controller_render_duration_seconds",
        "opm_controller_artifact_cache_hits_total",
        "opm_controller_artifact_cache_misses_total",
        "opm_controller_release_ready",
        "opm_controller_release_suspended",
    ] {
        assert!(
            text.contains(&format!("# HELP {family} ")),
            "{family} has HELP"
        );
    }
    let before_r = series_of(&text, "Release", "r", n).len();
    let before_web = series_of(&text, "ModuleRelease", "web", n).len();
    assert!(before_r > 20 && before_web > 20);

    // Delete the Release: every one of its series disappears, web's stay.
    Api::<Release>::namespaced(ns.client.clone(), n)
        .delete("r", &DeleteParams::default())
        .await
        .unwrap();
    let mut text = String::new();
    for _ in 0..150 {
        text = scrape(&addr).await;
        if series_of(&text, "Release", "r", n).is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(
        series_of(&text, "Release", "r", n),
        Vec::<&str>::new(),
        "the deleted release's series are removed"
    );
    assert_eq!(
        series_of(&text, "ModuleRelease", "web", n).len(),
        before_web,
        "the other release's series stay"
    );
    server.abort();
    op.stop().await;
}
