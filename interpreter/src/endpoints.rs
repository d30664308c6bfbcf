//! The operator's small HTTP endpoints: `/metrics` (Prometheus text from the in-process
//! registry) and the probes `/healthz`, `/readyz`.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::routing::get;

use crate::driver::Runtime;

/// Serves `/metrics`, `/healthz` and `/readyz` on `addr` until the process ends.
pub async fn serve(addr: SocketAddr, rt: Arc<Runtime>) -> std::io::Result<()> {
    let app = Router::new()
        .route(
            "/metrics",
            get(move || {
                let rt = rt.clone();
                async move {
                    (
                        [(http::header::CONTENT_TYPE, crate::metrics::CONTENT_TYPE)],
                        rt.metrics.render(),
                    )
                }
            }),
        )
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(|| async { "ok" }));
    let listener = tokio::net::TcpListener::bind(addr).await?;
    tracing::info!(%addr, "serving /metrics, /healthz, /readyz");
    axum::serve(listener, app).await
}
