//! Hardened extraction against a hostile-archive corpus built here (SPEC §17). Every refused
//! archive must leave the parent of the extraction directory holding nothing but it.

mod support;

use std::path::{Path, PathBuf};

use opm_core::outcome::FailureClass;
use opm_operator::artifact::extract::{ArchiveFormat, ExtractError, ExtractLimits, extract};
use opm_operator::artifact::release_path::resolve_path;
use opm_operator::effects::local::Verdict;
use support::{RawEntry, ZipEntry, dir, file, names_in, special, symlink, tar_gz, zip_bytes};
use tar::EntryType;

/// A temp parent holding the archive file outside it and a fresh `x` extraction dir.
struct Scene {
    parent: tempfile::TempDir,
    archive_dir: tempfile::TempDir,
}

impl Scene {
    fn new() -> Self {
        Self {
            parent: tempfile::tempdir().unwrap(),
            archive_dir: tempfile::tempdir().unwrap(),
        }
    }

    fn dest(&self) -> PathBuf {
        self.parent.path().join("x")
    }

    fn run(
        &self,
        bytes: &[u8],
        limits: &ExtractLimits,
    ) -> Result<opm_operator::artifact::extract::ExtractStats, ExtractError> {
        let archive = self.archive_dir.path().join("artifact");
        std::fs::write(&archive, bytes).unwrap();
        std::fs::create_dir(self.dest()).unwrap();
        extract(&archive, &self.dest(), limits)
    }

    /// The SPEC guarantee: nothing but the extraction dir in its parent.
    fn assert_contained(&self) {
        assert_eq!(names_in(self.parent.path()), ["x"]);
        assert_eq!(names_in(self.archive_dir.path()), ["artifact"]);
    }
}

fn refused(bytes: &[u8], limits: &ExtractLimits) -> ExtractError {
    let scene = Scene::new();
    let err = scene
        .run(bytes, limits)
        .expect_err("archive must be refused");
    scene.assert_contained();
    assert_eq!(err.class(), FailureClass::Stalled, "{err:?}");
    assert_eq!(err.reason(), "InvalidArtifact");
    err
}

fn refused_tar(entries: &[RawEntry]) -> ExtractError {
    refused(&tar_gz(entries), &ExtractLimits::default())
}

#[test]
fn a_normal_tarball_extracts_and_resolves() {
    let scene = Scene::new();
    let mut exec = file("bin/tool.sh", b"#!/bin/sh\n");
    exec.mode = 0o755;
    let stats = scene
        .run(
            &tar_gz(&[
                dir("./"),
                dir("./apps/"),
                file("./old-style-dir/", b""),
                file("./apps/web/release.cue", b"package release\n"),
                file("apps/web/../other/a.cue", b"x"),
                symlink("apps/current", "web"),
                symlink("apps/web/up", "../other"),
                exec,
            ]),
            &ExtractLimits::default(),
        )
        .expect("extract");
    assert_eq!(stats.format, ArchiveFormat::TarGz);
    assert_eq!(stats.entries, 8);
    assert!(scene.dest().join("old-style-dir").is_dir());
    assert_eq!(stats.bytes, 16 + 1 + 10);
    let root = scene.dest();
    assert_eq!(names_in(&root.join("apps")), ["current", "other", "web"]);
    assert_eq!(
        std::fs::read(root.join("apps/current/up/a.cue")).unwrap(),
        b"x"
    );
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(root.join("bin/tool.sh"))
            .unwrap()
            .permissions()
            .mode()
            & 0o111,
        0o111
    );
    let canon = std::fs::canonicalize(&root).unwrap();
    assert_eq!(
        resolve_path(&root, "apps/web").unwrap(),
        canon.join("apps/web")
    );
    assert_eq!(
        resolve_path(&root, "./apps/current").unwrap(),
        canon.join("apps/web")
    );
    assert_eq!(
        resolve_path(&root, "apps/other").unwrap_err().reason(),
        "ReleaseFileNotFound"
    );
    assert_eq!(
        resolve_path(&root, "apps/nope").unwrap_err().reason(),
        "PathNotFound"
    );
    scene.assert_contained();
}

