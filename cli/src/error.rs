//! What can go wrong in a verb, and the exit code each means(0 success or no
//! change, 1 a failure the verb reports — changes found, a reconcile that failed or
//! stalled — and 2 an error of the command itself).

use opm_core::ApiError;

/// An error of the command itself (exit 2): bad input, an unreachable or refusing API
/// server, a render that failed. Messages never carry Secret values.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// The arguments cannot be acted on.
    #[error("{0}")]
    Usage(String),
    /// The API server refused or failed a request.
    #[error("{what}: {error}")]
    Api { what: String, error: ApiError },
    /// Reading the kubeconfig or building the client failed.
    #[error("{0}")]
    Connect(String),
    /// Anything else, worded for the user.
    #[error("{0}")]
    Other(String),
}

impl CliError {
    /// An API failure while doing `what`, classified as the operator classifies them.
    pub fn api(what: impl Into<String>, e: &kube::Error) -> Self {
        CliError::Api {
            what: what.into(),
            error: opm_operator::kube::api_error::from_kube(e),
        }
    }
}

/// How a verb that ran ends: success, or the failure it reports (exit 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Ok,
    Failed,
}

pub type Result<T> = std::result::Result<T, CliError>;
