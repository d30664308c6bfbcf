//! The one digest form the artifact contract allows.

use sha2::{Digest as _, Sha256};

use super::FetchError;

/// A parsed `sha256:<64 lowercase hex>` digest.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Sha256Digest(pub(super) [u8; 32]);

impl Sha256Digest {
    /// Parses the only digest form the artifact contract allows. An algorithm other than
    /// `sha256` (or a malformed value) can never verify, so it is an invalid artifact.
    pub fn parse(s: &str) -> Result<Self, FetchError> {
        let Some((algo, hex_part)) = s.split_once(':') else {
            return Err(FetchError::MalformedDigest {
                digest: s.to_owned(),
            });
        };
        if algo != "sha256" {
            return Err(FetchError::UnsupportedDigest {
                algorithm: algo.to_owned(),
            });
        }
        let lower_hex = hex_part.len() == 64
            && hex_part
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        if !lower_hex {
            return Err(FetchError::MalformedDigest {
                digest: s.to_owned(),
            });
        }
        let mut out = [0u8; 32];
        hex::decode_to_slice(hex_part, &mut out).map_err(|_| FetchError::MalformedDigest {
            digest: s.to_owned(),
        })?;
        Ok(Self(out))
    }

    /// The digest of `bytes`, for callers that build artifacts (tests, tools).
    pub fn of(bytes: &[u8]) -> Self {
        Self(Sha256::digest(bytes).into())
    }

    /// The 64 lowercase hex characters, usable as a file name.
    pub fn hex(&self) -> String {
        hex::encode(self.0)
    }
}

impl std::fmt::Display for Sha256Digest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "sha256:{}", self.hex())
    }
}
