//! Where secrets go in an action's params: the VM keeps their names, never
//! their values, and the runtime writes the values into the call only.

use serde::{Deserialize, Serialize};

use crate::program::PathSeg;

/// Where, inside an action's params, a secret goes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SecretSite {
    /// The path of the string in the params.
    pub path: Vec<PathSeg>,
    /// The string's pieces: text, and secrets by name.
    pub parts: Vec<SecretPart>,
}

/// A piece of a string that holds secrets.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SecretPart {
    /// Text, already interpolated.
    Text(String),
    /// A vault secret by name.
    Secret(String),
    /// A vault secret by name, written JSON-escaped (it sits inside JSON
    /// text: an object holding a passed secret rendered into a string).
    Escaped(String),
}

impl SecretPart {
    /// The secret this part names, if any.
    pub fn secret(&self) -> Option<&str> {
        match self {
            SecretPart::Text(_) => None,
            SecretPart::Secret(name) | SecretPart::Escaped(name) => Some(name),
        }
    }
}
