//! Fuzzes the artifact extractor (SPEC §17) with generated archives: structured tar.gz and zip
//! streams built from `arbitrary` input (hostile names, every entry type, pax records, tiny
//! caps) and then often corrupted (bit flips, truncation, garbage). For every input: no panic,
//! nothing written outside the extraction directory (an absolute-path canary next to it stays
//! untouched), no symlink inside that leads out, no special file, caps honoured on success,
//! and every refusal is an archive error (`InvalidArtifact`), never a local I/O error.
//!
//! `OPM_FUZZ_CASES` sets the number of inputs (default 20 000; `make fuzz` runs a million),
//! `OPM_FUZZ_SEED` the seed. A failing input is reported with its seed and case number.

mod support;

use opm_operator::effects::local::Verdict;

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};
use std::time::Instant;

use arbitrary::{Arbitrary, Unstructured};
use opm_operator::artifact::extract::{ExtractError, ExtractLimits, extract};
use support::{RawEntry, gzip, tar_bytes};

/// Path segments names are made of: plain, dot forms, separators and odd bytes.
const SEGMENTS: [&str; 12] = [
    "a", "b", "cue.mod", "..", ".", "", "x\\..\\y", "a b", "ü", "..a", "a..", "~",
];

#[derive(Arbitrary, Debug)]
struct Name {
    absolute: bool,
    /// Absolute names point into the canary directory next to the extraction root.
    into_canary: bool,
    segments: Vec<u8>,
    trailing_slash: bool,
}

#[derive(Arbitrary, Debug)]
enum Kind {
    File,
    Dir,
    Symlink(Name),
    HardLink(Name),
    Char,
    Block,
    Fifo,
    /// A pax extended header whose `path` record renames the next entry.
    PaxPath(Name),
    /// A GNU long-name record for the next entry.
    GnuLongName(Name),
}

#[derive(Arbitrary, Debug)]
struct Entry {
    name: Name,
    kind: Kind,
    size: u8,
    big: bool,
    mode: u16,
}

#[derive(Arbitrary, Debug)]
enum Damage {
    None,
    FlipInner { at: u16, mask: u8 },
    FlipOuter { at: u16, mask: u8 },
    Truncate { keep: u16 },
    AppendGarbage(Vec<u8>),
}

#[derive(Arbitrary, Debug)]
struct Input {
    zip: bool,
    entries: Vec<Entry>,
    damage: Damage,
    max_entries: u8,
    max_bytes: u16,
}

struct Sandbox {
    _dir: tempfile::TempDir,
    root: PathBuf,
    dest: PathBuf,
    canary: PathBuf,
    archive: PathBuf,
}

impl Sandbox {
    fn new() -> Self {
        // tmpfs when there is one: a million extractions are mostly file-system work.
        let base = Path::new("/dev/shm");
        let dir = if base.is_dir() {
            tempfile::tempdir_in(base)
        } else {
            tempfile::tempdir()
        }
        .expect("sandbox dir");
        let root = dir.path().join("root");
        let canary = dir.path().join("canary");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::create_dir_all(&canary).unwrap();
        std::fs::write(canary.join("keep"), b"canary").unwrap();
        Self {
            dest: root.join("x"),
            archive: dir.path().join("artifact"),
            root,
            canary,
            _dir: dir,
        }
    }

    fn name(&self, n: &Name) -> Vec<u8> {
        let mut s = String::new();
        if n.absolute {
            if n.into_canary {
                s.push_str(&self.canary.to_string_lossy());
            }
            s.push('/');
        }
        let parts: Vec<&str> = n
            .segments
            .iter()
            .take(6)
            .map(|b| SEGMENTS[usize::from(*b) % SEGMENTS.len()])
            .collect();
        s.push_str(&parts.join("/"));
        if n.trailing_slash {
            s.push('/');
        }
        if s.is_empty() {
            s.push('a');
        }
        let mut b = s.into_bytes();
        b.truncate(99);
        b
    }
}

fn pax_record(key: &str, value: &[u8]) -> Vec<u8> {
    let body_len = key.len() + value.len() + 3;
    let mut len = body_len + 1;
    while len.to_string().len() + body_len != len {
        len = len.to_string().len() + body_len;
    }
    let mut r = format!("{len} {key}=").into_bytes();
    r.extend_from_slice(value);
    r.push(b'\n');
    r
}

fn data(e: &Entry) -> Vec<u8> {
    let n = if e.big {
        usize::from(e.size) * 64
    } else {
        usize::from(e.size)
    };
    vec![b'z'; n]
}

