//! SPEC §27 before the render of a ModuleRelease: the ServiceAccount must exist (a
//! ServiceAccount that does not exist still gets its groups' rights when impersonated, so
//! reading first would let a typo read what the group may), then `valuesFrom` and
//! `module.secretRef` are read under the effective identity and merged.

use crate::input::ApiError;
use crate::outcome::Failure;
use crate::reason::Reason;
use crate::values_from::{self, CredentialsContent, ValuesContent};
use crate::{config::AllowOperatorIdentity, digest, effect::Effect, impersonation};

use super::ctx::{SourceSpec, Step};
use super::{Attempt, Phase};

impl Attempt {
    pub(super) fn values_step(&mut self) {
        self.ctx.step = Step::Values;
        match self.ctx.service_account.clone() {
            Some(sa) => {
                self.phase = Phase::CheckingServiceAccountForValues;
                // `valuesFrom` is read in this cluster, whatever the kubeconfig (SPEC §31).
                self.out.push(Effect::CheckServiceAccount {
                    namespace: self.ctx.key.namespace.clone(),
                    name: sa,
                    cluster: None,
                });
            }
            None if self.cfg.allow_operator_identity == AllowOperatorIdentity::Off => {
                self.fail(Failure::stalled(
                    Reason::ImpersonationFailed,
                    impersonation::NO_SERVICE_ACCOUNT,
                ))
            }
            None => self.read_values(),
        }
    }

    pub(super) fn on_values_service_account(&mut self, result: Result<bool, ApiError>) {
        let sa = self.ctx.service_account.as_deref().unwrap_or_default();
        match crate::exits::service_account(&result, &self.ctx.key.namespace, sa) {
            Ok(()) => {
                self.ctx.sa_checked = true;
                self.read_values()
            }
            Err(f) => self.fail(f),
        }
    }

    fn read_values(&mut self) {
        let SourceSpec::Module {
            module,
            values_from,
            ..
        } = &self.ctx.spec
        else {
            return;
        };
        let credentials = module
            .secret_ref
            .as_ref()
            .map(|s| s.name.clone())
            .filter(|n| !n.is_empty());
        let effect = Effect::ReadValues {
            namespace: self.ctx.key.namespace.clone(),
            refs: values_from.clone(),
            credentials,
            identity: self.ctx.identity.clone(),
        };
        self.phase = Phase::ReadingValues;
        self.out.push(effect);
    }

    pub(super) fn on_values(
        &mut self,
        read: Vec<Result<ValuesContent, ApiError>>,
        credentials: Option<Result<CredentialsContent, ApiError>>,
    ) {
        let SourceSpec::Module {
            module,
            values,
            values_from,
        } = &self.ctx.spec
        else {
            return;
        };
        let ns = self.ctx.key.namespace.clone();
        let identity = self.ctx.identity.clone();
        if let Err(f) = values_from::check_size(values_from, &read, self.cfg.max_values_bytes) {
            return self.fail(f);
        }
        let merged =
            match values_from::compose(&ns, values_from, &read, values.as_ref(), identity.as_ref())
            {
                Ok(m) => m,
                Err(f) => return self.fail(f),
            };
        let secret = module
            .secret_ref
            .as_ref()
            .map(|s| s.name.clone())
            .filter(|n| !n.is_empty());
        let creds = match (secret, credentials) {
            (None, _) => None,
            (Some(name), Some(read)) => {
                match values_from::credentials(&ns, &name, &read, identity.as_ref()) {
                    Ok(d) => Some(d),
                    Err(f) => return self.fail(f),
                }
            }
            (Some(name), None) => {
                return self.fail(Failure::transient(
                    Reason::ResolutionFailed,
                    format!("Secret {ns}/{name} (module.secretRef) was not read"),
                ));
            }
        };
        // SPEC §27: the config digest covers the merged values, secret strings as digests.
        self.ctx.digests.config = digest::module_config(merged.as_ref());
        self.module_render(merged, creds);
    }
}
