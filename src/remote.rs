//! Remote clusters (SPEC §31): which cluster an object effect targets, what a kubeconfig
//! may hold, and what pointing a release at another server does to what it applied.
//!
//! The interpreter reads the kubeconfig Secret and reports facts ([`KubeConfigFacts`]: its
//! digest, size, server and the fields that would run a command or read a file); every
//! decision about them is made here, so traces and the simulated world see it.

use crate::api::{Inventory, InventoryEntry, LeftBehind};
pub use crate::effect::RemoteCluster;
use crate::input::ApiError;
pub use crate::input::{KubeConfigError, KubeConfigFacts};
use crate::outcome::Failure;
use crate::reason::Reason;

/// The key read when `secretRef.key` is empty, and the one tried after it (Flux's order).
pub const DEFAULT_KEYS: [&str; 2] = ["value", "value.yaml"];

/// At most this many entries are named in `status.leftBehind` (the count is exact).
pub(crate) const LEFT_BEHIND_ENTRIES: usize = 50;

/// `ns/name` (`key`) as messages name the Secret.
fn describe(namespace: &str, name: &str, key: Option<&str>) -> String {
    match key {
        Some(k) => format!("Secret {namespace}/{name} (key {k})"),
        None => format!("Secret {namespace}/{name}"),
    }
}

/// The server URL without user information, query or fragment (a URL may carry a
/// password; SPEC §23 keeps every secret out of status, metrics and events).
pub(crate) fn display_server(server: &str) -> String {
    let (scheme, rest) = match server.split_once("://") {
        Some((s, r)) => (Some(s), r),
        None => (None, server),
    };
    let rest = rest.split(['?', '#']).next().unwrap_or_default();
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    let host = authority.rsplit('@').next().unwrap_or_default();
    let shown = match scheme {
        Some(s) => format!("{s}://{host}{path}"),
        None => format!("{host}{path}"),
    };
    crate::conditions::without_control(&shown)
}

/// SPEC §31: the cluster the facts describe, or the stall refusing them.
pub fn check(
    facts: &KubeConfigFacts,
    namespace: &str,
    name: &str,
    allow_insecure: bool,
) -> Result<RemoteCluster, Failure> {
    let what = describe(namespace, name, Some(&facts.key));
    if !allow_insecure && let Some(first) = facts.insecure.first() {
        let more = match facts.insecure.len() {
            1 => String::new(),
            n => format!(" (and {} more)", n - 1),
        };
        return Err(Failure::stalled(
            Reason::InvalidKubeConfig,
            format!(
                "kubeconfig in {what} uses {}{more}, which runs a command or reads a file on \
                 the operator's host; use inline credentials (token, client-certificate-data, \
                 certificate-authority-data) or start the operator with \
                 --allow-insecure-kubeconfig",
                crate::conditions::without_control(first)
            ),
        ));
    }
    let server = display_server(&facts.server);
    if server.is_empty() {
        return Err(Failure::stalled(
            Reason::InvalidKubeConfig,
            format!("kubeconfig in {what} names no server for its current context"),
        ));
    }
    Ok(RemoteCluster {
        digest: facts.digest.clone(),
        server,
    })
}

/// SPEC §31: a kubeconfig that could not be read. Missing or unusable content is a stall
/// (the Secret's creation or change re-triggers the release); a failed read is transient.
pub(crate) fn read_failure(
    e: &KubeConfigError,
    namespace: &str,
    name: &str,
    key: Option<&str>,
    max_bytes: u64,
) -> Failure {
    let what = describe(namespace, name, key);
    let stalled = |m: String| Failure::stalled(Reason::InvalidKubeConfig, m);
    match e {
        KubeConfigError::SecretNotFound => stalled(format!(
            "{what} not found; create it with the cluster's kubeconfig under key `value`"
        )),
        KubeConfigError::KeyNotFound { keys } => {
            let tried = match key {
                Some(k) => format!("key {k}"),
                None => format!("key {} or {}", DEFAULT_KEYS[0], DEFAULT_KEYS[1]),
            };
            let has = if keys.is_empty() {
                "no keys".to_string()
            } else {
                let mut ks: Vec<_> = keys
                    .iter()
                    .take(10)
                    .map(|k| crate::conditions::without_control(k))
                    .collect();
                ks.sort();
                format!("keys {}", ks.join(", "))
            };
            stalled(format!(
                "Secret {namespace}/{name} has no {tried} (it has {has})"
            ))
        }
        KubeConfigError::TooLarge { bytes } => stalled(format!(
            "kubeconfig in {what} is {bytes} bytes; the cap is {max_bytes} \
             (--max-kubeconfig-bytes)"
        )),
        KubeConfigError::Unparsable { message } => stalled(format!(
            "{what} does not hold a usable kubeconfig: {}",
            crate::conditions::without_control(message)
        )),
        KubeConfigError::Api { error } => Failure::transient(
            Reason::InvalidKubeConfig,
            format!("reading {what} failed: {error}"),
        ),
    }
}

/// SPEC §31: the remote cluster did not answer; transient, with backoff.
pub fn unreachable(cluster: &RemoteCluster, e: &ApiError) -> Failure {
    let message = match e {
        ApiError::Unreachable { message } => message.as_str(),
        other => return unreachable_other(cluster, other),
    };
    Failure::transient(
        Reason::ClusterUnreachable,
        format!("cluster {} cannot be reached: {message}", cluster.server),
    )
}

fn unreachable_other(cluster: &RemoteCluster, e: &ApiError) -> Failure {
    Failure::transient(
        Reason::ClusterUnreachable,
        format!("cluster {} cannot be reached: {e}", cluster.server),
    )
}

/// The server the persisted inventory's objects live in (empty: the operator's cluster).
pub fn inventory_cluster(inventory: Option<&Inventory>) -> &str {
    inventory.map_or("", |i| i.cluster.as_str())
}

/// Whether the release now points at another cluster than the one holding its
/// inventory. An empty inventory holds nothing to leave behind.
pub fn moved(inventory: Option<&Inventory>, current: Option<&RemoteCluster>) -> bool {
    let Some(inv) = inventory.filter(|i| !i.entries.is_empty()) else {
        return false;
    };
    inv.cluster != current.map_or("", |c| c.server.as_str())
}

/// What `status.leftBehind` says about the objects of the cluster the release left.
pub fn left_behind(inventory: &Inventory, since: jiff::Timestamp) -> LeftBehind {
    let entries: Vec<InventoryEntry> = inventory
        .entries
        .iter()
        .take(LEFT_BEHIND_ENTRIES)
        .cloned()
        .collect();
    LeftBehind {
        cluster: inventory.cluster.clone(),
        count: inventory.entries.len() as i64,
        since: Some(crate::conditions::k8s_time(since)),
        entries,
    }
}

/// The Warning event's note when the release moves to another cluster.
pub(crate) fn moved_message(left: &LeftBehind, to: Option<&RemoteCluster>) -> String {
    let from = if left.cluster.is_empty() {
        "the operator's cluster"
    } else {
        left.cluster.as_str()
    };
    let to = to.map_or("the operator's cluster", |c| c.server.as_str());
    format!(
        "the kubeconfig now points at {to}; the {} objects applied to {from} were left there \
         (status.leftBehind names them): delete them there, or point the kubeconfig back",
        left.count
    )
}

#[cfg(test)]
mod tests;