#[test]
fn a_normal_zip_extracts() {
    let scene = Scene::new();
    let stats = scene
        .run(
            &zip_bytes(&[
                ZipEntry::Dir("m/"),
                ZipEntry::File("m/release.cue", b"package release\n"),
                ZipEntry::Mode("m/run", b"#!", 0o100755),
                ZipEntry::Symlink("m/alias", "release.cue"),
            ]),
            &ExtractLimits::default(),
        )
        .expect("extract");
    assert_eq!(stats.format, ArchiveFormat::Zip);
    assert_eq!(stats.entries, 4);
    assert_eq!(
        std::fs::read(scene.dest().join("m/alias")).unwrap(),
        b"package release\n"
    );
    assert!(resolve_path(&scene.dest(), "m").is_ok());
}

#[test]
fn traversal_names_are_refused() {
    for name in ["../evil", "a/../../evil", "./../evil", "a/b/../../../evil"] {
        let err = refused_tar(&[file(name, b"pwned")]);
        assert_eq!(err, ExtractError::EscapingName { name: name.into() });
    }
}

#[test]
fn absolute_names_are_refused() {
    let target = std::env::temp_dir().join(format!("opm-abs-{}", std::process::id()));
    let name = target.to_string_lossy().into_owned();
    let err = refused_tar(&[file(&name, b"pwned")]);
    assert_eq!(err, ExtractError::AbsoluteName { name });
    assert!(!target.exists());
}

#[test]
fn escaping_and_absolute_symlinks_are_refused() {
    for (name, target) in [
        ("l", "../outside"),
        ("a/l", "../../x"),
        ("l", "/etc/passwd"),
    ] {
        // (an empty target is refused too, below)
        let err = refused_tar(&[symlink(name, target)]);
        assert_eq!(
            err,
            ExtractError::EscapingLink {
                name: name.into(),
                target: target.into()
            }
        );
    }
}

#[test]
fn a_link_chain_that_escapes_physically_is_refused() {
    // Lexically `b -> a/..` stays at the root; physically `a` is the root, so `b` is its parent.
    let err = refused_tar(&[symlink("a", "."), symlink("b", "a/..")]);
    assert!(
        matches!(err, ExtractError::EscapingLink { ref name, .. } if name == "b"),
        "{err:?}"
    );
}

#[test]
fn writes_through_a_symlink_are_refused() {
    let err = refused_tar(&[dir("sub/"), symlink("l", "sub"), file("l/f", b"x")]);
    assert_eq!(err, ExtractError::ThroughLink { name: "l/f".into() });
    // A file replacing an already extracted link is refused too (it would be written through it).
    let err = refused_tar(&[file("t", b""), symlink("l", "t"), file("l", b"x")]);
    assert!(matches!(err, ExtractError::Corrupt { .. }), "{err:?}");
}

#[test]
fn hard_links_devices_and_fifos_are_refused() {
    let err = refused_tar(&[file("a", b"x"), special("b", EntryType::Link, Some("a"))]);
    assert_eq!(err, ExtractError::HardLink { name: "b".into() });
    for (kind, what) in [
        (EntryType::Char, "device"),
        (EntryType::Block, "device"),
        (EntryType::Fifo, "FIFO"),
    ] {
        let err = refused_tar(&[special("dev", kind, None)]);
        assert_eq!(
            err,
            ExtractError::SpecialFile {
                name: "dev".into(),
                kind: what.into()
            }
        );
    }
}

#[test]
fn more_entries_than_the_cap_are_refused() {
    let mut entries: Vec<RawEntry> = (0..10_001).map(|_| dir("d/")).collect();
    let err = refused(&tar_gz(&entries), &ExtractLimits::default());
    assert_eq!(err, ExtractError::TooManyEntries { limit: 10_000 });
    // Exactly at the cap is fine.
    entries.pop();
    let scene = Scene::new();
    assert_eq!(
        scene
            .run(&tar_gz(&entries), &ExtractLimits::default())
            .unwrap()
            .entries,
        10_000
    );
}

#[test]
fn a_gzip_bomb_stops_at_the_size_cap() {
    let limits = ExtractLimits {
        max_bytes: 1024 * 1024,
        ..ExtractLimits::default()
    };
    let bomb = tar_gz(&[file("zeros", &vec![0u8; 8 * 1024 * 1024])]);
    assert!(bomb.len() < 100_000, "bomb is {} bytes", bomb.len());
    let err = refused(&bomb, &limits);
    assert_eq!(err, ExtractError::TooLarge { limit: 1024 * 1024 });
}

