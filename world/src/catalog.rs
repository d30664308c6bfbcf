//! What the world serves instead of running CUE and HTTP: Flux sources, artifacts (digest →
//! the exported value of each path, or a render error) and modules (path@version + values →
//! exported value, or an error).
//!
//! Modules are small templates so that a values edit changes the rendered objects the way a
//! real module would: string leaves `${release.name}`, `${release.namespace}`,
//! `${values.KEY}` and `${values}` are substituted (a leaf that is exactly one placeholder
//! takes the value with its JSON type, e.g. an integer `replicas`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

mod module;

pub use module::ModuleDef;

use opm_core::digest;
use opm_core::input::{FetchError, RenderError, SourceArtifact};

/// A Flux source object (`source.toolkit.fluxcd.io/v1`).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SourceId {
    /// `OCIRepository`, `GitRepository` or `Bucket`, matched against `sourceRef.kind`.
    pub kind: String,
    /// Where the source lives: `sourceRef.namespace`, or the release's own when that is empty.
    pub namespace: String,
    /// Matched against `sourceRef.name`.
    pub name: String,
}

impl SourceId {
    /// Names a source from borrowed parts, for setup code and tests.
    pub fn new(kind: &str, namespace: &str, name: &str) -> Self {
        Self {
            kind: kind.into(),
            namespace: namespace.into(),
            name: name.into(),
        }
    }
}

/// The part of a Flux source's status the operator reads.
#[derive(Clone, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FluxSource {
    /// Its `Ready` condition is `True`; while false, its releases are soft-blocked (SPEC §4).
    pub ready: bool,
    /// The source's own Ready message when not ready.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// What `status.artifact` advertises; `None` is the source-has-no-artifact case.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifact: Option<SourceArtifact>,
}

/// The result of exporting one path of an artifact.
pub type Exported = Result<Value, RenderError>;

/// A downloadable artifact.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ArtifactDef {
    /// The source's revision for this content (e.g. `main@sha1:...`); part of the digest.
    pub revision: String,
    /// Computed from the content when empty.
    #[serde(default)]
    pub digest: String,
    /// `http://source-controller.sim/<digest hex>.tar.gz` when empty.
    #[serde(default)]
    pub url: String,
    /// Bytes the extraction writes, reported by the fetch; 1024 when left at 0.
    #[serde(default)]
    pub size: u64,
    /// Directory (normalised: no `./`, no trailing `/`, root = `.`) → export result.
    pub paths: BTreeMap<String, Exported>,
    /// Download or extraction fails this way (e.g. a traversal entry).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub broken: Option<FetchError>,
    /// Every package in it is an authored OPM instance package (`instance.cue`, SPEC §30):
    /// rendered through the Platform, so it waits with `PlatformNotReady` without a Ready one.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub opm: bool,
}

impl ArtifactDef {
    /// One release package at `path` exporting `components`.
    pub fn package(revision: &str, path: &str, name: &str, ns: &str, components: Value) -> Self {
        Self {
            revision: revision.into(),
            digest: String::new(),
            url: String::new(),
            size: 0,
            paths: BTreeMap::from([(normalise_path(path), Ok(exported(name, ns, components)))]),
            broken: None,
            opm: false,
        }
    }

    /// Fills in digest, url and size from the content.
    pub fn sealed(mut self) -> Self {
        if self.digest.is_empty() {
            let content = serde_json::to_value(&self.paths).unwrap_or(Value::Null);
            let mut body = format!("{}\n{}", self.revision, digest::canonical_json(&content));
            // An instance package is other content than a plain one (plain digests are as
            // they were).
            if self.opm {
                body.push_str("\nopm");
            }
            self.digest = digest::sha256(body.as_bytes());
        }
        if self.url.is_empty() {
            let hex = self.digest.trim_start_matches("sha256:");
            self.url = format!("http://source-controller.sim/{hex}.tar.gz");
        }
        if self.size == 0 {
            self.size = 1024;
        }
        self
    }

