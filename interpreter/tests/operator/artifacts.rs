//! Artifact content the operator must refuse or cannot use, end to end (SPEC §4 rows).

use std::io::Write;

use serde_json::json;

use crate::harness::*;

fn is_stalled(o: &opm_core::api::Release) -> bool {
    o.status
        .as_ref()
        .is_some_and(|s| condition(s, "Stalled").is_some_and(|c| c.status == "True"))
}

/// A gzipped tar with one regular entry whose raw name is `name` (no sanitising).
fn tar_gz_with_raw_name(name: &str, contents: &[u8]) -> Vec<u8> {
    let mut header = tar::Header::new_old();
    header.as_old_mut().name[..name.len()].copy_from_slice(name.as_bytes());
    header.set_size(contents.len() as u64);
    header.set_mode(0o644);
    header.set_entry_type(tar::EntryType::Regular);
    header.set_cksum();
    let mut builder = tar::Builder::new(Vec::new());
    builder.append(&header, contents).unwrap();
    let tar = builder.into_inner().unwrap();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&tar).unwrap();
    gz.finish().unwrap()
}

/// A gzipped tar holding a symlink `name` -> `target`.
fn tar_gz_with_symlink(name: &str, target: &str) -> Vec<u8> {
    let mut header = tar::Header::new_gnu();
    header.set_entry_type(tar::EntryType::Symlink);
    header.set_size(0);
    header.set_mode(0o777);
    let mut builder = tar::Builder::new(Vec::new());
    builder.append_link(&mut header, name, target).unwrap();
    let tar = builder.into_inner().unwrap();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&tar).unwrap();
    gz.finish().unwrap()
}

async fn expect_reason(bytes: Vec<u8>, path: &str, reason: &'static str, stalled: bool) {
    let (env, ns) = namespace().await;
    let op = Operator::start(env, &ns.name, |_| {}).await;
    let pkg = Package::start().await;
    pkg.publish_bytes(&ns.client, &ns.name, "src", bytes).await;
    create_rel(&ns.client, &release(&ns.name, "r", "src", path, json!({}))).await;
    let got = wait_rel(&ns.client, &ns.name, "r", reason, reason_is_rel(reason)).await;
    assert_eq!(is_stalled(&got), stalled, "{reason}: {:?}", got.status);
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_path_traversal_archive_stalls_as_invalid_artifact() {
    expect_reason(
        tar_gz_with_raw_name("../evil.cue", b"x"),
        ".",
        "InvalidArtifact",
        true,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_escaping_symlink_stalls_as_invalid_artifact() {
    expect_reason(
        tar_gz_with_symlink("link", "/etc/passwd"),
        ".",
        "InvalidArtifact",
        true,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_artifact_that_is_not_an_archive_stalls_as_invalid_artifact() {
    expect_reason(b"just some text".to_vec(), ".", "InvalidArtifact", true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_artifact_is_refused() {
    let (env, ns) = namespace().await;
    let op = Operator::start(env, &ns.name, |a| a.max_artifact_bytes = 1024).await;
    let pkg = Package::start().await;
    let big = "x".repeat(64 * 1024);
    let files = [("release.cue", format!("package release\n// {big}\n"))];
    let entries: Vec<opm_testenv::archive::Entry> = files
        .iter()
        .map(|(p, c)| opm_testenv::archive::Entry::new(*p, c.as_bytes().to_vec()))
        .collect();
    // Incompressible enough: random-looking bytes defeat gzip.
    let mut noise = Vec::with_capacity(64 * 1024);
    let mut x: u32 = 12345;
    for _ in 0..64 * 1024 {
        x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
        noise.push((x >> 16) as u8);
    }
    let mut entries = entries;
    entries.push(opm_testenv::archive::Entry::new("noise.bin", noise));
    let bytes = opm_testenv::archive::tar_gz(&entries).unwrap();
    assert!(bytes.len() > 1024);
    pkg.publish_bytes(&ns.client, &ns.name, "src", bytes).await;
    create_rel(&ns.client, &release(&ns.name, "r", "src", ".", json!({}))).await;
    let got = wait_rel(&ns.client, &ns.name, "r", "refused", |o| {
        o.status.as_ref().is_some_and(|s| {
            let (st, reason) = ready(s);
            st == "False" && (reason == "InvalidArtifact" || reason == "FetchFailed")
        })
    })
    .await;
    let msg = condition(got.status.as_ref().unwrap(), "Ready")
        .unwrap()
        .message
        .clone();
    assert!(msg.contains("1024"), "the message names the cap: {msg}");
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_release_file_and_a_wrong_kind_stall_with_their_reasons() {
    let files = [("app/other.cue", "package release\n".to_string())];
    let entries: Vec<opm_testenv::archive::Entry> = files
        .iter()
        .map(|(p, c)| opm_testenv::archive::Entry::new(*p, c.as_bytes().to_vec()))
        .collect();
    expect_reason(
        opm_testenv::archive::tar_gz(&entries).unwrap(),
        "app",
        "ReleaseFileNotFound",
        true,
    )
    .await;

    let wrong = [
        ("cue.mod/module.cue", "module: \"example.com/test@v0\"\nlanguage: version: \"v0.17.0\"\n".to_string()),
        ("release.cue", "package release\nkind: \"Bundle\"\nmetadata: {name: \"r\", namespace: \"d\"}\ncomponents: {}\n".to_string()),
    ];
    let entries: Vec<opm_testenv::archive::Entry> = wrong
        .iter()
        .map(|(p, c)| opm_testenv::archive::Entry::new(*p, c.as_bytes().to_vec()))
        .collect();
    expect_reason(
        opm_testenv::archive::tar_gz(&entries).unwrap(),
        ".",
        "UnsupportedKind",
        true,
    )
    .await;
}
