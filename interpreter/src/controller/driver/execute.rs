//! Executes one effect: an awaited one in the cluster it names, through the executor of
//! its kind (one line each), or a fire-and-forget one.

use opm_core::effect::Effect;
use opm_core::{InputKind, ReleaseKey};

use super::{Runtime, Seen};
use crate::effects::{self, Cx};

/// Runs one awaited effect in the cluster it names (SPEC §31).
pub(super) async fn execute(cx: &mut Cx<'_>, effect: &Effect) -> InputKind {
    let Some(cluster) = effect.cluster() else {
        return execute_here(cx, effect).await;
    };
    let conn = match cx.rt.clusters.connect(cx.key, cluster, &cx.rt.watch).await {
        Ok(c) => c,
        Err(e) => {
            let e = opm_core::ApiError::Unreachable {
                message: e.to_string(),
            };
            if let Some(answer) = effects::failed_for(effect, &e) {
                return answer;
            }
            return execute_here(cx, effect).await;
        }
    };
    cx.conn = Some(conn.clone());
    let mut answer = execute_here(cx, effect).await;
    if conn.transport_failed() {
        effects::unreachable_errors(&mut answer);
    }
    cx.rt.clusters.refresh_gauges();
    answer
}

/// Runs one awaited effect within `cx.bound`: one line per effect kind.
async fn execute_here(cx: &mut Cx<'_>, effect: &Effect) -> InputKind {
    use effects::*;
    match effect {
        Effect::AddFinalizer { finalizer } => finalizer::add(cx, finalizer).await,
        Effect::RemoveFinalizer { finalizer } => finalizer::remove(cx, finalizer).await,
        Effect::CheckDependencies {
            namespace,
            refs,
            objects,
            identity,
        } => dependencies::run(cx, namespace, refs, objects, identity.as_ref()).await,
        Effect::ListDependents { .. } => dependencies::dependents(cx).await,
        Effect::ResolveSource { source } => source::run(cx, source).await,
        Effect::FetchArtifact { url, digest, .. } => fetch::run(cx, url, digest).await,
        Effect::Render { request } => render::run(cx, request).await,
        Effect::CheckServiceAccount {
            namespace, name, ..
        } => service_account::run(cx, namespace, name).await,
        Effect::PatchStatus { patch, status } => status::run(cx, patch, status).await,
        Effect::ReadValues {
            namespace,
            refs,
            credentials,
            identity,
        } => {
            values::run(
                cx,
                namespace,
                refs,
                credentials.as_deref(),
                identity.as_ref(),
            )
            .await
        }
        Effect::ReadKubeConfig {
            namespace,
            name,
            key,
            max_bytes,
        } => {
            let req = kube_config::Request {
                namespace,
                name,
                key: key.as_deref(),
                max_bytes: *max_bytes,
            };
            kube_config::run(cx, req).await
        }
        Effect::EmitEvent { .. } | Effect::RecordMetric { .. } | Effect::Done { .. } => {
            unreachable!("fire-and-forget and Done effects are never executed as awaited")
        }
        _ => on_objects(cx, effect).await,
    }
}

/// The effects on a release's objects: drift, apply, owners, health, prune, termination.
async fn on_objects(cx: &mut Cx<'_>, effect: &Effect) -> InputKind {
    use effects::*;
    match effect {
        Effect::CheckDrift {
            objects,
            field_manager,
            identity,
            ..
        } => drift::run(cx, objects, field_manager, identity.as_ref()).await,
        Effect::Apply {
            stages,
            field_manager,
            force,
            identity,
            ..
        } => apply::run(cx, stages, field_manager, *force, identity.as_ref()).await,
        Effect::InspectOwners {
            targets, identity, ..
        } => owners::run(cx, targets, identity.as_ref()).await,
        Effect::AssessHealth {
            targets, identity, ..
        } => health::run(cx, targets, identity.as_ref()).await,
        Effect::InspectStale {
            targets, identity, ..
        } => prune::inspect(cx, targets, identity.as_ref()).await,
        Effect::Prune {
            deletions,
            identity,
            ..
        } => prune::delete(cx, deletions, identity.as_ref()).await,
        Effect::AwaitTermination {
            targets, identity, ..
        } => termination::run(cx, targets, identity.as_ref()).await,
        other => unreachable!("not an effect on objects: {:?}", other.kind()),
    }
}

pub(super) async fn fire_and_forget(rt: &Runtime, key: &ReleaseKey, seen: &Seen, effect: &Effect) {
    match effect {
        Effect::EmitEvent { event } => {
            if let Some(r) = &seen.regarding {
                // Queued before the Event is written: a queue insert, never a wait, and the
                // release's events reach the receiver in the order they were recorded.
                if let Some(webhook) = &rt.webhook {
                    webhook.enqueue(event, r, seen.generation);
                }
                rt.events.publish(event, r).await;
            }
        }
        Effect::RecordMetric { metric } => rt.metrics.record(key, metric),
        other => tracing::warn!(effect = ?other.kind(), "unexpected effect before the last"),
    }
}
