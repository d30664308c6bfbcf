//! Kubernetes plumbing every executor shares: clients (and the impersonated ones),
//! API errors as the core's typed [`opm_core::ApiError`], discovery, dynamic objects,
//! the watches, and what the watches have already delivered.

pub mod api_error;
pub(crate) mod compare;
pub mod discovery;
pub mod dynamic;
pub mod impersonate;
pub mod kubeconfig;
pub(crate) mod live_cache;
pub(crate) mod object_watch;
pub(crate) mod observed;
pub mod releases;
pub(crate) mod short_key;