fn tar_archive(s: &Sandbox, input: &Input) -> Vec<u8> {
    let mut raw = Vec::new();
    for e in input.entries.iter().take(40) {
        let name = s.name(&e.name);
        let mode = u32::from(e.mode) & 0o7777;
        let (kind, link, body) = match &e.kind {
            Kind::File => (tar::EntryType::Regular, None, data(e)),
            Kind::Dir => (tar::EntryType::Directory, None, vec![]),
            Kind::Symlink(t) => (tar::EntryType::Symlink, Some(s.name(t)), vec![]),
            Kind::HardLink(t) => (tar::EntryType::Link, Some(s.name(t)), vec![]),
            Kind::Char => (tar::EntryType::Char, None, vec![]),
            Kind::Block => (tar::EntryType::Block, None, vec![]),
            Kind::Fifo => (tar::EntryType::Fifo, None, vec![]),
            Kind::PaxPath(t) => (
                tar::EntryType::XHeader,
                None,
                pax_record("path", &s.name(t)),
            ),
            Kind::GnuLongName(t) => {
                let mut n = s.name(t);
                n.push(0);
                (tar::EntryType::GNULongName, None, n)
            }
        };
        raw.push(RawEntry {
            name,
            kind,
            link,
            data: body,
            mode,
        });
    }
    let mut inner = tar_bytes(&raw);
    if let Damage::FlipInner { at, mask } = input.damage
        && !inner.is_empty()
    {
        let i = usize::from(at) % inner.len();
        inner[i] ^= mask.max(1);
    }
    gzip(&inner)
}

fn zip_archive(s: &Sandbox, input: &Input) -> Vec<u8> {
    use std::io::Write;
    use zip::write::SimpleFileOptions;
    let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    for e in input.entries.iter().take(40) {
        let name = String::from_utf8_lossy(&s.name(&e.name)).into_owned();
        let mode = match e.mode % 5 {
            0 => 0o644,
            1 => 0o020644, // character device
            2 => 0o010644, // FIFO
            3 => 0o060644, // block device
            _ => u32::from(e.mode),
        };
        let opts = SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated)
            .unix_permissions(mode);
        // The zip writer refuses some combinations (duplicate names): skip those entries.
        let _ = match &e.kind {
            Kind::Dir => w.add_directory(name.as_str(), opts),
            Kind::Symlink(t) | Kind::HardLink(t) | Kind::PaxPath(t) | Kind::GnuLongName(t) => {
                let target = String::from_utf8_lossy(&s.name(t)).into_owned();
                w.add_symlink(name.as_str(), target.as_str(), opts)
            }
            _ => w
                .start_file(name.as_str(), opts)
                .and_then(|()| w.write_all(&data(e)).map_err(Into::into)),
        };
    }
    w.finish().map(|c| c.into_inner()).unwrap_or_default()
}

fn damage(mut bytes: Vec<u8>, d: &Damage) -> Vec<u8> {
    match d {
        Damage::FlipOuter { at, mask } if !bytes.is_empty() => {
            let i = usize::from(*at) % bytes.len();
            bytes[i] ^= (*mask).max(1);
        }
        Damage::Truncate { keep } if !bytes.is_empty() => {
            bytes.truncate(usize::from(*keep) % bytes.len());
        }
        Damage::AppendGarbage(g) => bytes.extend_from_slice(g),
        _ => {}
    }
    bytes
}

/// Resolves `target` of a link at `link` lexically: whether it stays under `root`.
fn lexically_inside(root: &Path, link: &Path, target: &Path) -> bool {
    if target.is_absolute() {
        return target.starts_with(root);
    }
    let mut depth: Vec<Component<'_>> = link
        .parent()
        .unwrap_or(root)
        .strip_prefix(root)
        .map(|p| p.components().collect())
        .unwrap_or_default();
    for c in target.components() {
        match c {
            Component::ParentDir if depth.pop().is_none() => return false,
            Component::Normal(_) => depth.push(c),
            _ => {}
        }
    }
    true
}

/// Checks what is on disk after one extraction; `Err` names the broken guarantee.
fn check_disk(s: &Sandbox, limits: &ExtractLimits, ok: bool) -> Result<(), String> {
    let names = |d: &Path| -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(d)
            .map(|rd| {
                rd.filter_map(Result::ok)
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    };
    if names(&s.root) != ["x"] {
        return Err(format!("written next to the root: {:?}", names(&s.root)));
    }
    if names(&s.canary) != ["keep"]
        || std::fs::read(s.canary.join("keep")).ok().as_deref() != Some(b"canary".as_slice())
    {
        return Err(format!("canary touched: {:?}", names(&s.canary)));
    }
    let root = std::fs::canonicalize(&s.dest).map_err(|e| e.to_string())?;
    // Files, links and directories (also those only implied by nested names) all count
    // against the entry cap, and nothing is nested deeper than the depth cap (SPEC §24).
    let mut files = 0u64;
    let mut bytes = 0u64;
    let mut stack = vec![root.clone()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).map_err(|e| e.to_string())? {
            let p = e.map_err(|e| e.to_string())?.path();
            let m = std::fs::symlink_metadata(&p).map_err(|e| e.to_string())?;
            let t = m.file_type();
            files += 1;
            let depth = p.strip_prefix(&root).map_or(0, |r| r.components().count());
            if depth > limits.max_depth {
                return Err(format!("{} is {depth} deep", p.display()));
            }
            if t.is_symlink() {
                let target = std::fs::read_link(&p).map_err(|e| e.to_string())?;
                if !lexically_inside(&root, &p, &target) {
                    return Err(format!("{} -> {} leads out", p.display(), target.display()));
                }
            } else if t.is_dir() {
                stack.push(p);
            } else if t.is_file() {
                bytes += m.len();
            } else {
                return Err(format!("special file {}", p.display()));
            }
        }
    }
    if ok && (bytes > limits.max_bytes || files > limits.max_entries) {
        return Err(format!(
            "caps exceeded: {files} entries, {bytes} bytes (limits {limits:?})"
        ));
    }
    Ok(())
}

