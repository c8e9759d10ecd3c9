//! Secrets compared without telling their contents by the time it takes:
//! the guard's tokens, the panel's CSRF token, webhooks' secrets.

use sha2::{Digest, Sha256};

/// Compares two secrets in a time that depends on neither their contents
/// nor their lengths: their SHA-256 digests are compared whole.
pub fn same(a: &[u8], b: &[u8]) -> bool {
    let (a, b) = (Sha256::digest(a), Sha256::digest(b));
    a.iter()
        .zip(b.iter())
        .fold(0u8, |acc, (x, y)| acc | (x ^ y))
        == 0
}
