//! The flags of `opm-operator run` and their parsers.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, ValueEnum};
use opm_core::AllowOperatorIdentity;

#[derive(Debug, Clone, Copy, ValueEnum, Default)]
/// How log lines are written to stderr (`--log-format`).
pub enum LogFormat {
    /// One JSON object per line, for log collectors.
    Json,
    #[default]
    /// Human-readable lines.
    Text,
}

/// `--kube-api-qps` by default: no client-side limit. Measured (docs/src/operations.md, "Client
/// request rate"): at 50 the limit, not the API server, set the converge time of 1000 releases;
/// with none, the operator's requests in flight stay bounded by its workers, and the
/// API server's Priority and Fairness is the one place that decides what it can take.
pub const DEFAULT_KUBE_API_QPS: f32 = 0.0;
/// `--kube-api-burst` by default; it matters only when a rate is set.
pub const DEFAULT_KUBE_API_BURST: u32 = 100;

/// Flags of `opm-operator run`.
#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    /// Attempts reconciled at once, per kind.
    #[arg(long, default_value_t = 4)]
    pub concurrency: u16,
    /// ServiceAccount (in the release's namespace) used when `spec.serviceAccountName` is empty.
    #[arg(long, value_parser = crate::commands::flags::dns_subdomain)]
    pub default_service_account: Option<String>,
    /// Allow `dependsOn` and `sourceRef` to name other namespaces.
    #[arg(long)]
    pub allow_cross_namespace_refs: bool,
    /// Releases with no ServiceAccount (no `spec.serviceAccountName`, no
    /// `--default-service-account`) apply as the operator itself: `off` (a stall),
    /// `on` (only namespaced objects in the release's own namespace; the flag alone means
    /// `on`) or `cluster` (anywhere the operator's RBAC reaches: every release author is
    /// trusted with the operator's rights).
    #[arg(
        long,
        default_value = "off",
        num_args = 0..=1,
        default_missing_value = "on",
        value_parser = operator_identity_parser()
    )]
    pub allow_operator_identity: AllowOperatorIdentity,
    /// Reconcile only releases matching this label selector (sharding).
    #[arg(long)]
    pub watch_label_selector: Option<String>,
    /// Requeue of dependency / source-not-ready waits.
    #[arg(long, default_value = "30s", value_parser = crate::commands::flags::positive_duration)]
    pub requeue_dependency: Duration,
    /// The `cue` binary.
    #[arg(long, env = "OPM_CUE_BIN", default_value = "cue")]
    pub cue_binary: PathBuf,
    /// `CUE_REGISTRY` for module renders (e.g. `127.0.0.1:5000+insecure`).
    #[arg(long)]
    pub cue_registry: Option<String>,
    /// Artifact and CUE caches.
    #[arg(long)]
    pub cache_dir: Option<PathBuf>,
    /// Largest artifact downloaded, in bytes (or with a suffix: `64Mi`).
    #[arg(long, default_value_t = crate::artifact::fetch::DEFAULT_MAX_ARTIFACT_BYTES, value_parser = crate::commands::flags::byte_size)]
    pub max_artifact_bytes: u64,
    /// Largest total size an artifact may extract to, in bytes.
    #[arg(long, default_value_t = crate::artifact::extract::DEFAULT_MAX_EXTRACTED_BYTES, value_parser = crate::commands::flags::byte_size)]
    pub max_extracted_bytes: u64,
    /// Deadline of one artifact download, and separately of its extraction.
    #[arg(long, default_value = "60s", value_parser = crate::commands::flags::positive_duration)]
    pub fetch_timeout: Duration,
    /// Deadline of one `cue` run; the child is killed when it passes.
    #[arg(long, default_value = "60s", value_parser = crate::commands::flags::positive_duration)]
    pub render_timeout: Duration,
    /// Most objects one render may produce; more is a stall `RenderFailed`.
    #[arg(long, default_value_t = opm_core::config::DEFAULT_MAX_RENDER_OBJECTS, value_parser = crate::commands::size_flag::parse_positive_size)]
    pub max_render_objects: u64,
    /// Largest exported JSON of one render (`32Mi`); `cue`'s output is read no further
    /// and a larger render stalls `RenderFailed`.
    #[arg(long, default_value = "32Mi", value_parser = crate::commands::size_flag::parse_positive_size)]
    pub max_render_bytes: u64,
    /// Most hooks (`releases.opmodel.dev/hook`) one render may carry; more is a stall
    /// `RenderFailed`.
    #[arg(long, default_value_t = opm_core::hooks::DEFAULT_MAX_HOOKS)]
    pub max_hooks: u64,
    /// Largest parsed `valuesFrom` content of one release (`4Mi`), all entries together;
    /// parsing stops there (a YAML anchor bomb is never expanded) and the release stalls
    /// `ValuesNotFound`.
    #[arg(long, default_value = "4Mi", value_parser = crate::commands::size_flag::parse_positive_size)]
    pub max_values_bytes: u64,
    /// Let a remote cluster's kubeconfig run a command (`exec`, `auth-provider`) or name a
    /// file on the operator's host (token, certificate and key paths). Off: such a
    /// kubeconfig is refused with `InvalidKubeConfig` naming the field.
    #[arg(long)]
    pub allow_insecure_kubeconfig: bool,
    /// Largest kubeconfig a release's `spec.kubeConfig` Secret may hold (`64Ki`); a larger
    /// one is not parsed and the release stalls `InvalidKubeConfig`.
    #[arg(long, default_value = "64Ki", value_parser = crate::commands::size_flag::parse_positive_size)]
    pub max_kubeconfig_bytes: u64,
    /// `cue` runs at once; further renders queue.
    #[arg(long, default_value_t = crate::cue::render::DEFAULT_MAX_CONCURRENT_RENDERS as u64, value_parser = clap::value_parser!(u64).range(1..=1024))]
    pub max_concurrent_renders: u64,
    /// Most ModuleRelease renders of one module version (same registry and credentials)
    /// that share one `cue` run while they wait for a turn; each still gets exactly its own
    /// output, and a failing batch is retried one release at a time. `1` renders
    /// every release alone.
    #[arg(long, default_value_t = crate::cue::render::DEFAULT_MAX_BATCH as u64, value_parser = clap::value_parser!(u64).range(1..=256))]
    pub max_render_batch: u64,
    /// Memory of one `cue` run (`1Gi`): its `GOMEMLIMIT`, and with 1.5 GiB of headroom its
    /// address-space rlimit; a run that dies of it stalls `RenderFailed`. `0`
    /// runs `cue` unlimited.
    #[arg(long, default_value = "1Gi", value_parser = crate::commands::size_flag::parse_size)]
    pub render_memory_limit: u64,
    /// Bound of the `cue` module cache under `--cache-dir` (`1Gi`): one copy per module
    /// version, shared by renders without `module.secretRef` (renders with credentials
    /// use a private cache removed with the run); above it the least recently used module
    /// versions are removed.
    #[arg(long, default_value = "1Gi", value_parser = crate::commands::size_flag::parse_positive_size)]
    pub max_cue_cache_bytes: u64,
    /// Write each attempt as JSON lines (inputs and effects; replay with `opm-sim replay`)
    /// into rotating `trace-*.jsonl` files in this directory.
    #[arg(long)]
    pub trace_dir: Option<PathBuf>,
    /// Size at which a trace file is closed and the next one started.
    #[arg(long, default_value_t = crate::ops::trace_sink::DEFAULT_MAX_BYTES)]
    pub trace_max_bytes: u64,
    /// Trace files kept; the oldest are deleted beyond this.
    #[arg(long, default_value_t = crate::ops::trace_sink::DEFAULT_MAX_FILES)]
    pub trace_max_files: usize,
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    /// How log lines look.
    pub log_format: LogFormat,
    /// Client-side request rate per client; `0` (the default) sets no client-side limit:
    /// requests in flight are bounded by `--concurrency`, the API server's Priority and
    /// Fairness queues or rejects beyond its share, and a 429 is retried after its
    /// `Retry-After` (see the operations guide, "Client request rate").
    #[arg(long, default_value_t = DEFAULT_KUBE_API_QPS, value_parser = crate::commands::flags::qps)]
    pub kube_api_qps: f32,
    /// Requests a client may send at once before `--kube-api-qps` applies (unused at `0`).
    #[arg(long, default_value_t = DEFAULT_KUBE_API_BURST)]
    pub kube_api_burst: u32,
    /// Prometheus metrics endpoint (`0` disables).
    #[arg(long, default_value = "0", value_parser = crate::commands::flags::bind_address)]
    pub metrics_bind_address: String,
    /// `/healthz` and `/readyz` (`0` disables).
    #[arg(long, default_value = "0", value_parser = crate::commands::flags::bind_address)]
    pub health_probe_bind_address: String,
    /// Reconcile only while holding the Lease `opm-operator-leader` in the operator's namespace.
    #[arg(long)]
    pub leader_elect: bool,
    /// How long the leader Lease stays valid without renewal: a standby takes over at most
    /// this long (plus one retry period) after the leader dies. Renewed every third of it.
    #[arg(long, default_value = "15s", value_parser = crate::commands::flags::lease_duration)]
    pub leader_elect_lease_duration: Duration,
    /// Attempts in flight per namespace, per kind; other namespaces' attempts go first while
    /// one is at it. Default: half of `--concurrency`, at least 1.
    #[arg(long)]
    pub max_concurrent_per_namespace: Option<u16>,
    /// `/healthz` fails when a watch has failed this long, or attempts are queued and none
    /// has started or finished an effect for this long.
    #[arg(long, default_value = "15m", value_parser = parse_duration)]
    pub health_stall_timeout: Duration,
    /// Time one attempt's `healthCheckExprs` evaluations may take together, on a blocking
    /// thread; over it the object being judged is `Failed`.
    #[arg(long, default_value = "1s", value_parser = crate::commands::flags::positive_duration)]
    pub health_eval_timeout: Duration,
    /// POST every Kubernetes Event the operator records to this http(s) URL as well, as a
    /// CloudEvent (structured JSON). It may carry credentials (user info, a token in the
    /// path or query): it is never logged or shown, only its scheme, host and port.
    #[arg(long, env = "OPM_EVENTS_WEBHOOK", hide_env_values = true, value_name = "URL", value_parser = crate::ops::events_webhook::EndpointParser)]
    pub events_webhook: Option<crate::ops::events_webhook::Endpoint>,
    /// Events held for the webhook while its receiver is slow or down (1 to 100000); when
    /// full, the oldest is dropped and counted in
    /// `opm_controller_events_webhook_dropped_total{reason="queue_full"}`.
    #[arg(long, default_value_t = opm_core::event_delivery::DEFAULT_QUEUE_SIZE, value_parser = webhook_queue_size)]
    pub events_webhook_queue_size: usize,
    /// The longest wait between two tries of a webhook POST (the wait doubles from 500ms
    /// after each failure up to this).
    #[arg(long, default_value = "1m", value_parser = crate::commands::flags::positive_duration)]
    pub events_webhook_max_backoff: Duration,
}