#[test]
fn the_cap_counts_bytes_across_entries() {
    let limits = ExtractLimits {
        max_bytes: 100_000,
        ..ExtractLimits::default()
    };
    let entries: Vec<RawEntry> = (0..5)
        .map(|i| file(&format!("f{i}"), &[1u8; 30_000]))
        .collect();
    let err = refused(&tar_gz(&entries), &limits);
    assert_eq!(err, ExtractError::TooLarge { limit: 100_000 });
    let scene = Scene::new();
    assert_eq!(
        scene.run(&tar_gz(&entries[..3]), &limits).unwrap().bytes,
        90_000
    );
}

#[test]
fn truncated_gzip_is_refused() {
    let tgz = tar_gz(&[file("release.cue", &[b'a'; 20_000]), file("b", b"y")]);
    for cut in [tgz.len() / 2, tgz.len() - 4, 10] {
        let err = refused(&tgz[..cut], &ExtractLimits::default());
        assert!(
            matches!(err, ExtractError::Corrupt { .. }),
            "cut {cut}: {err:?}"
        );
    }
}

#[test]
fn unknown_formats_are_refused() {
    let plain_tar = support::tar_bytes(&[file("a", b"x")]);
    assert_eq!(
        refused(&plain_tar, &ExtractLimits::default()),
        ExtractError::UnknownFormat
    );
    assert_eq!(
        refused(b"{\"json\": true}", &ExtractLimits::default()),
        ExtractError::UnknownFormat
    );
    // Gzip of something that is not a tarball.
    let err = refused(&support::gzip(&[0xffu8; 2000]), &ExtractLimits::default());
    assert!(matches!(err, ExtractError::Corrupt { .. }), "{err:?}");
}

#[test]
fn zip_traversal_and_absolute_names_are_refused() {
    let err = refused(
        &zip_bytes(&[ZipEntry::File("../evil", b"x")]),
        &ExtractLimits::default(),
    );
    assert_eq!(
        err,
        ExtractError::EscapingName {
            name: "../evil".into()
        }
    );
    let err = refused(
        &zip_bytes(&[ZipEntry::File("a/../../evil", b"x")]),
        &ExtractLimits::default(),
    );
    assert_eq!(
        err,
        ExtractError::EscapingName {
            name: "a/../../evil".into()
        }
    );
    let err = refused(
        &zip_bytes(&[ZipEntry::File("/tmp/opm-evil", b"x")]),
        &ExtractLimits::default(),
    );
    assert_eq!(
        err,
        ExtractError::AbsoluteName {
            name: "/tmp/opm-evil".into()
        }
    );
    assert!(!Path::new("/tmp/opm-evil").exists());
}

#[test]
fn zip_escaping_symlinks_and_fifos_are_refused() {
    let err = refused(
        &zip_bytes(&[ZipEntry::Symlink("l", "../../etc")]),
        &ExtractLimits::default(),
    );
    assert_eq!(
        err,
        ExtractError::EscapingLink {
            name: "l".into(),
            target: "../../etc".into()
        }
    );
    let err = refused(
        &zip_bytes(&[ZipEntry::Symlink("l", "/etc")]),
        &ExtractLimits::default(),
    );
    assert!(matches!(err, ExtractError::EscapingLink { .. }), "{err:?}");
    let fifo = support::zip_set_mode(zip_bytes(&[ZipEntry::File("p", b"")]), "p", 0o010644);
    let err = refused(&fifo, &ExtractLimits::default());
    assert_eq!(
        err,
        ExtractError::SpecialFile {
            name: "p".into(),
            kind: "FIFO".into()
        }
    );
}

#[test]
fn a_zip_bomb_stops_at_the_size_cap() {
    let limits = ExtractLimits {
        max_bytes: 1024 * 1024,
        ..ExtractLimits::default()
    };
    let zeros = vec![0u8; 8 * 1024 * 1024];
    let bomb = zip_bytes(&[
        ZipEntry::File("a", &zeros[..4 * 1024 * 1024]),
        ZipEntry::File("b", &zeros),
    ]);
    assert!(bomb.len() < 100_000, "bomb is {} bytes", bomb.len());
    assert_eq!(
        refused(&bomb, &limits),
        ExtractError::TooLarge { limit: 1024 * 1024 }
    );
}

