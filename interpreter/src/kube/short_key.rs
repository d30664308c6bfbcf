//! A 128-bit digest of a sequence of strings, as a small map key: the caches that keep an
//! entry per object or per recent event key them by this instead of copies of the strings
//! (which were most of an entry's size). Two sequences share a key only if they are equal,
//! short of a SHA-256 collision.

use sha2::{Digest, Sha256};

/// A [`short_key`].
pub(crate) type ShortKey = [u8; 16];

/// The digest of `parts`, each length-prefixed so that no two sequences run into each other.
pub(crate) fn short_key<'a>(parts: impl IntoIterator<Item = &'a str>) -> ShortKey {
    let mut h = Sha256::new();
    for part in parts {
        h.update((part.len() as u64).to_le_bytes());
        h.update(part.as_bytes());
    }
    let mut key = [0; 16];
    key.copy_from_slice(&h.finalize()[..16]);
    key
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_do_not_run_into_each_other() {
        assert_eq!(short_key(["ab", "c"]), short_key(["ab", "c"]));
        assert_ne!(short_key(["ab", "c"]), short_key(["a", "bc"]));
        assert_ne!(short_key(["ab", ""]), short_key(["ab"]));
    }
}