    /// What a source serving this artifact puts in its `status.artifact`.
    pub fn advertised(&self) -> SourceArtifact {
        SourceArtifact {
            url: self.url.clone(),
            revision: self.revision.clone(),
            digest: self.digest.clone(),
        }
    }
}

/// `./app/` → `app`; `.`, `./` and `` → `.`.
pub fn normalise_path(p: &str) -> String {
    let t = p.trim_start_matches("./").trim_end_matches('/');
    if t.is_empty() || t == "." {
        ".".to_string()
    } else {
        t.to_string()
    }
}

/// The shape `cue export` gives for a release package.
/// Built by hand: `json!` would turn `components` into a new value through the serializer,
/// a deep copy of every render.
pub fn exported(name: &str, namespace: &str, components: Value) -> Value {
    let mut top = Map::new();
    top.insert("kind".into(), Value::String("ModuleRelease".into()));
    top.insert(
        "metadata".into(),
        json!({"name": name, "namespace": namespace}),
    );
    top.insert("components".into(), components);
    Value::Object(top)
}

/// Sources, artifacts and modules of the world.
#[derive(Clone, Debug, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Catalog {
    /// The Flux sources by identity, each with the status the operator reads.
    pub sources: BTreeMap<SourceId, FluxSource>,
    /// By digest.
    pub artifacts: BTreeMap<String, ArtifactDef>,
    /// By `path@version`.
    pub modules: BTreeMap<String, ModuleDef>,
}

impl Catalog {
    /// Stores an artifact (sealed) and returns what a source would advertise for it.
    pub fn add_artifact(&mut self, artifact: ArtifactDef) -> SourceArtifact {
        let a = artifact.sealed();
        let adv = a.advertised();
        self.artifacts.insert(a.digest.clone(), a);
        adv
    }

    /// Publishes `path@version` to the simulated registry, replacing an earlier definition.
    pub fn add_module(&mut self, path: &str, version: &str, def: ModuleDef) {
        self.modules.insert(format!("{path}@{version}"), def);
    }

    /// The artifact served at `url`, if any.
    pub fn served(&self, url: &str) -> Option<&ArtifactDef> {
        self.artifacts.values().find(|a| a.url == url)
    }

    /// What `cue export` gives for a release of `path@version`; unknown ones fail resolution.
    pub fn render_module(
        &self,
        path: &str,
        version: &str,
        name: &str,
        namespace: &str,
        values: Option<&Value>,
    ) -> Exported {
        match self.modules.get(&format!("{path}@{version}")) {
            Some(m) => m.render(name, namespace, values),
            None => Err(RenderError::Resolution {
                message: format!("module {path}@{version}: module not found"),
            }),
        }
    }

    /// Whether a render of this request goes through the Platform (SPEC §30): the module
    /// version, or the cached artifact, is OPM. Unknown ones are not (their render fails).
    pub fn renders_through_platform(&self, request: &opm_core::effect::RenderRequest) -> bool {
        match request {
            opm_core::effect::RenderRequest::Module { path, version, .. } => self
                .modules
                .get(&format!("{path}@{version}"))
                .is_some_and(|m| m.opm),
            opm_core::effect::RenderRequest::Artifact {
                artifact_digest, ..
            } => self.artifacts.get(artifact_digest).is_some_and(|a| a.opm),
        }
    }

    /// What `cue export` gives for `path` in the cached artifact `digest`, path errors included.
    pub fn render_artifact(&self, digest: &str, path: &str) -> Exported {
        let Some(a) = self.artifacts.get(digest) else {
            return Err(RenderError::InvalidArtifact {
                message: format!("artifact {digest} is not in the cache"),
            });
        };
        match a.paths.get(&normalise_path(path)) {
            Some(r) => r.clone(),
            None if a
                .paths
                .keys()
                .any(|p| p.starts_with(&format!("{}/", normalise_path(path)))) =>
            {
                Err(RenderError::ReleaseFileNotFound {
                    message: format!("no release.cue in \"{path}\""),
                })
            }
            None => Err(RenderError::PathNotFound {
                message: format!("path \"{path}\" not found in the artifact"),
            }),
        }
    }
}

#[cfg(test)]
mod tests;
