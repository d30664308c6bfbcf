//! The API server's own ceiling for the benchmark: server-side applies per second of plain
//! ConfigMaps from one keep-alive client with a fixed number of requests in flight. Both
//! controllers are measured against the same server, so this bounds what either could reach.
//! Prints one JSON object: `{"applies", "seconds", "per_second", "concurrency"}`.

use std::time::Instant;

use clap::Parser;
use futures::{StreamExt, stream};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

#[derive(Parser)]
struct Args {
    /// Namespace the ConfigMaps go to (created when missing).
    #[arg(long, default_value = "bench-ceiling")]
    namespace: String,
    /// ConfigMaps applied (each once, as a create).
    #[arg(long, default_value_t = 2000)]
    count: usize,
    /// Requests in flight at once.
    #[arg(long, default_value_t = 10)]
    concurrency: usize,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut config = kube::Config::infer().await?;
    // No client-side throttle: the point is the server's limit.
    config.read_timeout = Some(std::time::Duration::from_secs(60));
    let client = kube::Client::try_from(config)?;
    let ns: Api<Namespace> = Api::all(client.clone());
    let namespace = serde_json::from_value(json!({"metadata": {"name": args.namespace}}))?;
    match ns.create(&PostParams::default(), &namespace).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 409 => {}
        Err(e) => return Err(e.into()),
    }
    let api: Api<ConfigMap> = Api::namespaced(client, &args.namespace);
    let params = PatchParams::apply("opm-bench-ceiling");
    // A short warm-up so connection setup is not in the figure.
    let warm = args.concurrency.min(args.count);
    run(&api, &params, 0..warm, args.concurrency).await?;
    let start = Instant::now();
    run(&api, &params, warm..args.count + warm, args.concurrency).await?;
    let seconds = start.elapsed().as_secs_f64();
    let out = json!({
        "applies": args.count,
        "seconds": seconds,
        "per_second": args.count as f64 / seconds,
        "concurrency": args.concurrency,
    });
    println!("{out}");
    Ok(())
}

async fn run(
    api: &Api<ConfigMap>,
    params: &PatchParams,
    range: std::ops::Range<usize>,
    concurrency: usize,
) -> anyhow::Result<()> {
    let results: Vec<Result<ConfigMap, kube::Error>> = stream::iter(range)
        .map(|i| async move {
            let name = format!("ceiling-{i:06}");
            let cm = json!({
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": name},
                "data": {"index": i.to_string()},
            });
            api.patch(&name, params, &Patch::Apply(&cm)).await
        })
        .buffer_unordered(concurrency)
        .collect()
        .await;
    for r in results {
        r?;
    }
    Ok(())
}