/// `--events-webhook-queue-size`: 1 to [`opm_core::event_delivery::MAX_QUEUE_SIZE`].
fn webhook_queue_size(s: &str) -> Result<usize, String> {
    let max = opm_core::event_delivery::MAX_QUEUE_SIZE;
    match s.trim().parse::<usize>() {
        Ok(n) if (1..=max).contains(&n) => Ok(n),
        Ok(n) => Err(format!("{n} events: the queue holds 1 to {max}")),
        Err(e) => Err(format!("not a number of events: {e}")),
    }
}

/// Parses `30s`, `1m30s`, `1.5h`, `250ms` or plain seconds, at most 24h
/// (`crate::commands::flags::duration`).
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    crate::commands::flags::duration(s)
}

/// `off`, `on` or `cluster` (shown in `--help` and in the error for any other value).
fn operator_identity_parser() -> impl clap::builder::TypedValueParser<Value = AllowOperatorIdentity>
{
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(["off", "on", "cluster"]).map(|s: String| {
        match s.as_str() {
            "on" => AllowOperatorIdentity::On,
            "cluster" => AllowOperatorIdentity::Cluster,
            _ => AllowOperatorIdentity::Off,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse() {
        assert_eq!(parse_duration("30s").unwrap(), Duration::from_secs(30));
        assert_eq!(parse_duration("5m").unwrap(), Duration::from_secs(300));
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("7").unwrap(), Duration::from_secs(7));
        assert!(parse_duration("5x").is_err());
    }

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        run: RunArgs,
    }

    fn operator_identity(args: &[&str]) -> Result<AllowOperatorIdentity, clap::Error> {
        use clap::Parser;
        let argv = std::iter::once("run").chain(args.iter().copied());
        Cli::try_parse_from(argv).map(|c| c.run.allow_operator_identity)
    }

    #[test]
    fn allow_operator_identity_is_off_unless_given_and_bare_means_on() {
        use AllowOperatorIdentity::{Cluster, Off, On};
        assert_eq!(operator_identity(&[]).unwrap(), Off);
        assert_eq!(
            operator_identity(&["--allow-operator-identity"]).unwrap(),
            On
        );
        assert_eq!(
            operator_identity(&["--allow-operator-identity", "--leader-elect"]).unwrap(),
            On
        );
        assert_eq!(
            operator_identity(&["--allow-operator-identity=on"]).unwrap(),
            On
        );
        assert_eq!(
            operator_identity(&["--allow-operator-identity=cluster"]).unwrap(),
            Cluster
        );
        assert_eq!(
            operator_identity(&["--allow-operator-identity=off"]).unwrap(),
            Off
        );
        let e = operator_identity(&["--allow-operator-identity=yes"]).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(e.to_string().contains("cluster"), "{e}");
    }

    #[test]
    fn the_events_webhook_flags_and_their_bounds() {
        use clap::Parser;
        let parse = |args: &[&str]| {
            Cli::try_parse_from(std::iter::once("run").chain(args.iter().copied())).map(|c| c.run)
        };
        let run = parse(&[]).unwrap();
        assert!(run.events_webhook.is_none());
        assert_eq!(run.events_webhook_queue_size, 10_000);
        assert_eq!(run.events_webhook_max_backoff, Duration::from_secs(60));
        let run = parse(&[
            "--events-webhook=https://u:s3cret@h.example/x",
            "--events-webhook-queue-size=2",
            "--events-webhook-max-backoff=250ms",
        ])
        .unwrap();
        assert_eq!(
            run.events_webhook.map(|e| e.to_string()).as_deref(),
            Some("https://h.example/…")
        );
        assert_eq!(run.events_webhook_queue_size, 2);
        assert_eq!(run.events_webhook_max_backoff, Duration::from_millis(250));
        for bad in [
            "--events-webhook-queue-size=0",
            "--events-webhook-queue-size=100001",
            "--events-webhook-max-backoff=0s",
        ] {
            assert_eq!(parse(&[bad]).unwrap_err().exit_code(), 2, "{bad}");
        }
        let e = parse(&["--events-webhook=ftp://u:s3cret@h/"]).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(!e.to_string().contains("s3cret"), "{e}");
    }
}
