//! Artifacts (SPEC §17): the download, hardened extraction, the digest-keyed cache and
//! `spec.path` navigation.

pub mod artifact_cache;
pub mod extract;
pub mod fetch;
pub mod release_path;
