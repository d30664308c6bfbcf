//! `module.secretRef` for one `cue` run (SPEC §27): the Docker config goes into a private
//! temporary directory (mode 0700, `config.json` mode 0600) named by `DOCKER_CONFIG` for
//! that child only, removed when the run ends, never a shared file. `cue`'s module cache of
//! that run lives in the same private directory and goes with it: a module pulled with one
//! tenant's credentials is never where another render could read it, so a release with
//! other (or wrong) credentials must pull, and be refused, itself; and no credential keeps
//! a copy of a module on disk ([`crate::cue::cue_cache`]).

use std::ffi::OsString;
use std::io::Write;
use std::path::Path;

use crate::cue::render_error::RenderError;

/// A Docker config on disk for the life of this value.
pub struct PrivateDockerConfig {
    dir: tempfile::TempDir,
}

impl PrivateDockerConfig {
    /// Writes the Docker config into a fresh private (0700) directory for one run.
    pub fn new(bytes: &[u8]) -> std::io::Result<Self> {
        let dir = tempfile::Builder::new().prefix("opm-auth-").tempdir()?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700))?;
        }
        let path = dir.path().join("config.json");
        let mut opts = std::fs::OpenOptions::new();
        opts.write(true).create_new(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            opts.mode(0o600);
        }
        let mut f = opts.open(&path)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        Ok(Self { dir })
    }

    /// The directory (`DOCKER_CONFIG`).
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Environment of the `cue` child: `DOCKER_CONFIG`, and `CUE_CACHE_DIR` = `cache`, or
    /// a directory inside this private one (no cache shared with anyone) when none is set.
    pub fn env(&self, cache: Option<&Path>) -> Vec<(String, OsString)> {
        let cache = cache.map_or_else(|| self.dir.path().join("cue-cache"), Path::to_path_buf);
        vec![
            (
                "DOCKER_CONFIG".into(),
                self.dir.path().as_os_str().to_owned(),
            ),
            ("CUE_CACHE_DIR".into(), cache.into_os_string()),
        ]
    }
}

/// Does `cue`'s message say the registry refused the credentials (HTTP 401/403)?
///
/// A code or word counts only as a token of its own: the message also quotes addresses
/// and module paths, which a tenant chooses. `127.0.0.1:40331` holds "403" and
/// `example.com/denied-mods@v0` holds "denied", and an unreachable registry there is
/// transient, not refused credentials.
pub fn says_refused(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    // Characters that continue an address, a path or a number (a '.' only when more of
    // the name follows it, so "access denied." still ends a sentence).
    let joins = |c: char| c.is_ascii_alphanumeric() || "-_/@".contains(c);
    let standalone = |token: &str| {
        m.match_indices(token).any(|(i, _)| {
            let before = m[..i].chars().next_back();
            let mut rest = m[i + token.len()..].chars();
            let after = match rest.next() {
                Some('.') => rest.next().filter(|&c| joins(c)),
                other => other,
            };
            !before.is_some_and(|b| joins(b) || b == '.' || b == ':') && !after.is_some_and(joins)
        })
    };
    [
        "401",
        "403",
        "unauthorized",
        "forbidden",
        "denied",
        "authentication required",
    ]
    .iter()
    .any(|t| standalone(t))
}

/// A failed pull whose message says the credentials were refused becomes a
/// `ResolutionFailed` that says so (SPEC §27), not a retried "registry unreachable".
pub fn refused_credentials(e: RenderError) -> RenderError {
    match e {
        RenderError::Resolution { message }
        | RenderError::RegistryUnreachable { message }
        | RenderError::Evaluation { message }
            if says_refused(&message) =>
        {
            let message = message
                .split_once("): ")
                .filter(|(head, _)| head.starts_with("the registry refused the module pull"))
                .map_or(message.as_str(), |(_, rest)| rest)
                .to_owned();
            RenderError::Resolution {
                message: format!(
                    "the registry refused the credentials of spec.module.secretRef: {message}"
                ),
            }
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    /// A code or word counts only as a token of its own: addresses and module paths in
    /// the message (which a tenant chooses) never read as refused credentials.
    #[test]
    fn refusals_are_read_from_tokens_not_from_addresses_or_paths() {
        let refused = [
            "GET /v2/x: 401 Unauthorized",
            "unexpected status 403",
            "DENIED: requested access to the resource is denied",
            r#"{"errors":[{"code":"UNAUTHORIZED"}]}"#,
            "403 Forbidden",
            "pull failed: access denied.",
            "unexpected: authentication required",
        ];
        let not_refused = [
            "Get \"http://127.0.0.1:40331/v2/m\": dial tcp 127.0.0.1:40331: connect: connection refused",
            "dial tcp 10.0.0.1:403: connect: connection refused",
            "digest sha256:a4011f: 14030 bytes",
            "GET http://example.com/v2/m/403/x: connection reset",
            "cannot fetch example.com/denied-mods@v0.1.0: dial tcp: lookup example.com: no such host",
            "module registry.local/forbidden/app@v0: i/o timeout",
            "module unauthorized.example/x@v0: i/o timeout",
        ];
        for m in refused {
            assert!(says_refused(m), "not read as refused: {m}");
        }
        for m in not_refused {
            assert!(!says_refused(m), "read as refused: {m}");
        }
    }

    use super::*;

    #[test]
    fn the_config_is_private_and_gone_after_the_run() {
        let cfg = PrivateDockerConfig::new(b"{\"auths\":{}}").unwrap();
        let dir = cfg.path().to_path_buf();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode(&dir), 0o700);
            assert_eq!(mode(&dir.join("config.json")), 0o600);
        }
        let env = cfg.env(None);
        assert_eq!(env[0].1, dir.as_os_str());
        assert!(std::path::PathBuf::from(&env[1].1).starts_with(&dir));
        drop(cfg);
        assert!(!dir.exists());
    }

    #[test]
    fn refusals_are_named() {
        // What cue v0.17.1 prints for a pull with wrong credentials (checked against
        // distribution v3.1.2 with htpasswd).
        let stderr = "opm.internal/release@v0: import failed: cannot find package \"private.example/modules/priv@v0\": cannot fetch private.example/modules/priv@v0.1.0: module private.example/modules/priv@v0.1.0: 401 Unauthorized: unauthorized: authentication required:\n    ./release.cue:2:8";
        let classified = crate::cue::render::classify_stderr(stderr);
        assert!(
            matches!(&classified, RenderError::Resolution { message } if message.contains("refused the module pull")),
            "{classified:?}"
        );
        let e = refused_credentials(classified);
        assert!(
            matches!(&e, RenderError::Resolution { message } if message.contains("refused the credentials")),
            "{e:?}"
        );
        let e = refused_credentials(RenderError::RegistryUnreachable {
            message: "connection refused".into(),
        });
        assert!(matches!(e, RenderError::RegistryUnreachable { .. }));
    }
}
