//! `deletionPolicy: WaitForTermination` (SPEC §12): wait until each deleted object is
//! gone, on watch events (one name-scoped watch per object, no polling). An object counts
//! as gone when it is absent or present with another UID (a successor). The wait ends a
//! little before the attempt's deadline and reports exactly what is left; the core turns
//! that into `PruneFailed`.

use std::sync::Mutex;
use std::time::Duration;

use futures::{StreamExt, stream};
use kube::Client;
use kube::runtime::wait::{await_condition, conditions};
use opm_core::effect::Deletion;
use opm_core::{ApiError, ResourceId};

use crate::kube::discovery::Resolver;
use crate::kube::dynamic;

/// Objects watched at the same time.
const CONCURRENCY: usize = 64;
/// Kept before the attempt's deadline so the answer arrives in time.
pub(crate) const MARGIN: Duration = Duration::from_millis(500);

/// Waits up to `bound` for every target; returns those still there (or whose watch
/// failed, with the first error).
pub(crate) async fn await_gone(
    client: Client,
    resolver: &Resolver,
    targets: &[Deletion],
    bound: Duration,
) -> (Vec<ResourceId>, Option<ApiError>) {
    let done: Mutex<Vec<ResourceId>> = Mutex::new(Vec::new());
    let error: Mutex<Option<ApiError>> = Mutex::new(None);
    let waits: Vec<_> = targets
        .iter()
        .map(|d| wait_one(client.clone(), resolver, d, &done, &error))
        .collect();
    let all = stream::iter(waits)
        .buffer_unordered(CONCURRENCY)
        .collect::<Vec<()>>();
    let _ = tokio::time::timeout(bound, all).await;
    let done = done.into_inner().unwrap_or_else(|p| p.into_inner());
    let mut remaining: Vec<ResourceId> = targets
        .iter()
        .map(|d| d.id.clone())
        .filter(|id| !done.contains(id))
        .collect();
    remaining.sort();
    (
        remaining,
        error.into_inner().unwrap_or_else(|p| p.into_inner()),
    )
}

async fn wait_one(
    client: Client,
    resolver: &Resolver,
    d: &Deletion,
    done: &Mutex<Vec<ResourceId>>,
    error: &Mutex<Option<ApiError>>,
) {
    match gone(client, resolver, d).await {
        Ok(()) => done
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(d.id.clone()),
        Err(e) => {
            error
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get_or_insert(e);
        }
    }
}

async fn gone(client: Client, resolver: &Resolver, d: &Deletion) -> Result<(), ApiError> {
    let api = dynamic::api_for(client, resolver, &d.id).await?;
    await_condition(api, &d.id.name, conditions::is_deleted(&d.uid))
        .await
        .map(|_| ())
        .map_err(|e| ApiError::Unavailable {
            message: format!("watching {} for its deletion failed: {e}", d.id.display()),
        })
}
