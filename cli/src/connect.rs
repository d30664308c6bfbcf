//! kubectl's connection flags and the client they make. The client is the user's own
//! identity (or `--as`), never the operator's: what `kubectl opm` shows and changes is
//! exactly what that user may see and change.

use std::path::PathBuf;

use clap::Args;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

use crate::error::{CliError, Result};

/// `--kubeconfig`, `--context`, `-n`, `-A`, `--as`, `--as-group`, as kubectl has them.
#[derive(Debug, Args, Clone, Default)]
pub struct Conn {
    /// Path to the kubeconfig file (default: $KUBECONFIG, then ~/.kube/config, then the
    /// in-cluster service account).
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use.
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,
    /// The namespace (default: the context's namespace, else `default`).
    #[arg(short = 'n', long, value_name = "NAMESPACE")]
    pub namespace: Option<String>,
    /// Every namespace (only where a verb lists).
    #[arg(short = 'A', long)]
    pub all_namespaces: bool,
    /// Act as this user (impersonation, as `kubectl --as`).
    #[arg(long = "as", value_name = "USER")]
    pub as_user: Option<String>,
    /// Act with this group (repeatable, as `kubectl --as-group`).
    #[arg(long = "as-group", value_name = "GROUP")]
    pub as_group: Vec<String>,
}

/// A client and the namespace verbs act in.
pub struct Session {
    pub client: Client,
    pub config: Config,
    pub namespace: String,
    pub all_namespaces: bool,
}

impl Conn {
    /// Reads the kubeconfig (or the in-cluster config) and builds the client.
    pub async fn session(&self) -> Result<Session> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let options = KubeConfigOptions {
            context: self.context.clone(),
            cluster: None,
            user: None,
        };
        let mut config = match &self.kubeconfig {
            Some(path) => {
                let kc = Kubeconfig::read_from(path).map_err(|e| {
                    CliError::Connect(format!("reading kubeconfig {}: {e}", path.display()))
                })?;
                Config::from_custom_kubeconfig(kc, &options)
                    .await
                    .map_err(|e| CliError::Connect(format!("kubeconfig {}: {e}", path.display())))?
            }
            None if self.context.is_some() => Config::from_kubeconfig(&options)
                .await
                .map_err(|e| CliError::Connect(format!("kubeconfig: {e}")))?,
            None => Config::infer()
                .await
                .map_err(|e| CliError::Connect(format!("no cluster configuration: {e}")))?,
        };
        if let Some(user) = &self.as_user {
            config.auth_info.impersonate = Some(user.clone());
            config.auth_info.impersonate_groups =
                (!self.as_group.is_empty()).then(|| self.as_group.clone());
        }
        let namespace = self
            .namespace
            .clone()
            .unwrap_or_else(|| config.default_namespace.clone());
        let client = Client::try_from(config.clone())
            .map_err(|e| CliError::Connect(format!("building the client: {e}")))?;
        Ok(Session {
            client,
            config,
            namespace,
            all_namespaces: self.all_namespaces,
        })
    }
}

impl Session {
    /// A client acting as `system:serviceaccount:<ns>:<sa>`, as the operator impersonates
    /// a release's ServiceAccount(the user only, the server adds the groups).
    pub fn impersonating(&self, namespace: &str, service_account: &str) -> Result<Client> {
        let mut config = self.config.clone();
        config.auth_info.impersonate = Some(format!(
            "system:serviceaccount:{namespace}:{service_account}"
        ));
        config.auth_info.impersonate_groups = None;
        Client::try_from(config)
            .map_err(|e| CliError::Connect(format!("building the impersonating client: {e}")))
    }
}
