//! `opm-operator run`: flags (SPEC §22), logging, clients, executors, controllers, and a
//! graceful stop on SIGTERM / Ctrl-C (in-flight attempts finish, then exit 0).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, ValueEnum};
use futures::FutureExt;
use opm_core::AllowOperatorIdentity;

use crate::artifact::artifact_cache::{ArtifactCache, CacheLimits};
use crate::artifact::extract::ExtractLimits;
use crate::artifact::fetch::{FetchConfig, Fetcher};
use crate::controller::controller::{self, Settings, Shutdown};
use crate::controller::driver::Runtime;
use crate::cue::render::{RenderConfig, Renderer};
use crate::effects::local::Local;
use crate::kube::impersonate::{Clients, RateLimit};
use crate::ops::leader::{self, LeaderLease};
use crate::ops::trace_sink::TraceSink;

#[derive(Debug, Clone, Copy, ValueEnum, Default)]
pub enum LogFormat {
    Json,
    #[default]
    Text,
}

/// `--kube-api-qps` by default: no client-side limit. Measured (README "Client request
/// rate"): at 50 the limit, not the API server, set the converge time of 1000 releases;
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
    /// `--default-service-account`) apply as the operator itself (SPEC §15): `off` (a stall),
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
    /// Largest total size an artifact may extract to, in bytes (SPEC §2, §17).
    #[arg(long, default_value_t = crate::artifact::extract::DEFAULT_MAX_EXTRACTED_BYTES, value_parser = crate::commands::flags::byte_size)]
    pub max_extracted_bytes: u64,
    /// Deadline of one artifact download, and separately of its extraction (SPEC §17, §24).
    #[arg(long, default_value = "60s", value_parser = crate::commands::flags::positive_duration)]
    pub fetch_timeout: Duration,
    /// Deadline of one `cue` run; the child is killed when it passes (SPEC §18).
    #[arg(long, default_value = "60s", value_parser = crate::commands::flags::positive_duration)]
    pub render_timeout: Duration,
    /// Most objects one render may produce; more is a stall `RenderFailed` (SPEC §24).
    #[arg(long, default_value_t = opm_core::config::DEFAULT_MAX_RENDER_OBJECTS, value_parser = crate::commands::size_flag::parse_positive_size)]
    pub max_render_objects: u64,
    /// Largest exported JSON of one render (`32Mi`); `cue`'s output is read no further
    /// and a larger render stalls `RenderFailed` (SPEC §24).
    #[arg(long, default_value = "32Mi", value_parser = crate::commands::size_flag::parse_positive_size)]
    pub max_render_bytes: u64,
    /// `cue` runs at once; further renders queue (SPEC §24).
    #[arg(long, default_value_t = crate::cue::render::DEFAULT_MAX_CONCURRENT_RENDERS as u64, value_parser = clap::value_parser!(u64).range(1..=1024))]
    pub max_concurrent_renders: u64,
    /// Most ModuleRelease renders of one module version (same registry and credentials)
    /// that share one `cue` run while they wait for a turn; each still gets exactly its own
    /// output, and a failing batch is retried one release at a time (issue 18). `1` renders
    /// every release alone.
    #[arg(long, default_value_t = crate::cue::render::DEFAULT_MAX_BATCH as u64, value_parser = clap::value_parser!(u64).range(1..=256))]
    pub max_render_batch: u64,
    /// Memory of one `cue` run (`1Gi`): its `GOMEMLIMIT`, and with 1.5 GiB of headroom its
    /// address-space rlimit; a run that dies of it stalls `RenderFailed` (SPEC §24). `0`
    /// runs `cue` unlimited.
    #[arg(long, default_value = "1Gi", value_parser = crate::commands::size_flag::parse_size)]
    pub render_memory_limit: u64,
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
    pub log_format: LogFormat,
    /// Client-side request rate per client; `0` (the default) sets no client-side limit:
    /// requests in flight are bounded by `--concurrency`, the API server's Priority and
    /// Fairness queues or rejects beyond its share, and a 429 is retried after its
    /// `Retry-After` (README "Client request rate").
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
    /// one is at it (SPEC §24). Default: half of `--concurrency`, at least 1.
    #[arg(long)]
    pub max_concurrent_per_namespace: Option<u16>,
    /// `/healthz` fails when a watch has failed this long, or attempts are queued and none
    /// has started or finished an effect for this long (SPEC §22).
    #[arg(long, default_value = "15m", value_parser = parse_duration)]
    pub health_stall_timeout: Duration,
}