#[test]
fn a_zip_with_too_many_entries_is_refused_before_writing() {
    let names: Vec<String> = (0..11).map(|i| format!("f{i}")).collect();
    let entries: Vec<ZipEntry<'_>> = names.iter().map(|n| ZipEntry::File(n, b"x")).collect();
    let limits = ExtractLimits {
        max_entries: 10,
        ..ExtractLimits::default()
    };
    let scene = Scene::new();
    let err = scene.run(&zip_bytes(&entries), &limits).unwrap_err();
    assert_eq!(err, ExtractError::TooManyEntries { limit: 10 });
    assert!(names_in(&scene.dest()).is_empty());
}

#[test]
fn a_non_empty_destination_is_refused() {
    let scene = Scene::new();
    std::fs::create_dir(scene.dest()).unwrap();
    std::fs::write(scene.dest().join("old"), b"x").unwrap();
    let archive = scene.archive_dir.path().join("a");
    std::fs::write(&archive, tar_gz(&[file("a", b"x")])).unwrap();
    let err = extract(&archive, &scene.dest(), &ExtractLimits::default()).unwrap_err();
    assert!(matches!(err, ExtractError::Io { .. }), "{err:?}");
    assert_eq!(err.class(), FailureClass::Transient);
}

#[test]
fn zip_devices_are_refused() {
    for mode in [0o020644, 0o060644] {
        let dev = support::zip_set_mode(zip_bytes(&[ZipEntry::File("d", b"")]), "d", mode);
        let err = refused(&dev, &ExtractLimits::default());
        assert_eq!(
            err,
            ExtractError::SpecialFile {
                name: "d".into(),
                kind: "device".into()
            }
        );
    }
}

#[test]
fn a_symlink_without_target_is_refused() {
    let err = refused_tar(&[symlink("l", "")]);
    assert!(
        matches!(
            err,
            ExtractError::Corrupt { .. } | ExtractError::EscapingLink { .. }
        ),
        "{err:?}"
    );
}

/// A PAX `path` record, as tar writers put it in an extended header before an entry.
fn pax_path(value: &str) -> Vec<u8> {
    pax_record("path", value)
}

fn pax_record(key: &str, value: &str) -> Vec<u8> {
    let body = format!(" {key}={value}\n");
    // The length counts its own digits.
    let mut len = body.len() + 1;
    while format!("{len}{body}").len() != len {
        len += 1;
    }
    format!("{len}{body}").into_bytes()
}

#[test]
fn escaping_names_hidden_in_pax_or_gnu_long_name_records_are_refused() {
    let mut pax = special("PaxHeaders/ok", EntryType::XHeader, None);
    pax.data = pax_path("../pax-evil");
    let err = refused_tar(&[pax, file("ok", b"x")]);
    assert_eq!(
        err,
        ExtractError::EscapingName {
            name: "../pax-evil".into()
        }
    );

    let long = format!("{}/../../../gnu-evil", "d".repeat(120));
    let mut gnu = special("././@LongLink", EntryType::GNULongName, None);
    gnu.data = format!("{long}\0").into_bytes();
    let err = refused_tar(&[gnu, file("short", b"x")]);
    assert_eq!(err, ExtractError::EscapingName { name: long });

    // The same records with harmless names extract under those names.
    let scene = Scene::new();
    let mut pax = special("PaxHeaders/ok", EntryType::XHeader, None);
    pax.data = pax_path("deep/pax-name");
    scene
        .run(&tar_gz(&[pax, file("ok", b"x")]), &ExtractLimits::default())
        .unwrap();
    assert_eq!(
        std::fs::read(scene.dest().join("deep/pax-name")).unwrap(),
        b"x"
    );
    assert!(!scene.dest().join("ok").exists());
}

