//! `opm-sim run` on the example scenarios: golden timelines, the behaviour they show
//! asserted from `--json`, determinism and the SVG picture.

mod support;

use support::*;

const MIN: u64 = 60_000;

#[test]
fn artifact_server_down_20_minutes_backs_off_to_5m_then_recovers() {
    let file = example("artifact-outage.yaml");
    golden("artifact-outage.txt", &ok(&["run", &file, "--quiet"]));
    let doc = json("artifact-outage.yaml");
    let app = attempts_of(&doc, "app");
    let failed: Vec<_> = app
        .iter()
        .take_while(|a| a["outcome"] == "failed_transient")
        .collect();
    assert!(failed.iter().all(|a| a["reason"] == "FetchFailed"));
    assert!(
        failed
            .iter()
            .all(|a| a["atMs"].as_u64().unwrap() < 20 * MIN)
    );
    let delays: Vec<u64> = failed
        .iter()
        .map(|a| a["requeueAfterMs"].as_u64().unwrap())
        .collect();
    assert_eq!(
        delays,
        [
            5_000, 10_000, 20_000, 40_000, 80_000, 160_000, 300_000, 300_000, 300_000
        ]
    );
    // The gaps on the clock are the requeues asked for.
    for w in failed.windows(2) {
        let gap = w[1]["atMs"].as_u64().unwrap() - w[0]["atMs"].as_u64().unwrap();
        assert_eq!(gap, w[0]["requeueAfterMs"].as_u64().unwrap());
    }
    let recovered = app[failed.len()];
    assert_eq!(recovered["outcome"], "applied");
    assert_eq!(recovered["ready"], "True");
    assert!(recovered["atMs"].as_u64().unwrap() >= 20 * MIN);
    assert!(recovered["atMs"].as_u64().unwrap() <= 25 * MIN);
    assert_eq!(final_of(&doc, "app")["ready"], "True");
}

#[test]
fn apply_forbidden_until_an_rbac_grant_then_ready() {
    let file = example("rbac-fixed.yaml");
    golden("rbac-fixed.txt", &ok(&["run", &file, "--quiet"]));
    let doc = json("rbac-fixed.yaml");
    let web = attempts_of(&doc, "web");
    assert_eq!(web[0]["outcome"], "failed_stalled");
    assert_eq!(web[0]["reason"], "ImpersonationFailed");
    assert_eq!(web[0]["ready"], "False");
    let why = web[0]["message"].as_str().unwrap();
    assert!(
        why.starts_with("apply forbidden while impersonating"),
        "{why}"
    );
    let fixed = web
        .iter()
        .find(|a| a["outcome"] == "applied")
        .expect("applied after the grant");
    assert!(fixed["atMs"].as_u64().unwrap() >= 10 * MIN, "{fixed}");
    assert_eq!(fixed["ready"], "True");
    let last = final_of(&doc, "web");
    assert_eq!(last["ready"], "True");
    assert_eq!(last["readyReason"], "ReconciliationSucceeded");
}

#[test]
fn stalled_render_then_a_new_source_revision_then_ready() {
    let file = example("stalled-render.yaml");
    golden("stalled-render.txt", &ok(&["run", &file, "--quiet"]));
    let doc = json("stalled-render.yaml");
    let app = attempts_of(&doc, "app");
    assert_eq!(app[0]["outcome"], "failed_stalled");
    assert_eq!(app[0]["reason"], "RenderFailed");
    // The new revision re-triggers at once, not at the stalled requeue.
    assert_eq!(app[1]["atMs"], 15 * MIN);
    assert_eq!(app[1]["outcome"], "applied");
    assert_eq!(final_of(&doc, "app")["ready"], "True");
}

