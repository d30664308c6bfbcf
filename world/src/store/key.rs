//! How the store keys its objects: by (group, kind, namespace, name), searchable with a
//! borrowed [`ResourceId`].

use opm_core::object::ResourceId;

/// Storage key: (group, kind, namespace, name). The version is not part of identity.
pub(crate) type ObjKey = (String, String, String, String);

pub(crate) fn key_of(id: &ResourceId) -> ObjKey {
    (
        id.group.clone(),
        id.kind.clone(),
        id.namespace.clone(),
        id.name.clone(),
    )
}

/// An object's identity as borrowed parts, so maps keyed by [`ObjKey`] can be searched
/// with a [`ResourceId`] without copying its four strings on every lookup.
pub(crate) trait KeyParts {
    fn parts(&self) -> (&str, &str, &str, &str);
}

impl KeyParts for ObjKey {
    fn parts(&self) -> (&str, &str, &str, &str) {
        (&self.0, &self.1, &self.2, &self.3)
    }
}

impl KeyParts for ResourceId {
    fn parts(&self) -> (&str, &str, &str, &str) {
        (&self.group, &self.kind, &self.namespace, &self.name)
    }
}

// Tuples order field by field, exactly as these compare the parts: `Borrow`'s contract.
impl<'a> std::borrow::Borrow<dyn KeyParts + 'a> for ObjKey {
    fn borrow(&self) -> &(dyn KeyParts + 'a) {
        self
    }
}

impl PartialEq for dyn KeyParts + '_ {
    fn eq(&self, other: &Self) -> bool {
        self.parts() == other.parts()
    }
}

impl Eq for dyn KeyParts + '_ {}

impl PartialOrd for dyn KeyParts + '_ {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl std::hash::Hash for dyn KeyParts + '_ {
    // A tuple of `&str` hashes exactly as the same tuple of `String`s.
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.parts().hash(state);
    }
}

impl Ord for dyn KeyParts + '_ {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.parts().cmp(&other.parts())
    }
}
