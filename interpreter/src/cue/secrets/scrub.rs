//! Scrubbing: every Secret value of the attempt taken out of the text the operator writes
//! where a user reads it (events, conditions, render and API errors; SPEC §23).

use serde_json::Value;

use super::{MIN_SCRUBBED, SecretTable};

impl SecretTable {
    /// `text` with every Secret value of this attempt replaced by `<redacted>` (SPEC §23):
    /// an API error about a Secret (a 422 or a webhook's denial) may echo a field value.
    /// Values shorter than [`MIN_SCRUBBED`] characters are left: replacing every `a` or
    /// `1` in a message would make it unreadable, and such a value is no secret.
    pub fn scrub(&self, text: &str) -> String {
        let mut out = text.to_owned();
        let numbers: Vec<String> = self.scalar_texts().collect();
        let mut values: Vec<&str> = self
            .values
            .values()
            .filter_map(Value::as_str)
            .chain(self.strings.values().map(String::as_str))
            .chain(numbers.iter().map(String::as_str))
            .filter(|v| v.chars().count() >= MIN_SCRUBBED)
            .collect();
        // Longest first, so a value containing another is replaced whole.
        values.sort_by_key(|v| std::cmp::Reverse(v.len()));
        for v in values {
            if out.contains(v) {
                out = out.replace(v, crate::cue::redact::REDACTED);
            }
        }
        out
    }

    /// The render request with the real strings in its values (see [`Self::restore_strings`]).
    pub fn restore_request(
        &self,
        request: &opm_core::effect::RenderRequest,
    ) -> opm_core::effect::RenderRequest {
        let mut out = request.clone();
        if let opm_core::effect::RenderRequest::Module {
            values: Some(v), ..
        } = &mut out
            && self.has_values_from()
        {
            self.put_back(v);
        }
        out
    }

    /// [`Self::scrub`] applied to a render error's message: `cue` quotes values in its
    /// errors, and a module may echo one unquoted.
    pub fn scrub_render_error(&self, mut e: opm_core::RenderError) -> opm_core::RenderError {
        use opm_core::RenderError as E;
        if self.is_empty() {
            return e;
        }
        match &mut e {
            E::Resolution { message }
            | E::Evaluation { message }
            | E::PathNotFound { message }
            | E::ReleaseFileNotFound { message }
            | E::InvalidArtifact { message }
            | E::Timeout { message }
            | E::RegistryUnreachable { message }
            | E::Io { message }
            | E::PlatformNotReady { message } => *message = self.scrub(message),
            E::CoreV0 { what } => *what = self.scrub(what),
            // Names of components, transformers and fields: a module may build one from
            // its values, so they are scrubbed like any message.
            E::Verdicts { verdicts } => {
                for v in verdicts {
                    self.scrub_verdict(v);
                }
            }
            // A re-download's error names the artifact URL and HTTP facts, never a value.
            E::UnsupportedKind { .. }
            | E::TooLarge { .. }
            | E::OutOfMemory { .. }
            | E::Refetch { .. } => {}
        }
        e
    }

    fn scrub_verdict(&self, v: &mut opm_core::opm::Verdict) {
        use opm_core::opm::Verdict as V;
        match v {
            V::Unmatched { component } => *component = self.scrub(component),
            V::Unhandled {
                component,
                kind,
                fqn,
            } => {
                *component = self.scrub(component);
                *kind = self.scrub(kind);
                *fqn = self.scrub(fqn);
            }
            V::Duplicate {
                transformer,
                catalogs,
            } => {
                *transformer = self.scrub(transformer);
                for c in catalogs {
                    *c = self.scrub(c);
                }
            }
            V::Incomplete {
                component,
                transformer,
                field,
            } => {
                *component = self.scrub(component);
                *transformer = self.scrub(transformer);
                *field = self.scrub(field);
            }
            V::NotAnObject {
                component,
                transformer,
            } => {
                *component = self.scrub(component);
                *transformer = self.scrub(transformer);
            }
            V::Malformed { message } => *message = self.scrub(message),
        }
    }

    /// [`Self::scrub`] applied to an API error's message.
    pub fn scrub_api_error(&self, e: &mut opm_core::input::ApiError) {
        use opm_core::input::ApiError as E;
        let (E::Forbidden { message }
        | E::NotFound { message }
        | E::Conflict { message }
        | E::Invalid { message }
        | E::Unavailable { message }
        | E::Unreachable { message }
        | E::TooManyRequests { message, .. }
        | E::Timeout { message }
        | E::Other { message, .. }) = e;
        if !self.is_empty() {
            *message = self.scrub(message);
        }
    }
}
