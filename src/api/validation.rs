//! What the CRDs refuse, in one place: the patterns, CEL rules and bounds the spec types'
//! schema attributes name (SPEC §24), so a bound is read and changed here, not per field.

/// Schema for an arbitrary JSON value (`spec.values`).
pub(crate) fn any_json(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({ "x-kubernetes-preserve-unknown-fields": true })
}

/// What the API server accepts for `interval` and `timeout` (Go's duration syntax).
pub const GO_DURATION: &str = r"^(0|([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+)$";

/// Longest `interval`/`timeout` string the CRD takes; `23h59m59.999999999s` is 19.
pub const DURATION_MAX_LENGTH: u32 = 64;

/// The CEL rule behind SPEC §24's "at most 24h, refused by the CRD". A value too large for a
/// Go duration (`5124095576030431h`) makes `duration()` fail, which the API server also
/// reports as a refusal that quotes the rule's message.
pub const DURATION_AT_MOST_24H: &str = "duration(self) <= duration('24h')";

/// `sourceRef.apiVersion`: empty (the default) or the one Flux source API read (SPEC §16).
pub const SOURCE_API_VERSION_RULE: &str = "self == '' || self == 'source.toolkit.fluxcd.io/v1'";

/// A DNS-1123 subdomain (RFC 1123, at most 253 characters): the name of a namespaced object.
pub const DNS1123_SUBDOMAIN: &str =
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$";

/// A DNS-1123 label (at most 63 characters): the name of a namespace.
pub const DNS1123_LABEL: &str = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$";

/// An API version as `kubectl` writes it: `v1`, `apps/v1`, `example.com/v1alpha1` (a
/// DNS-1123 subdomain group, a slash, a lowercase alphanumeric version).
pub const API_VERSION: &str =
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[a-z0-9]+$";

/// A kind: letters and digits, starting with a letter (`Deployment`, `Certificate`).
pub const KIND: &str = r"^[A-Za-z][A-Za-z0-9]*$";

/// The bounds SPEC §24 puts on what a tenant writes in a spec, each refused by the CRD.
/// A test over the generated CRDs (`tests/deploy_crds.rs`) fails when a tenant-writable
/// list or string has none, so a field added later cannot forget its own.
pub mod bounds {
    /// A DNS-1123 subdomain: the name of a namespaced object.
    pub const NAME: u32 = 253;
    /// A DNS-1123 label: a namespace.
    pub const NAMESPACE: u32 = 63;
    /// `group/version`: a subdomain, a slash, a label.
    pub const API_VERSION: u32 = 253 + 1 + 63;
    /// A kind is a DNS-1123 label once lowercased.
    pub const KIND: u32 = 63;
    /// `spec.healthChecks` entries (SPEC §1.1).
    pub const HEALTH_CHECKS: u32 = 32;
    /// `spec.healthCheckExprs` entries (SPEC §1.1).
    pub const HEALTH_CHECK_EXPRS: u32 = 16;
    /// One CEL expression, in bytes (SPEC §1.1: 1 KiB).
    pub const EXPRESSION: u32 = 1024;
    /// `spec.valuesFrom` entries (SPEC §1.1).
    pub const VALUES_FROM: u32 = 16;
    /// `spec.dependsOn` entries: each is one read of a release per attempt.
    pub const DEPENDS_ON: u32 = 32;
    /// `spec.driftDetection.ignore` rules, and paths in one rule.
    pub const IGNORE_RULES: u32 = 32;
    /// A JSON pointer of an ignore rule, a label selector.
    pub const POINTER: u32 = 1024;
    /// `spec.module.path`: a CUE module import path.
    pub const MODULE_PATH: u32 = 512;
    /// `spec.module.version`: a semantic version.
    pub const MODULE_VERSION: u32 = 128;
    /// `spec.path` of a Release: a directory in the artifact.
    pub const ARTIFACT_PATH: u32 = 1024;
}
