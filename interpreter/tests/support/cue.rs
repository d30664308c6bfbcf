//! The real `cue` binary and a real `cue mod registry` for render tests.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// `OPM_CUE_BIN`, else the agreed tool location (`tools/install`). Missing → the test fails
/// with an instruction rather than skipping.
pub fn cue_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("OPM_CUE_BIN") {
        return PathBuf::from(p);
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache"));
    let p = cache.join("opm-operator/tools/cue-v0.17.1/bin/cue");
    assert!(
        p.is_file(),
        "cue not found at {} (run tools/install or set OPM_CUE_BIN)",
        p.display()
    );
    p
}

/// Writes `files` (relative path → content) under `dir`.
pub fn write_tree(dir: &Path, files: &[(&str, &str)]) {
    for (rel, text) in files {
        let p = dir.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
}

/// The test module: `#config` (closed, with defaults), `#release`, and components computed
/// from both, like the contract's example module.
pub const MODULE_PATH: &str = "test.example/modules/web@v0";

pub fn module_files(message_default: &str) -> Vec<(&'static str, String)> {
    vec![
        (
            "cue.mod/module.cue",
            format!(
                "module: {MODULE_PATH:?}\nlanguage: version: \"v0.17.0\"\nsource: kind: \"self\"\n"
            ),
        ),
        (
            "web.cue",
            format!(
                r#"package web

#config: {{
	image:    string | *"nginx:1.27"
	replicas: int & >=1 | *1
	message:  string | *"{message_default}"
}}
#release: {{name: string, namespace: string}}

components: {{
	web: deployment: {{
		apiVersion: "apps/v1"
		kind:       "Deployment"
		metadata: {{name: #release.name, namespace: #release.namespace}}
		spec: replicas: #config.replicas
		spec: template: spec: containers: [{{name: "web", image: #config.image}}]
	}}
	config: cm: {{
		apiVersion: "v1"
		kind:       "ConfigMap"
		metadata: {{name: "\(#release.name)-config", namespace: #release.namespace}}
		data: message: #config.message
	}}
}}
"#
            ),
        ),
    ]
}

/// A `cue mod registry` child on a free 127.0.0.1 port, killed on drop.
pub struct Registry {
    child: Child,
    pub addr: String,
    /// A private CUE cache so no test sees modules another one downloaded.
    pub cue_cache: tempfile::TempDir,
}

impl Registry {
    pub fn start() -> Self {
        let port = super::closed_port();
        let addr = format!("127.0.0.1:{port}");
        let child = Command::new(cue_bin())
            .args(["mod", "registry", &addr])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start cue mod registry");
        let reg = Self {
            child,
            addr,
            cue_cache: tempfile::tempdir().unwrap(),
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(&reg.addr).is_err() {
            assert!(
                Instant::now() < deadline,
                "cue mod registry did not listen on {}",
                reg.addr
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        reg
    }

    /// `CUE_REGISTRY` value for this registry.
    pub fn cue_registry(&self) -> String {
        format!("{}+insecure", self.addr)
    }

    /// Publishes the test module at `version` (message default differs per version).
    pub fn publish(&self, version: &str) {
        let dir = tempfile::tempdir().unwrap();
        let files = module_files(&format!("hello from {version}"));
        let files: Vec<(&str, &str)> = files.iter().map(|(p, t)| (*p, t.as_str())).collect();
        write_tree(dir.path(), &files);
        let out = Command::new(cue_bin())
            .args(["mod", "publish", version])
            .current_dir(dir.path())
            .env("CUE_REGISTRY", self.cue_registry())
            .env("CUE_CACHE_DIR", self.cue_cache.path())
            .output()
            .expect("cue mod publish");
        assert!(
            out.status.success(),
            "publish failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
