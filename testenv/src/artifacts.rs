//! A real HTTP server on 127.0.0.1 that serves artifacts (bytes at paths), as Flux's
//! source-controller does, with knobs to make it misbehave.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use tokio::sync::oneshot;

use crate::archive::sha256_digest;
use crate::error::{Error, Result};

/// How a path should misbehave. Faults combine: the delay comes first, then a status
/// override (which wins over the body faults).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Fault {
    /// Wait this long before answering.
    pub delay: Option<Duration>,
    /// Answer with this status (and a short text body) instead of the artifact.
    pub status: Option<u16>,
    /// Serve only the first `n` bytes, with an honest `Content-Length` (a corrupt file).
    pub truncate_to: Option<usize>,
    /// Announce the full length, send the first `n` bytes, then drop the connection.
    pub abort_after: Option<usize>,
}

impl Fault {
    pub fn status(code: u16) -> Self {
        Fault {
            status: Some(code),
            ..Default::default()
        }
    }
    pub fn delay(d: Duration) -> Self {
        Fault {
            delay: Some(d),
            ..Default::default()
        }
    }
    pub fn truncate_to(n: usize) -> Self {
        Fault {
            truncate_to: Some(n),
            ..Default::default()
        }
    }
    pub fn abort_after(n: usize) -> Self {
        Fault {
            abort_after: Some(n),
            ..Default::default()
        }
    }
}

#[derive(Default)]
struct Shared {
    files: HashMap<String, Bytes>,
    faults: HashMap<String, Fault>,
    hits: HashMap<String, u64>,
}

type SharedState = Arc<Mutex<Shared>>;

/// Serves registered byte strings at their paths (`GET`; anything else is 404). Stops
/// when dropped. Must be created inside the test's tokio runtime.
pub struct ArtifactServer {
    addr: SocketAddr,
    state: SharedState,
    shutdown: Option<oneshot::Sender<()>>,
}

impl ArtifactServer {
    /// Binds 127.0.0.1 on a free port and starts serving.
    pub async fn start() -> Result<Self> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| Error::io("bind artifact server", e))?;
        let addr = listener
            .local_addr()
            .map_err(|e| Error::io("artifact server address", e))?;
        let state: SharedState = Arc::default();
        let app = axum::Router::new()
            .fallback(serve)
            .with_state(state.clone());
        let (tx, rx) = oneshot::channel::<()>();
        tokio::spawn(async move {
            let server = axum::serve(listener, app).with_graceful_shutdown(async {
                let _ = rx.await;
            });
            if let Err(e) = server.await {
                tracing::warn!(error = %e, "artifact server stopped");
            }
        });
        Ok(ArtifactServer {
            addr,
            state,
            shutdown: Some(tx),
        })
    }

    /// `http://127.0.0.1:<port>`
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The URL of `path` (with or without a leading `/`).
    pub fn url(&self, path: &str) -> String {
        format!("{}/{}", self.base_url(), path.trim_start_matches('/'))
    }

    /// Serves `bytes` at `path`, replacing what was there; returns its URL.
    pub fn put(&self, path: &str, bytes: impl Into<Bytes>) -> String {
        self.lock().files.insert(normalize(path), bytes.into());
        self.url(path)
    }

    /// Serves `bytes` at `path` and returns `(url, "sha256:<hex>")`.
    pub fn put_with_digest(&self, path: &str, bytes: impl Into<Bytes>) -> (String, String) {
        let bytes = bytes.into();
        let digest = sha256_digest(&bytes);
        (self.put(path, bytes), digest)
    }

    /// Stops serving `path` (it answers 404).
    pub fn remove(&self, path: &str) {
        self.lock().files.remove(&normalize(path));
    }

    /// Makes `path` misbehave until [`ArtifactServer::clear_fault`].
    pub fn set_fault(&self, path: &str, fault: Fault) {
        self.lock().faults.insert(normalize(path), fault);
    }

    pub fn clear_fault(&self, path: &str) {
        self.lock().faults.remove(&normalize(path));
    }

    /// How many requests `path` has received (any outcome).
    pub fn hits(&self, path: &str) -> u64 {
        self.lock().hits.get(&normalize(path)).copied().unwrap_or(0)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Shared> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Drop for ArtifactServer {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}

impl std::fmt::Debug for ArtifactServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ArtifactServer")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

fn normalize(path: &str) -> String {
    format!("/{}", path.trim_start_matches('/'))
}

async fn serve(State(state): State<SharedState>, method: axum::http::Method, uri: Uri) -> Response {
    let path = uri.path().to_owned();
    let (file, fault) = {
        let mut shared = state.lock().unwrap_or_else(|p| p.into_inner());
        *shared.hits.entry(path.clone()).or_default() += 1;
        (
            shared.files.get(&path).cloned(),
            shared.faults.get(&path).cloned().unwrap_or_default(),
        )
    };
    if let Some(d) = fault.delay {
        tokio::time::sleep(d).await;
    }
    if let Some(code) = fault.status {
        let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        return (status, format!("injected status {code}\n")).into_response();
    }
    if method != axum::http::Method::GET {
        return StatusCode::METHOD_NOT_ALLOWED.into_response();
    }
    let Some(bytes) = file else {
        return (StatusCode::NOT_FOUND, "no artifact here\n").into_response();
    };
    if let Some(n) = fault.abort_after {
        let full = bytes.len();
        let head = bytes.slice(..n.min(full));
        // The pause lets the head and first bytes reach the client before the abort.
        let abort = futures_util::stream::once(async {
            tokio::time::sleep(Duration::from_millis(50)).await;
            Err(std::io::Error::other("injected connection abort"))
        });
        let body = futures_util::StreamExt::chain(
            futures_util::stream::iter([Ok::<_, std::io::Error>(head)]),
            abort,
        );
        let mut resp = Response::new(Body::from_stream(body));
        resp.headers_mut()
            .insert(header::CONTENT_LENGTH, HeaderValue::from(full as u64));
        return resp;
    }
    let body = match fault.truncate_to {
        Some(n) => bytes.slice(..n.min(bytes.len())),
        None => bytes,
    };
    ([(header::CONTENT_TYPE, "application/octet-stream")], body).into_response()
}
