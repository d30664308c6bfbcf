//! A real OCI registry that asks for credentials: the distribution registry
//! (`tools/install` builds it) on a free 127.0.0.1 port with htpasswd (bcrypt) auth, for
//! the `module.secretRef` tests. `cue mod registry` has no authentication.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::process::{self, ManagedPid};
use crate::registry::copy_to_temp;
use crate::tools;

const START_TIMEOUT: Duration = Duration::from_secs(30);

/// A running registry with htpasswd users; stopped when dropped.
#[derive(Debug)]
pub struct AuthRegistry {
    host: String,
    root: PathBuf,
    pid: Option<ManagedPid>,
}

impl AuthRegistry {
    /// Starts a registry accepting exactly `users` (name, password).
    pub async fn start(users: &[(&str, &str)]) -> Result<AuthRegistry> {
        let bin = tools::registry_bin()?;
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0")
                .map_err(|e| Error::io("pick a port", e))?;
            l.local_addr()
                .map_err(|e| Error::io("pick a port", e))?
                .port()
        };
        let host = format!("127.0.0.1:{port}");
        let dir = tempfile::Builder::new()
            .prefix("opm-testenv-authreg-")
            .tempdir()
            .map_err(|e| Error::io("create temp dir", e))?;
        let root = dir.path().to_path_buf();
        let mut htpasswd = String::new();
        for (user, password) in users {
            // The lowest cost bcrypt allows: this is a test fixture, not a password store.
            let hash =
                bcrypt::hash(password, 4).map_err(|e| Error::NotReady(format!("bcrypt: {e}")))?;
            htpasswd.push_str(&format!("{user}:{hash}\n"));
        }
        let write = |name: &str, text: &str| {
            std::fs::write(root.join(name), text).map_err(|e| Error::io(format!("write {name}"), e))
        };
        write("htpasswd", &htpasswd)?;
        write(
            "config.yml",
            &format!(
                "version: 0.1\nlog:\n  level: error\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n    rootdirectory: {}\nhttp:\n  addr: {host}\nauth:\n  htpasswd:\n    realm: opm-test\n    path: {}\n",
                root.join("data").display(),
                root.join("htpasswd").display()
            ),
        )?;
        let mut cmd = Command::new(&bin);
        cmd.arg("serve")
            .arg(root.join("config.yml"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit());
        let pid = process::spawn_managed("registry", cmd, Duration::from_secs(2), Some(dir))
            .map_err(|e| Error::io(format!("start {}", bin.display()), e))?;
        let deadline = Instant::now() + START_TIMEOUT;
        while tokio::net::TcpStream::connect(&host).await.is_err() {
            if let Some(status) = process::exit_status(pid) {
                return Err(Error::NotReady(format!("registry exited with {status}")));
            }
            if Instant::now() >= deadline {
                process::terminate(pid);
                return Err(Error::Timeout {
                    what: "the distribution registry to listen".into(),
                    secs: START_TIMEOUT.as_secs(),
                });
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        Ok(AuthRegistry {
            host,
            root,
            pid: Some(pid),
        })
    }

    /// `127.0.0.1:<port>`.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// A Docker config (`config.json` / `.dockerconfigjson`) with `user:password` for it.
    pub fn docker_config(&self, user: &str, password: &str) -> String {
        let auth = base64(format!("{user}:{password}").as_bytes());
        format!(
            "{{\"auths\":{{\"{}\":{{\"auth\":\"{auth}\"}}}}}}",
            self.host
        )
    }

    /// Publishes the CUE module in `module_dir` at `version` with `user:password`.
    pub async fn publish(
        &self,
        module_dir: &Path,
        version: &str,
        user: &str,
        password: &str,
    ) -> Result<()> {
        let copy = copy_to_temp(module_dir)?;
        let auth = tempfile::tempdir().map_err(|e| Error::io("create temp dir", e))?;
        std::fs::write(
            auth.path().join("config.json"),
            self.docker_config(user, password),
        )
        .map_err(|e| Error::io("write docker config", e))?;
        let output = tokio::process::Command::new(tools::cue_bin()?)
            .args(["mod", "publish", version])
            .current_dir(copy.path())
            .env("CUE_REGISTRY", format!("{}+insecure", self.host))
            .env("CUE_CACHE_DIR", self.root.join("publish-cache"))
            .env("DOCKER_CONFIG", auth.path())
            .kill_on_drop(true)
            .output()
            .await
            .map_err(|e| Error::io("run cue mod publish", e))?;
        if !output.status.success() {
            return Err(Error::Command {
                command: format!("cue mod publish {version} (to {})", self.host),
                status: output.status,
                stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
            });
        }
        Ok(())
    }
}

impl Drop for AuthRegistry {
    fn drop(&mut self) {
        if let Some(pid) = self.pid.take() {
            process::terminate(pid);
        }
    }
}

fn base64(bytes: &[u8]) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(T[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn base64_matches_the_standard_alphabet() {
        assert_eq!(super::base64(b"alice:s3cret-pw"), "YWxpY2U6czNjcmV0LXB3");
        assert_eq!(super::base64(b"a"), "YQ==");
        assert_eq!(super::base64(b"ab"), "YWI=");
    }
}