#[test]
fn a_chain_deleted_at_once_unwinds_from_its_leaf_and_a_cycle_never_waits() {
    let file = example("ordered-teardown.yaml");
    golden("ordered-teardown.txt", &ok(&["run", &file, "--quiet"]));
    let doc = json("ordered-teardown.yaml");
    let at = |a: &serde_json::Value| a["id"].as_u64().unwrap();
    let deleted = |name: &str| {
        attempts_of(&doc, name)
            .into_iter()
            .find(|a| a["reason"] == "Deleted")
            .unwrap_or_else(|| panic!("{name} never let go"))
    };
    // db and api first wait for their dependents, naming them.
    for (name, dependent) in [("db", "shop/api"), ("api", "shop/web")] {
        let waited = attempts_of(&doc, name)
            .into_iter()
            .find(|a| a["reason"] == "DependentsExist")
            .unwrap_or_else(|| panic!("{name} did not wait"));
        assert_eq!(waited["atMs"], 10 * MIN);
        let msg = waited["message"].as_str().unwrap();
        assert!(
            msg.starts_with(&format!(
                "waiting for dependents to be deleted: ModuleRelease {dependent} (deleting);"
            )),
            "{msg}"
        );
    }
    // Leaf first, each at once after the one that depended on it (no 30 s wait).
    let (web, api, db) = (deleted("web"), deleted("api"), deleted("db"));
    assert!(at(web) < at(api) && at(api) < at(db));
    for a in [web, api, db] {
        assert_eq!(a["atMs"], 10 * MIN, "{a}");
    }
    // The cycle: neither waits.
    for name in ["ping", "pong"] {
        assert!(
            attempts_of(&doc, name)
                .iter()
                .all(|a| a["reason"] != "DependentsExist")
        );
        assert_eq!(deleted(name)["atMs"], 10 * MIN);
    }
    // The cache waits for its worker until the annotation lets it go, objects orphaned.
    let cache = attempts_of(&doc, "cache");
    assert!(
        cache
            .iter()
            .filter(|a| a["atMs"].as_u64().unwrap() >= 10 * MIN
                && a["atMs"].as_u64().unwrap() < 20 * MIN)
            .all(|a| a["reason"] == "DependentsExist")
    );
    assert_eq!(deleted("cache")["atMs"], 20 * MIN);
    assert_eq!(final_of(&doc, "worker")["deleted"], false);
}

#[test]
fn a_release_waits_for_a_secret_and_a_custom_resource_ready_expression() {
    let file = example("depends-on-objects.yaml");
    golden("depends-on-objects.txt", &ok(&["run", &file, "--quiet"]));
    let doc = json("depends-on-objects.yaml");
    let app = attempts_of(&doc, "app");
    let at = |a: &serde_json::Value| a["atMs"].as_u64().unwrap();
    let message = |a: &serde_json::Value| a["message"].as_str().unwrap_or_default().to_string();
    for a in &app {
        let t = at(a);
        if t < 2 * MIN {
            assert_eq!(
                message(a),
                "waiting for dependency v1 Secret shop/db-credentials: not found"
            );
        } else if t < 4 * MIN {
            assert!(message(a).ends_with("Database shop/main: not found"), "{a}");
        } else if t < 6 * MIN {
            assert!(message(a).ends_with("readyExpr is false"), "{a}");
        }
        if t < 6 * MIN {
            assert_eq!(a["reason"], "DependenciesNotReady");
            assert_eq!(a["requeueAfterMs"], 30_000, "re-checked every 30s");
        }
    }
    let applied = app
        .iter()
        .find(|a| a["outcome"] == "applied")
        .expect("applied");
    assert_eq!(at(applied), 6 * MIN);
    assert_eq!(final_of(&doc, "app")["ready"], "True");
}

#[test]
fn opm_releases_wait_for_the_platform_then_converge_and_rerender_on_a_platform_change() {
    let file = example("missing-platform.yaml");
    golden("missing-platform.txt", &ok(&["run", &file, "--quiet"]));
    let doc = json("missing-platform.yaml");
    let at = |a: &serde_json::Value| a["atMs"].as_u64().unwrap();
    let created = 10 * MIN + 15_000;
    let changed = 32 * MIN;
    let deleted = 54 * MIN;
    for name in ["web", "shop"] {
        let rel = attempts_of(&doc, name);
        // No Platform: soft-blocked every 30s, nothing applied.
        let waiting: Vec<_> = rel.iter().take_while(|a| at(a) < created).collect();
        assert_eq!(waiting.len(), 21, "{name}: 0s, 30s, … 10m");
        for a in &waiting {
            assert_eq!(a["outcome"], "failed_transient", "{name} {a}");
            assert_eq!(a["reason"], "PlatformNotReady", "{name} {a}");
            assert_eq!(a["ready"], "False");
            assert_eq!(a["requeueAfterMs"], 30_000);
            assert_eq!(
                a["message"],
                "waiting for Platform cluster: no Platform cluster exists; create one naming the catalogs (kubectl get plat)"
            );
        }
        // The Platform turning Ready re-triggers at once (not at the next 30s retry).
        let ready = rel[waiting.len()];
        assert_eq!(at(ready), created, "{name}");
        assert_eq!(ready["outcome"], "applied");
        assert_eq!(ready["ready"], "True");
        // Then NoOps until the Platform's new digest re-renders it at once, and it applies.
        let before: Vec<_> = rel
            .iter()
            .filter(|a| at(a) > created && at(a) < changed)
            .collect();
        assert!(before.iter().all(|a| a["outcome"] == "no_op"), "{name}");
        let bump = rel.iter().find(|a| at(a) >= changed).unwrap();
        assert_eq!(at(bump), changed, "{name}: re-triggered by the change");
        assert_eq!(bump["outcome"], "applied", "{name}: config digest changed");
        // Deleted: nothing re-triggers; the next periodic attempt waits again.
        let after: Vec<_> = rel.iter().filter(|a| at(a) > deleted).collect();
        assert_eq!(at(after[0]), 57 * MIN, "{name}");
        assert_eq!(after[0]["reason"], "PlatformNotReady");
        assert_eq!(final_of(&doc, name)["readyReason"], "PlatformNotReady");
    }
    // The plain release never waits and is never disturbed by the Platform.
    let plain = attempts_of(&doc, "plain");
    assert_eq!(plain[0]["outcome"], "applied");
    assert!(plain[1..].iter().all(|a| a["outcome"] == "no_op"));
    assert!(
        plain.iter().all(|a| at(a) % (5 * MIN) == 0),
        "on its own schedule"
    );
    assert_eq!(final_of(&doc, "plain")["ready"], "True");
}