/// Found by `fuzz_extract`: a name the file system refuses (ENAMETOOLONG) used to surface as
/// a local I/O error, i.e. a transient `FetchFailed` retried forever.
#[test]
fn names_longer_than_the_file_system_allows_are_the_archives_fault() {
    let long_component = "n".repeat(300);
    let mut pax = special("PaxHeaders/ok", EntryType::XHeader, None);
    pax.data = pax_path(&format!("dir/{long_component}"));
    let err = refused_tar(&[pax, file("ok", b"x")]);
    assert!(matches!(err, ExtractError::NameTooLong { .. }), "{err:?}");

    let deep = vec!["d".repeat(200); 12].join("/");
    let mut gnu = special("././@LongLink", EntryType::GNULongName, None);
    gnu.data = format!("{deep}\0").into_bytes();
    let err = refused_tar(&[gnu, file("short", b"x")]);
    assert!(matches!(err, ExtractError::NameTooLong { .. }), "{err:?}");

    let mut pax = special("PaxHeaders/l", EntryType::XHeader, None);
    pax.data = pax_record("linkpath", &vec!["t"; 2100].join("/"));
    let err = refused_tar(&[pax, symlink("link", "short")]);
    assert!(matches!(err, ExtractError::NameTooLong { .. }), "{err:?}");
}

/// Directories under `dir` (not counting it), links not followed.
fn dirs_under(dir: &Path) -> u64 {
    let mut n = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                n += 1;
                stack.push(e.path());
            }
        }
    }
    n
}

/// Issue 13 item 4's archive: 100 entries whose deep names (`d07/a/a/…/a/f`, 1 013
/// directories each) imply 101 300 directories from about 2 KB of tar.gz.
fn directory_bomb() -> Vec<u8> {
    let entries: Vec<RawEntry> = (0..100)
        .map(|i| file(&format!("d{i:02}/{}f", "a/".repeat(1012)), b""))
        .collect();
    tar_gz(&entries)
}

/// The same idea inside the depth cap: 200 entries 64 deep imply 12 600 directories, more
/// than the entry cap (directories count too).
fn wide_directory_bomb() -> Vec<RawEntry> {
    (0..200)
        .map(|i| file(&format!("w{i:03}/{}f", "b/".repeat(62)), b""))
        .collect()
}

/// Runs `bytes` through a fresh scene and prints what it cost: the directories left on disk
/// by the extraction (before the caller removes its temporary directory) and the time.
fn measure(
    what: &str,
    bytes: &[u8],
) -> Result<opm_operator::artifact::extract::ExtractStats, ExtractError> {
    let scene = Scene::new();
    let t = std::time::Instant::now();
    let res = scene.run(bytes, &ExtractLimits::default());
    let took = t.elapsed();
    let dirs = dirs_under(&scene.dest());
    eprintln!(
        "{what}: {} bytes of archive -> {dirs} directories created in {took:.2?}: {res:?}",
        bytes.len()
    );
    if res.is_err() {
        scene.assert_contained();
    }
    res
}

#[test]
fn a_directory_bomb_is_refused_before_it_fills_the_disk() {
    let bomb = directory_bomb();
    let err = measure("tar.gz directory bomb (100 entries, 1013 deep)", &bomb)
        .expect_err("a directory bomb must be refused");
    assert_eq!(err.reason(), "InvalidArtifact", "{err}");
    assert!(err.to_string().contains("64"), "names the depth cap: {err}");

    let wide = tar_gz(&wide_directory_bomb());
    let err = measure("tar.gz wide directory bomb (200 entries, 64 deep)", &wide)
        .expect_err("directories count against the entry cap");
    assert_eq!(err.reason(), "InvalidArtifact", "{err}");
    assert!(
        err.to_string().contains("10000"),
        "names the entry cap: {err}"
    );
}

#[test]
fn a_zip_directory_bomb_is_refused_too() {
    let deep: Vec<String> = (0..100)
        .map(|i| format!("d{i:02}/{}f", "a/".repeat(1012)))
        .collect();
    let deep: Vec<ZipEntry<'_>> = deep.iter().map(|n| ZipEntry::File(n, b"")).collect();
    let err = measure(
        "zip directory bomb (100 entries, 1013 deep)",
        &zip_bytes(&deep),
    )
    .expect_err("refused");
    assert_eq!(err.reason(), "InvalidArtifact", "{err}");
    let wide: Vec<String> = (0..200)
        .map(|i| format!("w{i:03}/{}f", "b/".repeat(62)))
        .collect();
    let wide: Vec<ZipEntry<'_>> = wide.iter().map(|n| ZipEntry::File(n, b"")).collect();
    let err = measure(
        "zip wide directory bomb (200 entries, 64 deep)",
        &zip_bytes(&wide),
    )
    .expect_err("refused");
    assert_eq!(err.reason(), "InvalidArtifact", "{err}");
}

