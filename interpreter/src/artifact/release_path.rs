//! `spec.path` navigation inside an extracted artifact (SPEC §17): the release package
//! directory must stay inside the artifact once every link is followed.

use std::fs;
use std::path::{Path, PathBuf};

/// Why `spec.path` cannot be used (SPEC §4 rows `PathNotFound` / `ReleaseFileNotFound`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    #[error("path {path:?} not found in artifact: {detail}")]
    /// `spec.path` does not name a directory of the artifact.
    PathNotFound {
        /// The `spec.path` asked for.
        path: String,
        /// What the file system said.
        detail: String,
    },
    #[error("neither instance.cue nor release.cue at path {path:?} in artifact")]
    /// The directory holds neither `instance.cue` (an OPM instance) nor `release.cue`.
    ReleaseFileNotFound {
        /// The `spec.path` asked for.
        path: String,
    },
}

/// Resolves `spec_path` inside the extracted artifact `root` (`.` is the root). Links are
/// followed, and the result must still be a directory inside the root that holds
/// `instance.cue` (an OPM instance, SPEC §30) or `release.cue`.
pub fn resolve_path(root: &Path, spec_path: &str) -> Result<PathBuf, PathError> {
    let not_found = |detail: &str| PathError::PathNotFound {
        path: spec_path.to_owned(),
        detail: detail.to_owned(),
    };
    if spec_path.is_empty() {
        return Err(not_found("empty path"));
    }
    if Path::new(spec_path).is_absolute() {
        return Err(not_found("absolute paths are not allowed"));
    }
    let root = fs::canonicalize(root).map_err(|e| not_found(&e.to_string()))?;
    let dir = fs::canonicalize(root.join(spec_path)).map_err(|_| not_found("does not exist"))?;
    if !dir.starts_with(&root) {
        return Err(not_found("leaves the artifact root"));
    }
    if !dir.is_dir() {
        return Err(not_found("not a directory"));
    }
    if holds(&root, &dir, opm_core::opm::INSTANCE_FILE) || holds(&root, &dir, "release.cue") {
        return Ok(dir);
    }
    Err(PathError::ReleaseFileNotFound {
        path: spec_path.to_owned(),
    })
}

/// Whether `dir` (inside `root`) holds the file `name`, a link to it staying inside `root`.
pub fn holds(root: &Path, dir: &Path, name: &str) -> bool {
    let Ok(root) = fs::canonicalize(root) else {
        return false;
    };
    matches!(fs::canonicalize(dir.join(name)), Ok(file) if file.starts_with(&root) && file.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::effects::local::Verdict;

    #[test]
    fn resolve_path_rules() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        fs::create_dir_all(root.join("apps/web")).unwrap();
        fs::create_dir_all(root.join("empty")).unwrap();
        fs::write(root.join("release.cue"), "package release\n").unwrap();
        fs::write(root.join("apps/web/release.cue"), "package release\n").unwrap();
        fs::write(root.join("file"), "x").unwrap();
        fs::create_dir_all(dir.path().join("outside")).unwrap();
        fs::write(dir.path().join("outside/release.cue"), "x").unwrap();
        std::os::unix::fs::symlink("../outside", root.join("out")).unwrap();
        std::os::unix::fs::symlink("apps/web", root.join("alias")).unwrap();

        let canon = fs::canonicalize(&root).unwrap();
        assert_eq!(resolve_path(&root, ".").unwrap(), canon);
        assert_eq!(
            resolve_path(&root, "./apps/web").unwrap(),
            canon.join("apps/web")
        );
        assert_eq!(
            resolve_path(&root, "alias").unwrap(),
            canon.join("apps/web")
        );
        for bad in [
            "missing",
            "file",
            "..",
            "../outside",
            "out",
            "/etc",
            "",
            "apps/../..",
        ] {
            let err = resolve_path(&root, bad).unwrap_err();
            assert_eq!(err.reason(), "PathNotFound", "{bad}: {err}");
        }
        let err = resolve_path(&root, "empty").unwrap_err();
        assert_eq!(
            err,
            PathError::ReleaseFileNotFound {
                path: "empty".into()
            }
        );
    }
}