#[test]
fn a_partitioned_remote_cluster_backs_off_while_the_other_converges_then_heals() {
    let file = example("cluster-partition.yaml");
    golden("cluster-partition.txt", &ok(&["run", &file, "--quiet"]));
    let doc = json("cluster-partition.yaml");
    let us = attempts_of(&doc, "web-us");
    let cut: Vec<_> = us
        .iter()
        .filter(|a| a["reason"] == "ClusterUnreachable")
        .collect();
    assert!(
        cut.len() >= 10,
        "backed off through the hour: {}",
        cut.len()
    );
    for a in &cut {
        let t = a["atMs"].as_u64().unwrap();
        assert!((10 * MIN..70 * MIN).contains(&t), "{t}");
        assert_eq!(a["outcome"], "failed_transient");
        assert!(a["requeueAfterMs"].as_u64().unwrap() <= 5 * MIN);
    }
    let healed = us
        .iter()
        .find(|a| a["atMs"].as_u64().unwrap() >= 70 * MIN)
        .expect("an attempt after the partition");
    assert_eq!(healed["ready"], "True");
    assert!(healed["atMs"].as_u64().unwrap() <= 75 * MIN);
    // The other cluster never noticed.
    let eu = attempts_of(&doc, "web-eu");
    assert!(eu.iter().all(|a| a["ready"] == "True"), "{eu:?}");
    assert_eq!(final_of(&doc, "web-us")["ready"], "True");
}

#[test]
fn the_same_scenario_and_seed_give_byte_identical_text_json_and_svg() {
    let dir = tempfile::tempdir().unwrap();
    let file = example("flaky-fleet.yaml");
    let run = |n: usize| {
        let svg = dir.path().join(format!("{n}.svg"));
        let svg_s = svg.display().to_string();
        let text = ok(&["run", &file, "--quiet"]);
        let json = ok(&["run", &file, "--quiet", "--json", "--svg", &svg_s]);
        (text, json, std::fs::read(&svg).unwrap())
    };
    let a = run(1);
    let b = run(2);
    assert!(a.0 == b.0, "text differs between runs");
    assert!(a.1 == b.1, "JSON differs between runs");
    assert!(a.2 == b.2, "SVG differs between runs");
    // The seed matters: another one fails other applies.
    let other = ok(&["run", &file, "--quiet", "--seed", "7"]);
    assert_ne!(a.0, other);
}

#[test]
fn every_attempt_through_the_core_gives_the_same_output() {
    // By default an unchanged NoOp is answered from the release's last attempt
    // (`world/src/memo.rs`); `--every-attempt` runs the core for each one.
    for name in [
        "flaky-fleet.yaml",
        "slow-rollout.yaml",
        "artifact-outage.yaml",
        "hooks.yaml",
        // A Platform event bumps the world's epoch: no memo made before it answers after.
        "missing-platform.yaml",
    ] {
        let file = example(name);
        for format in [&[][..], &["--json"][..]] {
            let args = |every: bool| {
                let mut a = vec!["run", file.as_str(), "--quiet"];
                a.extend_from_slice(format);
                if every {
                    a.push("--every-attempt");
                }
                a
            };
            let memo = ok(&args(false));
            let every = ok(&args(true));
            assert!(memo == every, "{name} {format:?}: output differs");
        }
    }
}