#[test]
fn a_dangling_link_that_would_leave_the_root_once_its_path_appears_is_refused() {
    // `deep/up -> ..` is the root; `s -> deep/up/../outside-secret` is lexically inside
    // (`outside-secret`), but physically the root's parent's `outside-secret`: nothing there
    // while extracting, so a physical check sees a harmless dangling link. Whoever creates
    // that path later (another artifact's extraction, say) is read through `s`.
    let scene = Scene::new();
    let res = scene.run(
        &tar_gz(&[
            dir("deep/"),
            symlink("s", "deep/up/../outside-secret"),
            symlink("deep/up", ".."),
        ]),
        &ExtractLimits::default(),
    );
    if res.is_ok() {
        std::fs::write(
            scene.parent.path().join("outside-secret"),
            "another tenant's",
        )
        .unwrap();
        let leaked = std::fs::read_to_string(scene.dest().join("s"));
        panic!("accepted; once the path appears, reading the link gives {leaked:?}");
    }
    let err = res.unwrap_err();
    scene.assert_contained();
    assert!(
        matches!(err, ExtractError::EscapingLink { ref name, .. } if name == "s"),
        "{err:?}"
    );
}

#[test]
fn a_link_chain_through_a_later_link_is_refused_whatever_the_order() {
    // `b -> a/..` before `a -> .` exists: resolved only once `a` is there.
    for entries in [
        vec![symlink("b", "a/.."), symlink("a", ".")],
        vec![symlink("b", "a/../x"), symlink("a", ".")],
        vec![dir("d/"), symlink("d/l", ".."), symlink("c", "d/l/d/l/..")],
    ] {
        let err = refused_tar(&entries);
        assert!(matches!(err, ExtractError::EscapingLink { .. }), "{err:?}");
    }
}

#[test]
fn nothing_is_written_through_a_link_created_earlier_even_a_dangling_one() {
    // `l -> sub` dangles when written; `sub/` then appears, and `l/f` would land in `sub`.
    let err = refused_tar(&[symlink("l", "sub"), dir("sub/"), file("l/f", b"x")]);
    assert_eq!(err, ExtractError::ThroughLink { name: "l/f".into() });
    // The same through zip.
    let err = refused(
        &zip_bytes(&[
            ZipEntry::Symlink("l", "sub"),
            ZipEntry::Dir("sub/"),
            ZipEntry::File("l/f", b"x"),
        ]),
        &ExtractLimits::default(),
    );
    assert_eq!(err, ExtractError::ThroughLink { name: "l/f".into() });
}

#[test]
fn extraction_past_its_deadline_is_a_transient_fetch_failure() {
    // SPEC §24: extraction runs within --fetch-timeout; over it the attempt is retried
    // (the archive may be fine, the disk slow), and nothing is left next to the root.
    let entries: Vec<RawEntry> = (0..2000)
        .map(|i| file(&format!("d{}/f{i}", i % 50), &[7u8; 4096]))
        .collect();
    let bytes = tar_gz(&entries);
    for limits in [
        ExtractLimits {
            timeout: std::time::Duration::ZERO,
            ..ExtractLimits::default()
        },
        ExtractLimits {
            timeout: std::time::Duration::from_millis(5),
            ..ExtractLimits::default()
        },
    ] {
        let scene = Scene::new();
        let t = std::time::Instant::now();
        let err = scene.run(&bytes, &limits).expect_err("over the deadline");
        eprintln!(
            "deadline {:?}: stopped after {:.2?}: {err}",
            limits.timeout,
            t.elapsed()
        );
        scene.assert_contained();
        assert!(matches!(err, ExtractError::Deadline { .. }), "{err:?}");
        assert_eq!(err.class(), FailureClass::Transient);
        assert_eq!(err.reason(), "FetchFailed");
        assert!(err.to_string().contains("--fetch-timeout"), "{err}");
    }
    // With the default budget the same archive extracts.
    let scene = Scene::new();
    let stats = scene.run(&bytes, &ExtractLimits::default()).unwrap();
    assert_eq!((stats.entries, stats.directories), (2000, 50));
}