/// How long in-flight attempts may run after SIGTERM (within Kubernetes' default 30s
/// termination grace period).
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(20);

/// Parses `30s`, `1m30s`, `1.5h`, `250ms` or plain seconds, at most 24h
/// ([`crate::commands::flags::duration`]).
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

/// Installs the tracing subscriber (`RUST_LOG`, default `info`).
pub fn init_logging(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(filter);
    let _ = match format {
        LogFormat::Json => builder.json().try_init(),
        LogFormat::Text => builder.try_init(),
    };
}

/// Builds the shared runtime from flags and a kube config.
pub fn build_runtime(args: &RunArgs, kube_config: kube::Config) -> anyhow::Result<Arc<Runtime>> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let cache_dir = match &args.cache_dir {
        Some(d) => d.clone(),
        None => std::env::temp_dir().join("opm-operator-cache"),
    };
    std::fs::create_dir_all(&cache_dir)?;
    let fetcher = Fetcher::new(FetchConfig {
        max_bytes: args.max_artifact_bytes,
        timeout: args.fetch_timeout,
    })?;
    let cache = ArtifactCache::new(
        &cache_dir,
        fetcher,
        ExtractLimits {
            max_bytes: args.max_extracted_bytes,
            timeout: args.fetch_timeout,
            ..ExtractLimits::default()
        },
        CacheLimits::default(),
    )?;
    let mut render = RenderConfig::new(&args.cue_binary);
    render.registry = args.cue_registry.clone();
    render.timeout = args.render_timeout;
    render.cue_cache_dir = Some(cache_dir.join("cue"));
    render.max_output_bytes = usize::try_from(args.max_render_bytes).unwrap_or(usize::MAX);
    render.max_concurrent = args.max_concurrent_renders as usize;
    render.max_batch = args.max_render_batch as usize;
    render.memory_limit = (args.render_memory_limit > 0).then_some(args.render_memory_limit);
    let local = Local {
        cache,
        renderer: Renderer::new(render),
    };
    let traces = args
        .trace_dir
        .as_deref()
        .map(|dir| {
            // Process start in ms: a restarted operator never appends to its
            // predecessor's files, and names still sort by age.
            let prefix = format!("{:013}", jiff::Timestamp::now().as_millisecond());
            TraceSink::new(dir, &prefix, args.trace_max_bytes, args.trace_max_files)
        })
        .transpose()?;
    let config = opm_core::Config {
        default_service_account: args.default_service_account.clone(),
        allow_cross_namespace_refs: args.allow_cross_namespace_refs,
        requeue_dependency: args.requeue_dependency,
        allow_operator_identity: args.allow_operator_identity,
        max_render_objects: args.max_render_objects,
        max_render_bytes: args.max_render_bytes,
    };
    let limit = RateLimit {
        qps: args.kube_api_qps,
        burst: args.kube_api_burst,
    };
    let clients = Clients::with_limit(kube_config, Some(limit))?;
    let rt = Runtime::new(config, clients, local, traces);
    rt.health.set_stall_timeout(args.health_stall_timeout);
    Ok(rt)
}

/// Ctrl-C or SIGTERM.
pub fn signal_shutdown() -> Shutdown {
    controller::shutdown_on(
        async {
            let mut term =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
                    .expect("installing the SIGTERM handler");
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            tracing::info!("shutdown requested; finishing in-flight attempts");
        }
        .map(|_| ()),
    )
}

