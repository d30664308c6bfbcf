//! The reconcile path of SPEC §3 up to impersonation: finalizer, suspend, resume,
//! dependencies, source, fetch, render, digests. Drift, apply and prune are `apply.rs`.

use crate::api::SourceStatus;
use crate::conditions::{FALSE, TRUE, UNKNOWN};
use crate::constants::{FINALIZER, conditions as ct};
use crate::effect::{Effect, RenderRequest};
use crate::input::{
    ApiError, DependencyReport, FetchError, FetchedArtifact, RenderError, RenderOutput,
    SourceArtifact, SourceError,
};
use crate::object::{ReleaseKey, ReleaseObject};
use crate::outcome::{Failure, Outcome};
use crate::reason::Reason;
use crate::render_value::ReleaseIdentity;
use crate::{deps, desired, digest, exits, impersonation, inventory, ownership, source};

use super::ctx::{Ctx, SourceSpec, Step};
use super::{Attempt, Phase, add};

impl Attempt {
    pub(super) fn begin(&mut self, key: ReleaseKey, object: Option<Box<ReleaseObject>>) {
        let Some(obj) = object else {
            return self.done_now(Outcome::NoOp, Reason::Gone, None);
        };
        // The object's own identity wins over the key it was queued under.
        let mut k = obj.key();
        if k.name.is_empty() {
            k.name = key.name;
        }
        if k.namespace.is_empty() {
            k.namespace = key.namespace;
        }
        self.ctx = Ctx::from_object(k, *obj);
        self.deadline = add(self.start, self.ctx.timeout);
        self.ctx.service_account = impersonation::effective_service_account(
            self.ctx.common.service_account_name.as_deref(),
            self.cfg.default_service_account.as_deref(),
        );
        self.ctx.identity = self
            .ctx
            .service_account
            .as_deref()
            .map(|sa| impersonation::impersonation(&self.ctx.key.namespace, sa));
        if self.ctx.deleting {
            if !self.ctx.has_finalizer {
                return self.done_now(Outcome::NoOp, Reason::Deleted, None);
            }
            return self.deletion_start();
        }
        if !self.ctx.has_finalizer {
            self.ctx.step = Step::Finalizer;
            self.phase = Phase::AddingFinalizer;
            self.out.push(Effect::AddFinalizer {
                finalizer: FINALIZER.to_string(),
            });
            return;
        }
        self.after_finalizer();
    }

    pub(super) fn on_finalizer_added(&mut self, result: Result<(), ApiError>) {
        match result {
            Ok(()) => self.after_finalizer(),
            Err(e) => self.finalizer_failed(&e),
        }
    }

    fn after_finalizer(&mut self) {
        if self.ctx.common.suspend {
            return self.suspend_exit();
        }
        self.announce_resume();
        let (values_from, secret_ref) = match &self.ctx.spec {
            SourceSpec::Module {
                module,
                values_from,
                ..
            } => (
                values_from.as_slice(),
                module
                    .secret_ref
                    .as_ref()
                    .map(|s| s.name.as_str())
                    .filter(|n| !n.is_empty()),
            ),
            SourceSpec::Package { .. } => (&[][..], None),
        };
        if let Err(f) = crate::names::check_spec(&self.ctx.common, values_from, secret_ref) {
            return self.fail(f);
        }
        if self.ctx.common.depends_on.is_empty() {
            return self.mark_and_source();
        }
        self.ctx.step = Step::Dependencies;
        let resolved =
            match deps::resolve(&self.ctx.key, &self.ctx.common.depends_on).and_then(|r| {
                deps::precheck(
                    &self.ctx.key,
                    &r.releases,
                    &r.objects,
                    self.cfg.allow_cross_namespace_refs,
                )
                .map(|()| r)
            }) {
                Ok(r) => r,
                Err(f) => return self.fail(f),
            };
        // Objects are read as the release's ServiceAccount; without one, only where the
        // operator may act as itself (SPEC §15).
        if !resolved.objects.is_empty()
            && self.ctx.identity.is_none()
            && self.cfg.allow_operator_identity == crate::config::AllowOperatorIdentity::Off
        {
            return self.fail(Failure::stalled(
                Reason::ImpersonationFailed,
                impersonation::NO_SERVICE_ACCOUNT,
            ));
        }
        self.out.push(Effect::CheckDependencies {
            namespace: self.ctx.key.namespace.clone(),
            refs: resolved.releases.clone(),
            objects: resolved.objects.iter().map(|o| o.id.clone()).collect(),
            identity: self.ctx.identity.clone(),
        });
        self.phase = Phase::CheckingDependencies {
            refs: resolved.releases,
            objects: resolved.objects,
        };
    }

