//! The hostile-archive corpus end to end (issue 7): every archive, served over real HTTP to
//! the real operator binary, ends as `InvalidArtifact`, and not one byte lands outside the
//! extraction directory — checked on a canary tree holding the operator's `--cache-dir`
//! and its `TMPDIR`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use opm_core::api::Release;
use serde_json::json;
use tar::EntryType;

use crate::harness::*;
use crate::support::{self, RawEntry, ZipEntry, dir, file, special, symlink, tar_gz, zip_bytes};

/// What every hostile entry holds: a file with exactly these bytes anywhere is a leak.
const PAYLOAD: &[u8] = b"OPM-HOSTILE-PAYLOAD\n";
/// The extracted-size cap the operator runs with, so the bombs stay small.
const CAP: usize = 1024 * 1024;

/// (name, archive) for every corpus entry; `outside` is an absolute path in the canary tree.
fn corpus(outside: &Path) -> Vec<(&'static str, Vec<u8>)> {
    let abs = outside.join("abs-evil").display().to_string();
    let abs_dir = outside.display().to_string();
    let zeros = vec![0u8; 2 * CAP];
    // Incompressible-ish, so the size is the entry's and not a bomb's.
    let big: Vec<u8> = (0..CAP + 4096).map(|i| (i * 7919 % 251) as u8).collect();
    let many: Vec<RawEntry> = (0..10_001).map(|i| file(&format!("f{i}"), b"")).collect();
    let full = tar_gz(&[file("release.cue", &[b'a'; 20_000]), file("b", PAYLOAD)]);
    let zip_many: Vec<String> = (0..10_001).map(|i| format!("z{i}")).collect();
    let zip_many: Vec<ZipEntry<'_>> = zip_many.iter().map(|n| ZipEntry::File(n, b"")).collect();
    let mut pax = special("PaxHeaders/ok", EntryType::XHeader, None);
    pax.data = b"29 path=../../../../pax-evil\n".to_vec();
    vec![
        (
            "traversal",
            tar_gz(&[file("../../../../tar-evil", PAYLOAD)]),
        ),
        (
            "traversal-nested",
            tar_gz(&[file("a/../../../../../tar-evil2", PAYLOAD)]),
        ),
        ("absolute", tar_gz(&[file(&abs, PAYLOAD)])),
        (
            "symlink-escaping",
            tar_gz(&[
                symlink("l", "../../../.."),
                file("l/tar-link-evil", PAYLOAD),
            ]),
        ),
        (
            "symlink-absolute",
            tar_gz(&[symlink("l", &abs_dir), file("l/abs-link-evil", PAYLOAD)]),
        ),
        (
            "hard-link",
            tar_gz(&[file("a", PAYLOAD), special("b", EntryType::Link, Some("a"))]),
        ),
        (
            "char-device",
            tar_gz(&[special("dev", EntryType::Char, None)]),
        ),
        (
            "block-device",
            tar_gz(&[special("dev", EntryType::Block, None)]),
        ),
        ("fifo", tar_gz(&[special("pipe", EntryType::Fifo, None)])),
        ("pax-traversal", tar_gz(&[pax, file("ok", PAYLOAD)])),
        ("gzip-bomb", tar_gz(&[file("zeros", &zeros)])),
        ("entry-over-cap", tar_gz(&[file("big", &big)])),
        ("10001-entries", tar_gz(&many)),
        ("truncated-gzip", full[..full.len() / 2].to_vec()),
        (
            "zip-traversal",
            zip_bytes(&[ZipEntry::File("../../../../zip-evil", PAYLOAD)]),
        ),
        ("zip-absolute", zip_bytes(&[ZipEntry::File(&abs, PAYLOAD)])),
        (
            "zip-symlink",
            zip_bytes(&[
                ZipEntry::Symlink("l", "../../../.."),
                ZipEntry::File("l/zip-link-evil", PAYLOAD),
            ]),
        ),
        (
            "zip-fifo",
            support::zip_set_mode(zip_bytes(&[ZipEntry::File("p", b"")]), "p", 0o010644),
        ),
        (
            "zip-bomb",
            zip_bytes(&[ZipEntry::File("a", &zeros), ZipEntry::File("b", &zeros)]),
        ),
        ("zip-10001-entries", zip_bytes(&zip_many)),
        (
            "directory-then-escape",
            tar_gz(&[dir("d/"), file("d/../../../../../dir-evil", PAYLOAD)]),
        ),
    ]
}

