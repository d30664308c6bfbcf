//! Builders for the objects a world is set up with: releases of both kinds.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use opm_core::api::{
    ModuleRef, ModuleRelease, ModuleReleaseSpec, Release, ReleaseCommon, ReleaseSpec, SourceRef,
};
use opm_core::object::ReleaseObject;

fn meta(namespace: &str, name: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_string()),
        namespace: Some(namespace.to_string()),
        ..Default::default()
    }
}

/// A `ModuleRelease` of `path@version` with no values and default options.
pub fn module_release(namespace: &str, name: &str, path: &str, version: &str) -> ReleaseObject {
    ReleaseObject::ModuleRelease(ModuleRelease {
        metadata: meta(namespace, name),
        spec: ModuleReleaseSpec {
            module: ModuleRef {
                path: path.to_string(),
                version: version.to_string(),
                secret_ref: None,
            },
            values: None,
            values_from: Vec::new(),
            common: ReleaseCommon::default(),
        },
        status: None,
    })
}

/// A `Release` of the package at `path` in the `OCIRepository` `source` of its namespace.
pub fn release(namespace: &str, name: &str, source: &str, path: &str) -> ReleaseObject {
    ReleaseObject::Release(Release {
        metadata: meta(namespace, name),
        spec: ReleaseSpec {
            source_ref: SourceRef {
                api_version: String::new(),
                kind: "OCIRepository".to_string(),
                name: source.to_string(),
                namespace: String::new(),
            },
            path: path.to_string(),
            common: ReleaseCommon::default(),
        },
        status: None,
    })
}

/// Mutable access to the options both kinds share.
pub fn common_mut(o: &mut ReleaseObject) -> &mut ReleaseCommon {
    match o {
        ReleaseObject::ModuleRelease(r) => &mut r.spec.common,
        ReleaseObject::Release(r) => &mut r.spec.common,
    }
}
