//! Reading the two release kinds and addressing them generically by [`ReleaseKey`].

use kube::api::{Api, DynamicObject};
use kube::discovery::ApiResource;
use kube::{Client, Resource};
use opm_core::api::{ModuleRelease, Release};
use opm_core::{Kind, ReleaseKey, ReleaseObject};

/// The API resource of a release kind.
pub fn api_resource(kind: Kind) -> ApiResource {
    match kind {
        Kind::ModuleRelease => ApiResource::erase::<ModuleRelease>(&()),
        Kind::Release => ApiResource::erase::<Release>(&()),
    }
}

/// A dynamic API for the release's kind in its namespace (finalizer and status patches).
pub fn dynamic_api(client: Client, key: &ReleaseKey) -> Api<DynamicObject> {
    Api::namespaced_with(client, &key.namespace, &api_resource(key.kind))
}

/// Reads a release; `None` when it does not exist.
pub async fn read(client: Client, key: &ReleaseKey) -> Result<Option<ReleaseObject>, kube::Error> {
    Ok(match key.kind {
        Kind::ModuleRelease => Api::<ModuleRelease>::namespaced(client, &key.namespace)
            .get_opt(&key.name)
            .await?
            .map(ReleaseObject::ModuleRelease),
        Kind::Release => Api::<Release>::namespaced(client, &key.namespace)
            .get_opt(&key.name)
            .await?
            .map(ReleaseObject::Release),
    })
}

/// An object reference to the release, for events.
pub fn object_ref(obj: &ReleaseObject) -> k8s_openapi::api::core::v1::ObjectReference {
    match obj {
        ReleaseObject::ModuleRelease(o) => o.object_ref(&()),
        ReleaseObject::Release(o) => o.object_ref(&()),
    }
}
