//! `opm-operator run`: flags (SPEC §22), logging, clients, executors, controllers, and a
//! graceful stop on SIGTERM / Ctrl-C (in-flight attempts finish, then exit 0).
//!
//! `args` holds the flags; this module turns them into clients, executors and
//! controllers, and holds the leader election loop.

mod args;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use opm_core::AllowOperatorIdentity;
use opm_core::event_delivery::DeliveryLimits;

pub use args::{DEFAULT_KUBE_API_BURST, DEFAULT_KUBE_API_QPS, LogFormat, RunArgs, parse_duration};

use crate::artifact::artifact_cache::{ArtifactCache, CacheLimits};
use crate::artifact::extract::ExtractLimits;
use crate::artifact::fetch::{FetchConfig, Fetcher};
use crate::controller::controller::{self, Settings, Shutdown};
use crate::controller::driver::Runtime;
use crate::cue::render::{RenderConfig, Renderer};
use crate::effects::local::Local;
use crate::kube::impersonate::{Clients, RateLimit};
use crate::ops::events_webhook::{self, EventsWebhook, WebhookConfig};
use crate::ops::leader::{self, LeaderLease};
use crate::ops::trace_sink::TraceSink;

/// How long in-flight attempts may run after SIGTERM (within Kubernetes' default 30s
/// termination grace period).
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(20);

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
    render.max_cue_cache_bytes = args.max_cue_cache_bytes;
    render.max_output_bytes = usize::try_from(args.max_render_bytes).unwrap_or(usize::MAX);
    render.max_concurrent = args.max_concurrent_renders as usize;
    render.max_batch = args.max_render_batch as usize;
    render.memory_limit = (args.render_memory_limit > 0).then_some(args.render_memory_limit);
    let local = Local {
        cache,
        renderer: Renderer::new(render),
        opm: Default::default(),
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
    let config = core_config(args);
    let limit = RateLimit {
        qps: args.kube_api_qps,
        burst: args.kube_api_burst,
    };
    let clients = Clients::with_limit(kube_config, Some(limit))?;
    let webhook = args
        .events_webhook
        .as_ref()
        .map(|endpoint| {
            EventsWebhook::start(WebhookConfig {
                endpoint: endpoint.clone(),
                limits: DeliveryLimits {
                    queue_size: args.events_webhook_queue_size,
                    max_backoff: args.events_webhook_max_backoff,
                },
                request_timeout: events_webhook::REQUEST_TIMEOUT,
            })
        })
        .transpose()
        .map_err(|e| anyhow::anyhow!("starting the events webhook: {}", e.without_url()))?;
    let rt = Runtime::new(config, clients, local, traces, webhook);
    rt.health.set_stall_timeout(args.health_stall_timeout);
    Ok(rt)
}

/// The core's policy flags (SPEC §24 and the rest) from the command line.
fn core_config(args: &RunArgs) -> opm_core::Config {
    opm_core::Config {
        default_service_account: args.default_service_account.clone(),
        allow_cross_namespace_refs: args.allow_cross_namespace_refs,
        requeue_dependency: args.requeue_dependency,
        allow_operator_identity: args.allow_operator_identity,
        max_render_objects: args.max_render_objects,
        max_render_bytes: args.max_render_bytes,
        max_hooks: args.max_hooks,
        health_eval_timeout: args.health_eval_timeout,
        max_values_bytes: args.max_values_bytes,
        allow_insecure_kubeconfig: args.allow_insecure_kubeconfig,
        max_kubeconfig_bytes: args.max_kubeconfig_bytes,
    }
}

/// Serves `/metrics` and the health probes on their addresses (one server when both are
/// the same; `0` turns one off).
fn serve_endpoints(args: &RunArgs, rt: &Arc<Runtime>) {
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
    serve_endpoints(&args, &rt);
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
    let webhook = rt.webhook.clone();
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
    if let Some(webhook) = webhook {
        webhook.drain(events_webhook::SHUTDOWN_DRAIN).await;
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
