//! Renders done ahead of an attempt (issue 18): which ModuleReleases the interpreter may
//! render before their own attempt asks, so that one batched `cue` run serves many
//! releases of one module version and their attempts find the result in the render cache
//! (DESIGN §2).
//!
//! The request is built by the same function as the one an attempt's step 10 sends (SPEC
//! §3), so an attempt's render key equals the one rendered ahead. Only releases whose
//! render needs nothing but their own spec qualify: no `valuesFrom` and no
//! `module.secretRef` (those are read under the release's identity first, SPEC §27), no
//! `dependsOn` (the attempt may stop before rendering), not suspended, not being deleted,
//! and a generation the operator has not handled yet (a new or edited release) or an
//! attempt that waited for the Platform (`PlatformNotReady`: it still needs its first
//! render), so a settled fleet is never rendered ahead.

use serde_json::Value;

use crate::api::common::ModuleRef;
use crate::api::{ModuleRelease, ReleaseStatus};
use crate::effect::RenderRequest;
use crate::reason::Reason;

/// The `Render` request of a module release with `values` (merged `valuesFrom`, then
/// `spec.values`) pulling with `credentials` (SPEC §3 step 10).
pub(crate) fn module_request(
    module: &ModuleRef,
    values: Option<Value>,
    name: &str,
    namespace: &str,
    credentials: Option<String>,
) -> RenderRequest {
    RenderRequest::Module {
        path: module.path.clone(),
        version: module.version.clone(),
        values,
        release_name: name.to_owned(),
        release_namespace: namespace.to_owned(),
        credentials,
    }
}

/// The request `release`'s next attempt will render, when it may be rendered ahead of
/// that attempt (see the module docs); `None` otherwise.
pub fn render_ahead(release: &ModuleRelease) -> Option<RenderRequest> {
    let meta = &release.metadata;
    let spec = &release.spec;
    let name = meta.name.as_deref().filter(|n| !n.is_empty())?;
    let namespace = meta.namespace.as_deref().filter(|n| !n.is_empty())?;
    let handled = release.status.as_ref().map_or(0, |s| s.observed_generation);
    let pending =
        meta.generation.is_none_or(|g| g != handled) || waits_for_platform(release.status.as_ref());
    let secret_ref = spec.module.secret_ref.as_ref().map(|s| s.name.as_str());
    let eligible = pending
        && meta.deletion_timestamp.is_none()
        && !spec.common.suspend
        && spec.common.depends_on.is_empty()
        && !crate::values_from::reads_objects(&spec.values_from, secret_ref)
        && crate::source::check_module(&spec.module).is_ok();
    eligible.then(|| module_request(&spec.module, spec.values.clone(), name, namespace, None))
}

/// Whether a release's last attempt waited for the Platform (`Ready` is
/// `PlatformNotReady`): it renders as soon as the Platform is ready.
pub fn waits_for_platform(status: Option<&ReleaseStatus>) -> bool {
    status.is_some_and(|s| {
        s.conditions
            .iter()
            .any(|c| c.type_ == "Ready" && c.reason == Reason::PlatformNotReady.as_str())
    })
}
