//! `crypto.hash`, `crypto.hmac`, `crypto.uuid`.

use opcode_vm::catalog::{ActionSpec, Ty};

use super::spec::action;

fn algorithm() -> Ty {
    Ty::one_of_strings(&["sha256", "sha512", "sha384", "sha1", "md5"])
}

/// Signatures.
pub fn specs() -> Vec<ActionSpec> {
    vec![
        action("crypto.hash", "Hashes data (strings as UTF-8, other values as compact JSON) and returns lowercase hex.")
            .req("data", Ty::Any, "what to hash")
            .opt("algorithm", algorithm(), "sha256 (default), sha512, sha384, sha1 or md5")
            .output(Ty::object([("hash", Ty::String), ("algorithm", Ty::String)])),
        action("crypto.hmac", "Computes an HMAC of data with a key, as lowercase hex.")
            .req("data", Ty::Any, "what to authenticate")
            .req("key", Ty::String, "the secret key")
            .opt("algorithm", algorithm(), "sha256 (default), sha512, sha384, sha1 or md5")
            .output(Ty::object([("hmac", Ty::String), ("algorithm", Ty::String)])),
        action("crypto.uuid", "Generates a random (v4) UUID.").output(Ty::object([("uuid", Ty::String)])),
    ]
}
