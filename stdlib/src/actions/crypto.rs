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
            .in_round()
            .req("data", Ty::Any, "what to hash")
            .opt("algorithm", algorithm(), "sha256 (default), sha512, sha384, sha1 or md5")
            .output(Ty::object([("hash", Ty::String), ("algorithm", Ty::String)])),
        action("crypto.hmac", "Computes an HMAC of data with a key, as lowercase hex.")
            .in_round()
            .req("data", Ty::Any, "what to authenticate")
            .req("key", Ty::String, "the secret key")
            .opt("algorithm", algorithm(), "sha256 (default), sha512, sha384, sha1 or md5")
            .output(Ty::object([("hmac", Ty::String), ("algorithm", Ty::String)])),
        action("crypto.uuid", "Generates a random (v4) UUID.")
            .in_round().output(Ty::object([("uuid", Ty::String)])),
    ]
}

/// Runs `crypto.<name>`.
#[cfg(feature = "runtime")]
pub fn run(
    name: &str,
    call: &crate::call::Call,
) -> Result<serde_json::Value, opcode_vm::error::ActionError> {
    use hmac::{Hmac, KeyInit, Mac};
    use serde_json::{Value, json};
    use sha2::Digest;

    fn data_bytes(call: &crate::call::Call) -> Vec<u8> {
        match call.params.get("data") {
            Some(Value::String(s)) => s.as_bytes().to_vec(),
            Some(Value::Null) | None => Vec::new(),
            Some(other) => other.to_string().into_bytes(),
        }
    }
    let algorithm = call
        .str("algorithm")
        .unwrap_or("sha256")
        .to_ascii_lowercase();
    let unsupported = || {
        opcode_vm::error::ActionError::validation(format!(
            "unsupported algorithm `{algorithm}` (use sha256, sha512, sha384, sha1 or md5)"
        ))
    };
    match name {
        "hash" => {
            let data = data_bytes(call);
            let digest = match algorithm.as_str() {
                "sha256" => hex(&sha2::Sha256::digest(&data)),
                "sha512" => hex(&sha2::Sha512::digest(&data)),
                "sha384" => hex(&sha2::Sha384::digest(&data)),
                "sha1" => hex(&sha1::Sha1::digest(&data)),
                "md5" => hex(&md5::Md5::digest(&data)),
                _ => return Err(unsupported()),
            };
            Ok(json!({"hash": digest, "algorithm": algorithm}))
        }
        "hmac" => {
            let data = data_bytes(call);
            let key = call.str("key").unwrap_or_default().as_bytes();
            macro_rules! mac {
                ($d:ty) => {{
                    let mut mac = <Hmac<$d> as KeyInit>::new_from_slice(key)
                        .map_err(|e| opcode_vm::error::ActionError::validation(e.to_string()))?;
                    mac.update(&data);
                    hex(&mac.finalize().into_bytes())
                }};
            }
            let digest = match algorithm.as_str() {
                "sha256" => mac!(sha2::Sha256),
                "sha512" => mac!(sha2::Sha512),
                "sha384" => mac!(sha2::Sha384),
                "sha1" => mac!(sha1::Sha1),
                "md5" => mac!(md5::Md5),
                _ => return Err(unsupported()),
            };
            Ok(json!({"hmac": digest, "algorithm": algorithm}))
        }
        "uuid" => Ok(json!({"uuid": uuid::Uuid::new_v4().to_string()})),
        _ => Err(super::unknown(call)),
    }
}

/// Bytes as lower-case hexadecimal.
#[cfg(feature = "runtime")]
pub fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}