/// Every path under `root`: kind, size and content digest (files), link target (links).
fn snapshot(root: &Path) -> BTreeMap<PathBuf, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            let m = std::fs::symlink_metadata(&p).unwrap();
            let ft = m.file_type();
            let desc = if ft.is_dir() {
                stack.push(p.clone());
                "dir".to_string()
            } else if ft.is_file() {
                use std::os::unix::fs::MetadataExt;
                let bytes = std::fs::read(&p).unwrap();
                format!(
                    "file {} {} nlink={}",
                    bytes.len(),
                    opm_testenv::archive::sha256_digest(&bytes),
                    m.nlink()
                )
            } else if ft.is_symlink() {
                format!("symlink -> {}", std::fs::read_link(&p).unwrap().display())
            } else {
                "special".to_string()
            };
            out.insert(p, desc);
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_hostile_archive_is_invalid_artifact_and_nothing_lands_outside() {
    let (env, ns) = namespace().await;
    let canary = tempfile::tempdir().unwrap();
    let root = canary.path();
    let (cache, tmp, outside) = (root.join("cache"), root.join("tmp"), root.join("outside"));
    for d in [&cache, &tmp, &outside] {
        std::fs::create_dir_all(d).unwrap();
    }
    for f in [
        root.join("canary.txt"),
        cache.join("canary.txt"),
        tmp.join("canary.txt"),
        outside.join("keep.txt"),
    ] {
        std::fs::write(f, b"canary\n").unwrap();
    }
    let before = snapshot(root);

    let pkg = Package::start().await;
    let cases = corpus(&outside);
    let names: Vec<String> = cases.iter().map(|(n, _)| format!("h-{n}")).collect();
    for ((_, bytes), name) in cases.into_iter().zip(&names) {
        pkg.publish_bytes(&ns.client, &ns.name, name, bytes).await;
        create_rel(&ns.client, &release(&ns.name, name, name, ".", json!({}))).await;
    }
    // The control: a sound package under the same operator and caps reaches Ready.
    let comps = json!({"c": {"m": configmap("benign", json!({"k": "v"}))}});
    pkg.publish(
        &ns.client,
        &ns.name,
        "benign",
        &release_package("benign", &comps),
    )
    .await;
    create_rel(
        &ns.client,
        &release(&ns.name, "benign", "benign", ".", json!({})),
    )
    .await;
    let log_path = root.join("operator.log");
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_opm-operator"))
        .args(["run", "--allow-operator-identity", "--watch-label-selector"])
        .arg(format!("{TEST_LABEL}={}", ns.name))
        .arg("--cue-binary")
        .arg(opm_testenv::tools::cue_bin().unwrap())
        .arg("--cache-dir")
        .arg(&cache)
        .args(["--max-extracted-bytes", &CAP.to_string()])
        .env("KUBECONFIG", env.kubeconfig_path())
        .env("TMPDIR", &tmp)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log_path).unwrap())
        .kill_on_drop(true)
        .spawn()
        .unwrap();

    let api = kube::Api::<Release>::namespaced(ns.client.clone(), &ns.name);
    let start = Instant::now();
    let reasons = loop {
        let mut reasons = BTreeMap::new();
        for n in &names {
            let r = api.get(n).await.unwrap();
            let s = r.status.unwrap_or_default();
            let stalled = condition(&s, "Stalled").is_some_and(|c| c.status == "True");
            reasons.insert(n.clone(), (ready(&s).1, stalled));
        }
        if reasons.values().all(|(r, _)| r == "InvalidArtifact") || start.elapsed() > WAIT {
            break reasons;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    wait_rel(
        &ns.client,
        &ns.name,
        "benign",
        "the control Ready",
        is_ready_rel,
    )
    .await;
    std::process::Command::new("kill")
        .args(["-TERM", &child.id().unwrap().to_string()])
        .status()
        .unwrap();
    let _ = tokio::time::timeout(Duration::from_secs(30), child.wait()).await;
    let wrong: Vec<_> = reasons
        .iter()
        .filter(|(_, (r, stalled))| r != "InvalidArtifact" || !stalled)
        .collect();
    assert!(
        wrong.is_empty(),
        "not refused as a stalled InvalidArtifact: {wrong:?}"
    );

    let after = snapshot(root);
    for (p, d) in &before {
        assert_eq!(after.get(p), Some(d), "canary {} changed", p.display());
    }
    let mut leaks = Vec::new();
    for (p, d) in &after {
        if before.contains_key(p) || p == &log_path {
            continue;
        }
        let inside_cache_or_tmp = p.starts_with(&cache) || p.starts_with(&tmp);
        let payload = d.starts_with(&format!(
            "file {} {}",
            PAYLOAD.len(),
            opm_testenv::archive::sha256_digest(PAYLOAD)
        ));
        let odd = d == "special"
            || d.starts_with("symlink")
            || !d.ends_with("nlink=1") && d.starts_with("file");
        if !inside_cache_or_tmp || payload || odd {
            leaks.push(format!("{} ({d})", p.display()));
        }
    }
    assert!(
        leaks.is_empty(),
        "written outside an extraction dir: {leaks:#?}"
    );
    // Refused extractions leave no directory behind: only the control's cached root.
    let left: Vec<String> = std::fs::read_dir(cache.join("artifacts"))
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    assert!(left.len() <= 1, "extraction dirs left: {left:?}");
}
