//! The operator's small HTTP endpoints: `/metrics` (Prometheus text from the in-process
//! registry) and the probes `/healthz`, `/readyz`.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::routing::get;
use http::StatusCode;

use crate::ops::health::Health;
use crate::ops::metrics::Metrics;

/// What the endpoints read: the heartbeats and the metrics. The shared runtime
/// (`effects::runtime::Runtime`) holds both; a trait keeps it out of this folder's
/// dependencies.
pub trait Observed: Send + Sync + 'static {
    /// The heartbeats behind `/healthz`.
    fn health(&self) -> &Arc<Health>;
    /// The registry behind `/metrics`.
    fn metrics(&self) -> &Metrics;
}

/// Serves `/metrics`, `/healthz` and `/readyz` on `addr` until the process ends.
pub async fn serve<R: Observed>(addr: SocketAddr, rt: Arc<R>) -> std::io::Result<()> {
    let health = rt.health().clone();
    let app = Router::new()
        .route(
            "/metrics",
            get(move || {
                let rt = rt.clone();
                async move {
                    (
                        [(
                            http::header::CONTENT_TYPE,
                            crate::ops::metrics::CONTENT_TYPE,
                        )],
                        rt.metrics().render(),
                    )
                }
            }),
        )
        .route("/healthz", get(move || async move { healthz(&health) }))
        .route("/readyz", get(|| async { "ok" }));
    let listener = tokio::net::TcpListener::bind(addr).await?;
    tracing::info!(%addr, "serving /metrics, /healthz, /readyz");
    axum::serve(listener, app).await
}

/// `/healthz`: 200 "ok" while the controllers make progress, else 503 naming why (SPEC §22).
fn healthz(health: &Health) -> (StatusCode, String) {
    match health.check() {
        Ok(()) => (StatusCode::OK, "ok".into()),
        Err(why) => {
            let text: Vec<String> = why.iter().map(ToString::to_string).collect();
            tracing::warn!(reasons = ?text, "/healthz failing");
            (StatusCode::SERVICE_UNAVAILABLE, text.join("\n"))
        }
    }
}
