//! Asks every release of one kind for a reconcile at once: sets an annotation on each object
//! with merge patches sent concurrently over one keep-alive client (one LIST, then one PATCH
//! per object), so the trigger itself is not what a re-reconcile benchmark measures.
//! Prints `{"patched", "seconds"}`.

use std::time::Instant;

use clap::Parser;
use futures::{StreamExt, stream};
use kube::ResourceExt;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams};
use kube::core::GroupVersionKind;
use kube::discovery::ApiResource;
use serde_json::json;

#[derive(Parser)]
struct Args {
    /// API group of the kind (e.g. `kustomize.toolkit.fluxcd.io`).
    #[arg(long)]
    group: String,
    #[arg(long)]
    version: String,
    #[arg(long)]
    kind: String,
    /// Plural resource name (e.g. `kustomizations`).
    #[arg(long)]
    plural: String,
    /// `key=value` of the annotation.
    #[arg(long)]
    annotation: String,
    /// Only the releases matching this label selector (e.g.
    /// `bench.opmodel.dev/system=opm-opm`): two systems of one kind share the cluster.
    #[arg(long, default_value = "")]
    selector: String,
    /// Patches in flight at once.
    #[arg(long, default_value_t = 32)]
    concurrency: usize,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let (key, value) = args
        .annotation
        .split_once('=')
        .ok_or_else(|| anyhow::anyhow!("--annotation must be key=value"))?;
    let client = kube::Client::try_default().await?;
    let gvk = GroupVersionKind::gvk(&args.group, &args.version, &args.kind);
    let ar = ApiResource::from_gvk_with_plural(&gvk, &args.plural);
    let all: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
    let objects = all
        .list_metadata(&ListParams::default().labels(&args.selector))
        .await?;
    let patch = json!({"metadata": {"annotations": {key: value}}});
    let start = Instant::now();
    let results: Vec<Result<(), kube::Error>> = stream::iter(objects.items)
        .map(|o| {
            let api: Api<DynamicObject> =
                Api::namespaced_with(client.clone(), &o.namespace().unwrap_or_default(), &ar);
            let patch = &patch;
            async move {
                api.patch_metadata(&o.name_any(), &PatchParams::default(), &Patch::Merge(patch))
                    .await
                    .map(|_| ())
            }
        })
        .buffer_unordered(args.concurrency)
        .collect()
        .await;
    let patched = results.len();
    for r in results {
        r?;
    }
    println!(
        "{}",
        json!({"patched": patched, "seconds": start.elapsed().as_secs_f64()})
    );
    Ok(())
}