    pub(super) fn on_dependencies(
        &mut self,
        refs: Vec<ReleaseKey>,
        objects: Vec<deps::ObjectDependency>,
        result: Result<DependencyReport, ApiError>,
    ) {
        match result {
            Err(e) => self.fail(Failure::transient(
                Reason::DependenciesNotReady,
                format!("checking dependencies failed: {e}"),
            )),
            Ok(report) => {
                let reader = self
                    .ctx
                    .identity
                    .as_ref()
                    .map(|i| i.user.clone())
                    .unwrap_or_else(|| "the operator".to_string());
                match deps::evaluate(&self.ctx.key, &refs, &report)
                    .and_then(|()| deps::objects::evaluate(&objects, &report.objects, &reader))
                {
                    Err(f) => self.fail(f),
                    Ok(()) => self.mark_and_source(),
                }
            }
        }
    }

    /// SPEC §3 step 7, then step 8.
    fn mark_and_source(&mut self) {
        let msg = "Reconciliation in progress";
        self.ctx
            .conds
            .set(ct::RECONCILING, TRUE, Reason::Progressing, msg);
        self.ctx
            .conds
            .set(ct::READY, UNKNOWN, Reason::Progressing, msg);
        self.ctx.conds.remove(ct::STALLED);
        if let Err(f) = self.check_health_rules() {
            return self.fail(f);
        }
        self.ctx.step = Step::Source;
        match self.ctx.spec.clone() {
            SourceSpec::Module {
                module,
                values,
                values_from,
            } => {
                self.ctx.digests.config = digest::module_config(values.as_ref());
                if let Err(f) = source::check_module(&module) {
                    return self.fail(f);
                }
                self.ctx.digests.source = digest::module_source(&module.path, &module.version);
                let secret_ref = module.secret_ref.as_ref().map(|s| s.name.as_str());
                if crate::values_from::reads_objects(&values_from, secret_ref) {
                    return self.values_step();
                }
                self.module_render(values, None);
            }
            SourceSpec::Package { source_ref, path } => {
                self.ctx.digests.config = digest::release_config(&path);
                match source::locate(
                    &source_ref,
                    &self.ctx.key.namespace,
                    self.cfg.allow_cross_namespace_refs,
                ) {
                    Err(f) => self.fail(f),
                    Ok(locator) => {
                        self.phase = Phase::ResolvingSource;
                        self.out.push(Effect::ResolveSource { source: locator });
                    }
                }
            }
        }
    }

    /// SPEC §3 step 10 for a module: `values` are the merged values (SPEC §27).
    pub(super) fn module_render(
        &mut self,
        values: Option<serde_json::Value>,
        credentials: Option<String>,
    ) {
        let SourceSpec::Module { module, .. } = &self.ctx.spec else {
            return;
        };
        let request = crate::render_ahead::module_request(
            module,
            values,
            &self.ctx.key.name,
            &self.ctx.key.namespace,
            credentials,
        );
        self.ctx.step = Step::Render;
        self.phase = Phase::Rendering;
        self.out.push(Effect::Render { request });
    }

    pub(super) fn on_source(&mut self, result: Result<SourceArtifact, SourceError>) {
        let SourceSpec::Package { source_ref, .. } = &self.ctx.spec else {
            return;
        };
        let locator = match source::locate(
            source_ref,
            &self.ctx.key.namespace,
            self.cfg.allow_cross_namespace_refs,
        ) {
            Ok(l) => l,
            Err(f) => return self.fail(f),
        };
        let artifact = match result {
            Ok(a) => a,
            Err(e) => return self.fail(exits::source_failure(&e, &locator)),
        };
        self.ctx.source_status = Some(SourceStatus {
            ref_: source::locator_ref(&locator),
            artifact_revision: artifact.revision.clone(),
            artifact_digest: artifact.digest.clone(),
            artifact_url: artifact.url.clone(),
        });
        self.ctx.step = Step::Fetch;
        if let Err(f) = source::check_artifact_digest(&artifact.digest) {
            return self.fail(f);
        }
        self.ctx.digests.source = artifact.digest.clone();
        self.ctx.artifact_url = artifact.url.clone();
        self.phase = Phase::FetchingArtifact;
        self.out.push(Effect::FetchArtifact {
            url: artifact.url,
            digest: artifact.digest,
            revision: artifact.revision,
        });
    }

