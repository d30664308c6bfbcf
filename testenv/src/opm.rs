//! The Open Platform Model fixtures of `examples/opm/` (SPEC §30), published once per test
//! binary to the shared [`CueRegistry`]: the project's own small `opmodel.dev/core@v2`,
//! the catalog `opmodel.dev/catalogs/opm@v2` at two builds, three modules, and the verdict
//! fixtures (an unmatched component, an unhandled trait, a second catalog doubling a
//! transformer, an incomplete output, a core v0 module and its core).
//!
//! How a render package is laid out with them is `interpreter/src/cue/opm/LAYOUT.md`;
//! [`glue_cue`] is the operator's glue file that layout embeds.

use std::path::{Path, PathBuf};

use tokio::sync::OnceCell;

use crate::error::{Error, Result};
use crate::registry::{CueRegistry, copy_to_temp};
use crate::tools;

/// Our `opmodel.dev/core@v2`.
pub const CORE: &str = "opmodel.dev/core@v2";
/// Published core builds. Modules and catalogs require the first; the second exists so a
/// test can show `cue` picks the required core, not the newest.
pub const CORE_VERSIONS: [&str; 2] = ["v2.0.0-test.1", "v2.0.0-test.2"];

/// The catalog every Platform of the tests enables.
pub const CATALOG: &str = "opmodel.dev/catalogs/opm@v2";
/// The older catalog build (the web module is built against it).
pub const CATALOG_OLD: &str = "v2.0.0-test.1";
/// The newer catalog build: every object it renders carries
/// `catalog.opmodel.dev/version: 2.0.0-test.2` (the older one `2.0.0-test.1`).
pub const CATALOG_NEW: &str = "v2.0.0-test.2";
/// The annotation every object of the catalog carries, naming the build that rendered it.
pub const CATALOG_VERSION_ANNOTATION: &str = "catalog.opmodel.dev/version";

/// A second catalog providing a `deployment-transformer` too (the duplicate verdict).
pub const EXTRA_CATALOG: &str = "opmodel.dev/catalogs/extra@v2";
/// Its one published build.
pub const EXTRA_CATALOG_VERSION: &str = "v2.0.0-test.1";

/// The retired core v0 (the seed's kernel era).
pub const CORE_V0: &str = "opmodel.dev/core@v0";
/// Its one published build.
pub const CORE_V0_VERSION: &str = "v0.4.0-test.1";

/// The web module (Deployment + Service, ConfigMap, ServiceAccount: the same four objects
/// as the plain `examples/modules/web`), built against [`CATALOG_OLD`].
pub const WEB: &str = "example.com/opm/web@v1";
/// Published web builds; their `metadata.version` (the `module.opmodel.dev/version` label
/// on every object) is the version without the `v`.
pub const WEB_VERSIONS: [&str; 2] = ["v1.0.0", "v1.0.1"];
/// The worker module (a StatefulSet matched on the workload-type label, two ConfigMaps
/// from one list-output transformer), built against [`CATALOG_NEW`].
pub const WORKER: &str = "example.com/opm/worker@v1";
/// The cache module (Deployment, Service, and a PodDisruptionBudget from its trait),
/// built against [`CATALOG_NEW`].
pub const CACHE: &str = "example.com/opm/cache@v1";
/// The version worker and cache are published at.
pub const MODULE_VERSION: &str = "v1.0.0";

/// Verdict fixture: component `nightly` matches no transformer.
pub const UNMATCHED: &str = "example.com/opm/verdicts/unmatched@v1";
/// Verdict fixture: component `server` carries a trait no matched transformer declares.
pub const UNHANDLED: &str = "example.com/opm/verdicts/unhandled@v1";
/// Verdict fixture: without values, the Deployment of component `server` is incomplete.
pub const INCOMPLETE: &str = "example.com/opm/verdicts/incomplete@v1";
/// The version the three verdict modules above are published at.
pub const VERDICT_VERSION: &str = "v1.0.0";
/// Verdict fixture: a module of the retired core v0.
pub const LEGACY: &str = "example.com/opm/verdicts/legacy@v0";
/// Its one published build.
pub const LEGACY_VERSION: &str = "v0.1.0";