#[test]
fn the_svg_is_well_formed_with_one_mark_per_attempt_and_a_legend() {
    use quick_xml::events::Event;
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("t.svg");
    let file = example("flaky-fleet.yaml");
    let out = ok(&[
        "run",
        &file,
        "--quiet",
        "--json",
        "--svg",
        &svg.display().to_string(),
    ]);
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    let attempts = doc["attempts"].as_array().unwrap();
    let text = std::fs::read_to_string(&svg).unwrap();
    let (mut marks, mut rows, mut legend, mut depth, mut failed) = (0, 0, 0, 0i32, 0);
    // Parsing to the end fails on any malformed markup; count elements by class.
    let mut reader = quick_xml::Reader::from_str(&text);
    loop {
        let ev = reader.read_event().expect("well-formed SVG");
        let e = match &ev {
            Event::Eof => break,
            Event::Start(e) | Event::Empty(e) => e.clone(),
            Event::End(_) => {
                depth -= 1;
                continue;
            }
            _ => continue,
        };
        if matches!(ev, Event::Start(_)) {
            depth += 1;
        }
        let class = e
            .try_get_attribute("class")
            .unwrap()
            .map(|a| String::from_utf8(a.value.to_vec()).unwrap());
        match class.as_deref() {
            Some("attempt") => {
                marks += 1;
                let outcome = e.try_get_attribute("data-outcome").unwrap().unwrap();
                if outcome.value.as_ref() == b"failed_transient" {
                    failed += 1;
                }
            }
            Some("release") => rows += 1,
            Some("legend") => legend += 1,
            _ => {}
        }
    }
    assert_eq!(depth, 0, "every element closed");
    assert_eq!(marks, attempts.len());
    let failed_json = attempts
        .iter()
        .filter(|a| a["outcome"] == "failed_transient")
        .count();
    assert!(failed_json > 0);
    assert_eq!(failed, failed_json);
    assert_eq!(rows, 20);
    assert_eq!(legend, 1);
}

#[test]
fn copies_make_many_releases_from_one_entry() {
    let doc = json("flaky-fleet.yaml");
    assert_eq!(doc["releases"], 20);
    assert_eq!(doc["final"].as_array().unwrap().len(), 20);
    assert_eq!(final_of(&doc, "web-20")["deleted"], true);
    assert_eq!(final_of(&doc, "web-07")["observedGeneration"], 2);
}

#[test]
fn a_bad_scenario_is_named_with_exit_code_2() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("bad.yaml");
    std::fs::write(&f, "duration: 1h\nreleases:\n  - kind: Deployment\n").unwrap();
    let o = sim(&["run", &f.display().to_string()]);
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert!(
        err.contains("bad.yaml") && err.contains("releases[0]"),
        "{err}"
    );
    std::fs::write(&f, "duration: [").unwrap();
    let o = sim(&["run", &f.display().to_string()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("not a valid scenario"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn hooks_run_in_their_phases_and_a_failed_migration_keeps_the_rest_back() {
    let file = example("hooks.yaml");
    golden("hooks.txt", &ok(&["run", &file, "--quiet"]));
    let doc = json("hooks.yaml");
    let at = |a: &serde_json::Value| a["atMs"].as_u64().unwrap();
    let shop = attempts_of(&doc, "shop");
    // pre-apply: the migration takes 60s; nothing else is applied before it completes.
    let applied: Vec<_> = shop.iter().filter(|a| a["outcome"] == "applied").collect();
    assert_eq!(applied.len(), 1);
    assert!(at(applied[0]) >= 60_000, "{}", applied[0]);
    assert!(
        shop.iter()
            .take_while(|a| a["outcome"] != "applied")
            .all(|a| a["outcome"] == "progressing")
    );
    // post-apply: Ready only after the Deployment (30s) and then the smoke test (20s).
    let ready = shop.iter().find(|a| a["ready"] == "True").unwrap();
    assert!(at(ready) >= at(applied[0]) + 50_000, "{ready}");
    // pre-delete: deleted at 10m, gone only once the backup (40s) has run.
    let deleted = shop.iter().find(|a| a["reason"] == "Deleted").unwrap();
    assert!(at(deleted) >= 10 * MIN + 40_000, "{deleted}");
    assert!(
        shop.iter()
            .filter(|a| at(a) >= 10 * MIN && a["reason"] != "Deleted")
            .all(|a| a["outcome"] == "progressing")
    );
    assert_eq!(final_of(&doc, "shop")["deleted"], true);
    // A failing migration: HookFailed with backoff, retried, its rest never applied.
    let broken = attempts_of(&doc, "broken");
    assert!(broken.iter().all(|a| a["outcome"] != "applied"));
    let failed: Vec<_> = broken
        .iter()
        .filter(|a| a["reason"] == "HookFailed")
        .collect();
    assert!(failed.len() >= 5, "{}", failed.len());
    assert!(failed.iter().all(|a| {
        a["message"]
            .as_str()
            .unwrap()
            .starts_with("pre-apply hook failed: Job/demo/broken-migrate")
    }));
    let delays: Vec<u64> = failed
        .iter()
        .map(|a| a["requeueAfterMs"].as_u64().unwrap())
        .collect();
    assert_eq!(&delays[..4], &[5_000, 10_000, 20_000, 40_000]);
    assert_eq!(final_of(&doc, "broken")["readyReason"], "HookFailed");
}