/// `opm-operator run`.
pub async fn run(args: RunArgs) -> anyhow::Result<()> {
    init_logging(args.log_format);
    for (flag, addr) in [
        ("--metrics-bind-address", &args.metrics_bind_address),
        (
            "--health-probe-bind-address",
            &args.health_probe_bind_address,
        ),
    ] {
        if addr != "0" && addr.parse::<SocketAddr>().is_err() {
            anyhow::bail!("{flag}: invalid address {addr:?}");
        }
    }
    let kube_config = kube::Config::infer().await?;
    let rt = build_runtime(&args, kube_config)?;
    let settings = Settings {
        concurrency: args.concurrency,
        label_selector: args.watch_label_selector.clone(),
        max_concurrent_per_namespace: args.max_concurrent_per_namespace,
    };
    let mut addrs: Vec<SocketAddr> = Vec::new();
    for addr in [&args.metrics_bind_address, &args.health_probe_bind_address] {
        if let Ok(a) = addr.parse::<SocketAddr>()
            && !addrs.contains(&a)
        {
            addrs.push(a);
        }
    }
    for addr in addrs {
        let rt = rt.clone();
        tokio::spawn(async move {
            if let Err(e) = crate::ops::endpoints::serve(addr, rt).await {
                tracing::error!(%addr, error = %e, "endpoint server failed");
            }
        });
    }
    tracing::info!(
        concurrency = args.concurrency,
        allow_operator_identity = %args.allow_operator_identity,
        "opm-operator starting"
    );
    if args.allow_operator_identity != AllowOperatorIdentity::Off {
        tracing::warn!(
            allow_operator_identity = %args.allow_operator_identity,
            "releases without a ServiceAccount apply as the operator: every release author is \
             trusted with its rights (single-tenant clusters only, SPEC §15)"
        );
    }
    let shutdown = signal_shutdown();
    let lease = if args.leader_elect {
        let lease = Arc::new(LeaderLease::new(
            rt.clients.operator(),
            &leader::own_namespace(),
            leader::default_identity(),
            args.leader_elect_lease_duration,
        ));
        if !wait_for_leadership(&lease, shutdown.clone()).await {
            return Ok(());
        }
        Some((lease.clone(), tokio::spawn(keep_leadership(lease))))
    } else {
        None
    };
    let grace = shutdown
        .clone()
        .then(|()| tokio::time::sleep(SHUTDOWN_GRACE));
    tokio::select! {
        () = controller::run(rt, settings, shutdown) => {}
        () = grace => tracing::warn!(
            grace = ?SHUTDOWN_GRACE,
            "in-flight attempts did not finish in time; exiting"
        ),
    }
    if let Some((lease, renew)) = lease {
        renew.abort();
        lease.release().await;
    }
    Ok(())
}

/// Tries for the Lease every third of its duration (at most 2s) until it is ours (`true`)
/// or shutdown comes (`false`).
async fn wait_for_leadership(lease: &LeaderLease, shutdown: Shutdown) -> bool {
    let retry = (lease.duration() / 3).min(Duration::from_secs(2));
    tracing::info!(identity = lease.identity(), "waiting for the leader Lease");
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        match lease.try_acquire_or_renew().await {
            Ok(true) => {
                tracing::info!(identity = lease.identity(), "leader Lease acquired");
                return true;
            }
            Ok(false) => {}
            Err(e) => tracing::warn!(error = %e, "leader election request failed"),
        }
        tokio::select! {
            () = &mut shutdown => return false,
            () = tokio::time::sleep(retry) => {}
        }
    }
}

/// Renews the Lease every third of its duration; a leader that cannot renew for a whole
/// duration exits at once (another replica may already reconcile).
async fn keep_leadership(lease: Arc<LeaderLease>) {
    let period = lease.duration() / 3;
    let mut last_ok = tokio::time::Instant::now();
    loop {
        tokio::time::sleep(period).await;
        match lease.try_acquire_or_renew().await {
            Ok(true) => last_ok = tokio::time::Instant::now(),
            Ok(false) => {
                tracing::error!("the leader Lease was taken over; exiting");
                std::process::exit(1);
            }
            Err(e) => {
                tracing::warn!(error = %e, "renewing the leader Lease failed");
                if last_ok.elapsed() > lease.duration() {
                    tracing::error!("could not renew the leader Lease in time; exiting");
                    std::process::exit(1);
                }
            }
        }
    }
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
}
