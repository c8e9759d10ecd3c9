//! The process's secret variables (`OPCODE_TOKEN`, `OPCODE_VAULT_KEY`,
//! `OPCODE_SECRET_*`): a daemon reads them, then starts itself again
//! without them, so that no process can read them from its
//! `/proc/PID/environ`; the new image gets them handed over here.

use std::collections::BTreeMap;
use std::sync::OnceLock;

static HANDED_OVER: OnceLock<BTreeMap<String, String>> = OnceLock::new();

/// Marks a second image whose standard input holds the secrets.
pub const ON_STDIN: &str = "OPCODE_SECRETS_ON_STDIN";

/// Is `name` a variable that holds a secret?
pub fn is_secret(name: &str) -> bool {
    matches!(name, "OPCODE_TOKEN" | "OPCODE_VAULT_KEY") || name.starts_with("OPCODE_SECRET_")
}

/// Keeps `values` as the secret variables of this process (once).
pub fn hand_over(values: BTreeMap<String, String>) {
    let _ = HANDED_OVER.set(values);
}

/// The variable `name`: as handed over, else from the environment.
pub fn var(name: &str) -> Option<String> {
    if let Some(value) = HANDED_OVER.get().and_then(|values| values.get(name)) {
        return Some(value.clone());
    }
    std::env::var(name).ok()
}

/// The variables a child process must not inherit: the secret ones, and
/// the hand-over's mark.
pub fn not_inherited() -> Vec<String> {
    let mut names: Vec<String> = std::env::vars_os()
        .filter_map(|(k, _)| k.into_string().ok())
        .filter(|k| is_secret(k) || k == ON_STDIN)
        .collect();
    names.extend(
        HANDED_OVER
            .get()
            .into_iter()
            .flat_map(|v| v.keys().cloned()),
    );
    names.sort();
    names.dedup();
    names
}
