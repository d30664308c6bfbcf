//! `FetchArtifact`: the artifact server (SPEC §17).

use opm_core::input::{FetchError, FetchedArtifact, InputKind};

use crate::cluster::Cluster;
use crate::faults::FaultError;

impl Cluster {
    pub(super) fn fetch_artifact(
        &self,
        url: &str,
        digest: &str,
        fault: Option<&FaultError>,
    ) -> InputKind {
        InputKind::ArtifactFetched {
            result: match fault.and_then(FaultError::as_fetch) {
                Some(e) => Err(e),
                None => self.fetch(url, digest),
            },
        }
    }

    fn fetch(&self, url: &str, digest: &str) -> Result<FetchedArtifact, FetchError> {
        let Some(a) = self.catalog.served(url) else {
            return Err(FetchError::Http { status: 404 });
        };
        if a.digest != digest {
            return Err(FetchError::DigestMismatch {
                expected: digest.to_string(),
                actual: a.digest.clone(),
            });
        }
        if let Some(e) = &a.broken {
            return Err(e.clone());
        }
        Ok(FetchedArtifact {
            digest: a.digest.clone(),
            size: a.size,
        })
    }
}
