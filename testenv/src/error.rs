use std::path::PathBuf;

/// Everything that can go wrong while setting up the test environment. Tests usually
/// `expect()` these: the messages are written to tell a developer what to do next.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{tool} not found at {path} ({source_hint}); run ./tools/install")]
    ToolMissing {
        tool: &'static str,
        path: PathBuf,
        source_hint: String,
    },
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("test API server did not become ready: {0}")]
    NotReady(String),
    #[error("kubeconfig: {0}")]
    Kubeconfig(String),
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("{what} timed out after {secs}s")]
    Timeout { what: String, secs: u64 },
    #[error("reading {path}: {message}")]
    Yaml { path: PathBuf, message: String },
    #[error("`{command}` failed with {status}: {stderr}")]
    Command {
        command: String,
        status: std::process::ExitStatus,
        stderr: String,
    },
    #[error("archive: {0}")]
    Archive(String),
    #[error("json: {0}")]
    Json(#[from] serde_json::Error),
}

impl Error {
    pub(crate) fn io(what: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io {
            what: what.into(),
            source,
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
