//! Artifact download (SPEC §17): one GET, streamed to a temporary file while hashing.
//!
//! The executor decides nothing about retries; it reports a typed [`FetchError`], and
//! `effects::local` maps it to the core's typed error, from which the core picks the SPEC §4
//! row: a failure that may go away by itself (`FetchFailed`, transient) or content that will
//! never become valid (`InvalidArtifact`, stalled).

use std::path::Path;
use std::time::Duration;

use futures_util::StreamExt;
use sha2::{Digest as _, Sha256};
use tempfile::NamedTempFile;
use tokio::io::AsyncWriteExt;

mod digest;
mod redirect;

pub use digest::Sha256Digest;
use redirect::{RefusedRedirect, error_chain, find_source, same_origin_redirects};

/// Default download cap (SPEC §2: 64 MiB).
pub const DEFAULT_MAX_ARTIFACT_BYTES: u64 = 64 * 1024 * 1024;
/// Default deadline for one download (SPEC §17).
pub const DEFAULT_FETCH_TIMEOUT: Duration = Duration::from_secs(60);

/// Why a download failed. Variants are split along SPEC §4's two rows (transient or stalled).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FetchError {
    /// The server could not be reached or the request failed before a response.
    #[error("artifact download from {url} failed: {detail}")]
    Connect {
        /// The artifact URL.
        url: String,
        /// What failed, with its causes.
        detail: String,
    },
    /// The server answered with something other than 200.
    #[error("artifact download from {url} failed: HTTP {status}")]
    HttpStatus {
        /// The artifact URL.
        url: String,
        /// The HTTP status.
        status: u16,
    },
    /// The download did not finish within the deadline.
    #[error("artifact download from {url} timed out after {}s", after.as_secs_f64())]
    Timeout {
        /// The artifact URL.
        url: String,
        /// The deadline.
        after: Duration,
    },
    /// The body ended early or broke off mid-stream.
    #[error("artifact download from {url} was truncated after {received} bytes: {detail}")]
    Truncated {
        /// The artifact URL.
        url: String,
        /// Bytes received before it broke off.
        received: u64,
        /// What failed, with its causes.
        detail: String,
    },
    /// The bytes downloaded do not hash to the advertised digest (a source that moved on, or a
    /// corrupted transfer: both may resolve on their own).
    #[error("artifact digest mismatch: expected {expected}, got {actual}")]
    DigestMismatch {
        /// The digest the source advertised.
        expected: String,
        /// The digest of the bytes received.
        actual: String,
    },
    /// Writing the temporary file failed (disk full, permissions).
    #[error("artifact download: local I/O error: {detail}")]
    Io {
        /// What failed, with its causes.
        detail: String,
    },
    /// The artifact is larger than the download cap.
    #[error("artifact exceeds the download cap of {limit} bytes")]
    TooLarge {
        /// The download cap in bytes.
        limit: u64,
    },
    /// The advertised digest uses an algorithm other than sha256.
    #[error("unsupported artifact digest algorithm {algorithm:?} (only sha256 is accepted)")]
    UnsupportedDigest {
        /// The algorithm named.
        algorithm: String,
    },
    /// The advertised digest is not `sha256:` + 64 lowercase hex characters.
    #[error("malformed artifact digest {digest:?}")]
    MalformedDigest {
        /// The digest as given.
        digest: String,
    },
    /// The URL is not an http(s) URL.
    #[error("unsupported artifact URL {url:?}: only http and https are fetched")]
    UnsupportedUrl {
        /// The artifact URL.
        url: String,
    },
    /// The server redirected to another origin (or too often). Not followed: the GET runs
    /// from inside the cluster network, so a redirect must not aim it at another host (a
    /// metadata service, an internal API). Transient: the source may be fixed.
    #[error(
        "artifact download from {url} was redirected to {to}: {why} (redirects are followed \
         only within the same scheme, host and port, at most {MAX_REDIRECTS} times)"
    )]
    Redirect {
        /// The artifact URL.
        url: String,
        /// Where the redirect pointed.
        to: String,
        /// Why it was not followed.
        why: &'static str,
    },
}

/// Redirects followed within one origin.
pub const MAX_REDIRECTS: usize = 5;

/// Limits of one download.
#[derive(Debug, Clone)]
pub struct FetchConfig {
    /// Deadline for the whole request, body included.
    pub timeout: Duration,
    /// Bytes accepted before the download is refused as too large.
    pub max_bytes: u64,
}

impl Default for FetchConfig {
    fn default() -> Self {
        Self {
            timeout: DEFAULT_FETCH_TIMEOUT,
            max_bytes: DEFAULT_MAX_ARTIFACT_BYTES,
        }
    }
}

/// A verified download: the file is deleted when this value is dropped.
#[derive(Debug)]
pub struct FetchedFile {
    /// The downloaded bytes; deleted on drop.
    pub file: NamedTempFile,
    /// Their digest, equal to the advertised one.
    pub digest: Sha256Digest,
    /// Their size in bytes.
    pub size: u64,
}