/// The trait FQN [`UNHANDLED`] attaches.
pub const UNHANDLED_TRAIT: &str = "example.com/opm/verdicts/unhandled/traits/autoscaling@v1alpha1";
/// The resource FQN [`UNMATCHED`]'s `nightly` component attaches.
pub const UNMATCHED_RESOURCE: &str =
    "example.com/opm/verdicts/unmatched/resources/schedule@v1alpha1";

/// The operator's OPM glue (`interpreter/src/cue/opm/glue.cue`).
pub fn glue_cue() -> PathBuf {
    repo_root().join("interpreter/src/cue/opm/glue.cue")
}

/// `examples/opm/`.
pub fn opm_dir() -> PathBuf {
    tools::examples_dir().join("opm")
}

/// The authored instance package a `Release` artifact carries (`examples/opm/instance/`).
pub fn instance_dir() -> PathBuf {
    opm_dir().join("instance")
}

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

static GLOBAL: OnceCell<OpmFixtures> = OnceCell::const_new();

/// The OPM fixtures, published to [`CueRegistry::global`].
#[derive(Debug)]
pub struct OpmFixtures {
    registry: &'static CueRegistry,
}

impl OpmFixtures {
    /// The shared registry with every OPM fixture published; panics with the reason when
    /// it cannot be set up.
    pub async fn global() -> &'static OpmFixtures {
        match Self::try_global().await {
            Ok(f) => f,
            Err(e) => panic!("opm-testenv: cannot publish the OPM fixtures: {e}"),
        }
    }

    /// Like [`OpmFixtures::global`], returning the error.
    pub async fn try_global() -> Result<&'static OpmFixtures> {
        GLOBAL
            .get_or_try_init(|| async {
                let registry = CueRegistry::try_global().await?;
                publish_all(registry).await?;
                Ok(OpmFixtures { registry })
            })
            .await
    }

    /// The registry they are published to (`cue_env()` for `cue` runs against it).
    pub fn registry(&self) -> &'static CueRegistry {
        self.registry
    }
}

/// Publishes in dependency order: cores, catalogs, then what imports them (`cue mod
/// publish` checks that a module's dependencies resolve).
async fn publish_all(registry: &CueRegistry) -> Result<()> {
    let opm = opm_dir();
    let verdicts = opm.join("verdicts");
    for version in CORE_VERSIONS {
        publish(registry, &opm.join("core"), version).await?;
    }
    publish(registry, &verdicts.join("core_v0"), CORE_V0_VERSION).await?;
    for version in [CATALOG_OLD, CATALOG_NEW] {
        publish(registry, &opm.join("catalog"), version).await?;
    }
    publish(
        registry,
        &verdicts.join("catalog_extra"),
        EXTRA_CATALOG_VERSION,
    )
    .await?;
    for version in WEB_VERSIONS {
        publish(registry, &opm.join("modules/web"), version).await?;
    }
    for name in ["worker", "cache"] {
        publish(registry, &opm.join("modules").join(name), MODULE_VERSION).await?;
    }
    for name in ["unmatched", "unhandled", "incomplete"] {
        publish(registry, &verdicts.join(name), VERDICT_VERSION).await?;
    }
    publish(registry, &verdicts.join("legacy"), LEGACY_VERSION).await?;
    Ok(())
}

/// Publishes `dir` at `version`. A fixture with an `identity/version.cue` (the catalog, the
/// modules) gets that file rewritten to the version without its `v` first, so the keys and
/// labels it renders name the build published, as upstream's identity packages do.
async fn publish(registry: &CueRegistry, dir: &Path, version: &str) -> Result<()> {
    let copy = copy_to_temp(dir)?;
    let version_file = copy.path().join("identity/version.cue");
    if version_file.is_file() {
        let bare = version.strip_prefix('v').unwrap_or(version);
        std::fs::write(
            &version_file,
            format!("package identity\n\nVersion: \"{bare}\"\n"),
        )
        .map_err(|e| Error::io(format!("write {}", version_file.display()), e))?;
    }
    registry.publish(copy.path(), version).await
}
