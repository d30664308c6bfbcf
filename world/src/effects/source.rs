//! `ResolveSource`: a Flux source's artifact (SPEC §16).

use opm_core::effect::SourceLocator;
use opm_core::input::{InputKind, SourceError};

use crate::SourceId;
use crate::cluster::Cluster;
use crate::faults::FaultError;

impl Cluster {
    pub(super) fn resolve_source(
        &self,
        source: &SourceLocator,
        fault: Option<&FaultError>,
    ) -> InputKind {
        let id = SourceId::new(&source.kind, &source.namespace, &source.name);
        InputKind::SourceResolved {
            result: match fault.and_then(FaultError::as_source) {
                Some(e) => Err(e),
                None => self.resolve(&id),
            },
        }
    }

    fn resolve(&self, id: &SourceId) -> Result<opm_core::input::SourceArtifact, SourceError> {
        let Some(src) = self.catalog.sources.get(id) else {
            return Err(SourceError::NotFound);
        };
        if !src.ready {
            return Err(SourceError::NotReady {
                message: src.message.clone(),
            });
        }
        src.artifact.clone().ok_or(SourceError::NoArtifact)
    }
}