/// Makes every directory under `dir` writable (extracted modes may forbid removal).
fn make_removable(dir: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            make_removable(&e.path());
        }
    }
}

fn reset(dest: &Path) {
    if dest.exists() && std::fs::remove_dir_all(dest).is_err() {
        make_removable(dest);
        std::fs::remove_dir_all(dest).expect("clean the extraction dir");
    }
    std::fs::create_dir(dest).expect("extraction dir");
}

#[derive(Default)]
struct Tally {
    cases: u64,
    extracted: u64,
    refused: BTreeMap<String, u64>,
    failures: Vec<String>,
}

fn variant(e: &ExtractError) -> String {
    format!("{e:?}")
        .split([' ', '{', '('])
        .next()
        .unwrap_or_default()
        .to_string()
}

fn worker(seed: u64, cases: u64) -> Tally {
    let s = Sandbox::new();
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut t = Tally::default();
    let mut buf = vec![0u8; 1024];
    for case in 0..cases {
        let case_seed = rng.u64(..);
        let mut case_rng = fastrand::Rng::with_seed(case_seed);
        let len = case_rng.usize(16..buf.len());
        case_rng.fill(&mut buf[..len]);
        let Ok(input) = Input::arbitrary(&mut Unstructured::new(&buf[..len])) else {
            continue;
        };
        let bytes = if input.zip {
            zip_archive(&s, &input)
        } else {
            tar_archive(&s, &input)
        };
        let bytes = damage(bytes, &input.damage);
        let limits = ExtractLimits {
            max_entries: u64::from(input.max_entries.max(1)),
            max_bytes: u64::from(input.max_bytes.max(1)),
            ..ExtractLimits::default()
        };
        std::fs::write(&s.archive, &bytes).unwrap();
        reset(&s.dest);
        let result = std::panic::catch_unwind(|| extract(&s.archive, &s.dest, &limits));
        t.cases += 1;
        let fail = |why: String| format!("seed {seed} case {case} (input seed {case_seed}): {why}");
        match result {
            Err(_) => t.failures.push(fail("extract panicked".into())),
            Ok(Ok(_)) => {
                t.extracted += 1;
                if let Err(why) = check_disk(&s, &limits, true) {
                    t.failures.push(fail(why));
                }
            }
            Ok(Err(e)) => {
                *t.refused.entry(variant(&e)).or_default() += 1;
                if e.reason() != "InvalidArtifact" {
                    t.failures
                        .push(fail(format!("refused with a local error: {e}")));
                }
                if let Err(why) = check_disk(&s, &limits, false) {
                    t.failures.push(fail(why));
                }
            }
        }
        if t.failures.len() >= 5 {
            break;
        }
    }
    t
}

#[test]
fn generated_archives_never_escape_panic_or_blame_the_disk() {
    let cases: u64 = std::env::var("OPM_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    let seed: u64 = std::env::var("OPM_FUZZ_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_261_130);
    let threads = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .min(4) as u64;
    let started = Instant::now();
    let handles: Vec<_> = (0..threads)
        .map(|i| {
            let n = cases / threads + u64::from(i < cases % threads);
            std::thread::spawn(move || worker(seed.wrapping_add(i), n))
        })
        .collect();
    let mut all = Tally::default();
    for h in handles {
        let t = h.join().expect("worker");
        all.cases += t.cases;
        all.extracted += t.extracted;
        for (k, v) in t.refused {
            *all.refused.entry(k).or_default() += v;
        }
        all.failures.extend(t.failures);
    }
    let secs = started.elapsed().as_secs_f64();
    eprintln!(
        "fuzz_extract: {} inputs in {secs:.1} s ({:.0}/s), {} extracted, refused: {:?}",
        all.cases,
        all.cases as f64 / secs,
        all.extracted,
        all.refused
    );
    assert!(all.failures.is_empty(), "{:#?}", all.failures);
    // The generator must reach both outcomes and the interesting refusals, or it tests nothing.
    assert!(all.extracted > 0, "no input extracted");
    if all.cases >= 5_000 {
        for v in [
            "EscapingName",
            "AbsoluteName",
            "EscapingLink",
            "HardLink",
            "SpecialFile",
            "TooManyEntries",
            "TooLarge",
            "Corrupt",
            "UnknownFormat",
        ] {
            assert!(
                all.refused.contains_key(v),
                "no input was refused as {v}: {:?}",
                all.refused
            );
        }
    }
}