    pub(super) fn on_fetch(&mut self, result: Result<FetchedArtifact, FetchError>) {
        let fetched = match result {
            Ok(f) => f,
            Err(e) => return self.fail(exits::fetch_failure(&e)),
        };
        if fetched.digest != self.ctx.digests.source {
            let e = FetchError::DigestMismatch {
                expected: self.ctx.digests.source.clone(),
                actual: fetched.digest,
            };
            return self.fail(exits::fetch_failure(&e));
        }
        let SourceSpec::Package { path, .. } = &self.ctx.spec else {
            return;
        };
        self.ctx.step = Step::Render;
        self.phase = Phase::Rendering;
        self.out.push(Effect::Render {
            request: RenderRequest::Artifact {
                artifact_digest: self.ctx.digests.source.clone(),
                artifact_url: self.ctx.artifact_url.clone(),
                path: path.clone(),
            },
        });
    }

    pub(super) fn on_render(&mut self, result: Result<RenderOutput, RenderError>) {
        let module = match &self.ctx.spec {
            SourceSpec::Module { module, .. } => Some(module.clone()),
            SourceSpec::Package { .. } => None,
        };
        let output = match result {
            Ok(o) => o,
            Err(e) => {
                let f = exits::render_failure(&e);
                if module.is_some() && f.reason == Reason::ResolutionFailed {
                    let msg = f.message.clone();
                    self.ctx
                        .conds
                        .set(ct::MODULE_RESOLVED, FALSE, f.reason, &msg);
                }
                return self.fail(f);
            }
        };
        let identity = ReleaseIdentity {
            kind: self.ctx.key.kind,
            namespace: self.ctx.key.namespace.clone(),
            name: self.ctx.key.name.clone(),
            uuid: self.ctx.uuid.clone(),
        };
        // SPEC §30: an OPM render's inputs include the Platform it used.
        if !output.platform.is_empty() {
            self.ctx.digests.config =
                crate::opm::config_digest(&self.ctx.digests.config, &output.platform);
        }
        let objects = match desired::objects(
            output.value,
            output.bytes,
            &output.cluster_scoped,
            &identity,
            &self.cfg,
        ) {
            Ok(o) => o,
            Err(f) => return self.fail(f),
        };
        if let Some(m) = module {
            let msg = format!("module resolved: {}@{}", m.path, m.version);
            self.ctx
                .conds
                .set(ct::MODULE_RESOLVED, TRUE, Reason::Resolved, &msg);
        }
        let mut wanted = desired::Desired::new(objects);
        self.ctx.digests.render = wanted.render_digest.clone();
        if let Err(f) = wanted.extract(self.ctx.ignore_rules(), &self.cfg) {
            return self.fail(f);
        }
        let desired::Desired {
            objects,
            prune_disabled,
            ..
        } = wanted;
        self.ctx.entries = inventory::entries_for(&objects);
        ownership::mark_prune_disabled(&mut self.ctx.entries, &prune_disabled);
        self.ctx.digests.inventory = digest::inventory(&self.ctx.entries);
        self.ctx.stale = inventory::stale(self.ctx.persisted_entries(), &self.ctx.entries);
        self.ctx.desired = objects;
        self.cluster_step(super::cluster::ClusterNext::Reconcile);
    }

    /// SPEC §3 step 12, once the cluster is known.
    pub(super) fn impersonation_step(&mut self) {
        self.ctx.step = Step::Impersonation;
        match self.ctx.service_account.clone() {
            Some(_) if self.ctx.sa_checked => self.drift_step(),
            Some(sa) => {
                self.phase = Phase::CheckingServiceAccount;
                self.out.push(Effect::CheckServiceAccount {
                    namespace: self.ctx.key.namespace.clone(),
                    name: sa,
                    cluster: self.ctx.cluster.clone(),
                });
            }
            // SPEC §31: without a ServiceAccount a remote cluster is written with the
            // kubeconfig's own identity, its owner's choice; §15's confinement is for this
            // cluster's operator identity.
            None if self.ctx.cluster.is_some() => self.drift_step(),
            None => match impersonation::check_operator_identity(
                self.cfg.allow_operator_identity,
                &self.ctx.key.namespace,
                &self.ctx.desired,
            ) {
                Ok(()) => self.drift_step(),
                Err(f) => self.fail(f),
            },
        }
    }

    pub(super) fn on_service_account(&mut self, result: Result<bool, ApiError>) {
        let sa = self.ctx.service_account.as_deref().unwrap_or_default();
        match exits::service_account(&result, &self.ctx.key.namespace, sa) {
            Ok(()) => self.drift_step(),
            Err(f) => self.fail(f),
        }
    }
}