/// Downloads artifacts. Cheap to clone (the HTTP client is shared).
#[derive(Debug, Clone)]
pub struct Fetcher {
    client: reqwest::Client,
    config: FetchConfig,
}

impl Fetcher {
    /// A fetcher with its own HTTP client (redirects followed only within one origin) and the limits of `config`.
    pub fn new(config: FetchConfig) -> Result<Self, FetchError> {
        // reqwest is built without a default crypto provider so the process uses the same
        // one (ring) as the Kubernetes client; installing twice is harmless.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::builder()
            .timeout(config.timeout)
            .connect_timeout(config.timeout)
            .redirect(same_origin_redirects())
            .build()
            .map_err(|e| FetchError::Io {
                detail: format!("building HTTP client: {e}"),
            })?;
        Ok(Self { client, config })
    }

    /// The limits it downloads with.
    pub fn config(&self) -> &FetchConfig {
        &self.config
    }

    /// Downloads `url` into a new temporary file under `tmp_dir` and verifies it against
    /// `expected` (`sha256:<hex>`). The digest is checked before any byte is requested so a
    /// bad digest never costs a download.
    pub async fn fetch(
        &self,
        url: &str,
        expected: &str,
        tmp_dir: &Path,
    ) -> Result<FetchedFile, FetchError> {
        let expected = Sha256Digest::parse(expected)?;
        let parsed = reqwest::Url::parse(url).map_err(|_| FetchError::UnsupportedUrl {
            url: url.to_owned(),
        })?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(FetchError::UnsupportedUrl {
                url: url.to_owned(),
            });
        }
        // The client timeout covers the body too; this outer bound also covers local writes.
        let outer = self.config.timeout + Duration::from_secs(1);
        match tokio::time::timeout(outer, self.download(parsed, url, tmp_dir)).await {
            Ok(res) => {
                let (file, digest, size) = res?;
                if digest != expected {
                    return Err(FetchError::DigestMismatch {
                        expected: expected.to_string(),
                        actual: digest.to_string(),
                    });
                }
                tracing::debug!(url, %digest, size, "artifact downloaded and verified");
                Ok(FetchedFile { file, digest, size })
            }
            Err(_) => Err(FetchError::Timeout {
                url: url.to_owned(),
                after: self.config.timeout,
            }),
        }
    }

    async fn download(
        &self,
        parsed: reqwest::Url,
        url: &str,
        tmp_dir: &Path,
    ) -> Result<(NamedTempFile, Sha256Digest, u64), FetchError> {
        let classify = |e, received| self.classify(url, e, received);
        let resp = self
            .client
            .get(parsed)
            .send()
            .await
            .map_err(|e| classify(e, None))?;
        let status = resp.status();
        if status != reqwest::StatusCode::OK {
            return Err(FetchError::HttpStatus {
                url: url.to_owned(),
                status: status.as_u16(),
            });
        }
        let advertised = resp.content_length();
        if advertised.is_some_and(|len| len > self.config.max_bytes) {
            return Err(FetchError::TooLarge {
                limit: self.config.max_bytes,
            });
        }
        let io = |e: std::io::Error| FetchError::Io {
            detail: e.to_string(),
        };
        let tmp = NamedTempFile::new_in(tmp_dir).map_err(io)?;
        let mut out = tokio::fs::File::from_std(tmp.reopen().map_err(io)?);
        let mut hasher = Sha256::new();
        let mut received: u64 = 0;
        let mut body = resp.bytes_stream();
        while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(|e| classify(e, Some(received)))?;
            received += chunk.len() as u64;
            if received > self.config.max_bytes {
                return Err(FetchError::TooLarge {
                    limit: self.config.max_bytes,
                });
            }
            hasher.update(&chunk);
            out.write_all(&chunk).await.map_err(io)?;
        }
        out.flush().await.map_err(io)?;
        out.sync_all().await.map_err(io)?;
        if let Some(len) = advertised
            && len != received
        {
            return Err(FetchError::Truncated {
                url: url.to_owned(),
                received,
                detail: format!("Content-Length was {len}"),
            });
        }
        Ok((tmp, Sha256Digest(hasher.finalize().into()), received))
    }

    /// What a failed request was: a refused redirect, the deadline, a body that broke off
    /// after `received` bytes, or no response at all.
    fn classify(&self, url: &str, e: reqwest::Error, received: Option<u64>) -> FetchError {
        if let Some(r) = find_source::<RefusedRedirect>(&e) {
            FetchError::Redirect {
                url: url.to_owned(),
                to: r.to.clone(),
                why: r.why,
            }
        } else if e.is_timeout() {
            FetchError::Timeout {
                url: url.to_owned(),
                after: self.config.timeout,
            }
        } else if let Some(received) = received {
            FetchError::Truncated {
                url: url.to_owned(),
                received,
                detail: error_chain(&e),
            }
        } else {
            FetchError::Connect {
                url: url.to_owned(),
                detail: error_chain(&e),
            }
        }
    }
}

#[cfg(test)]
mod tests;
