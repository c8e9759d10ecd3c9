//! The secret vault: values sealed with AES-256-GCM under a key derived from
//! a passphrase (PBKDF2-HMAC-SHA256, a random per-install salt), each bound
//! to its name as associated data, kept in the store's `secrets` table.

use std::sync::Arc;

use aes_gcm::aead::{Aead, Generate, KeyInit, Payload};
use aes_gcm::{Aes256Gcm, Key, Nonce};
use opcode_stdlib::exec::{BoxFuture, EnvSecrets, Secrets};
use sha2::Sha256;

use crate::store::{EventStore, SecretRow, StoreError, VaultHeader};
use crate::time::{now_ms, rfc3339};

/// PBKDF2 iterations for a new vault (OWASP's 2023 figure for SHA-256).
pub const ITERATIONS: u32 = 600_000;
/// The text sealed in the header; opening it proves the passphrase.
const CHECK: &[u8] = b"opcode vault v1";
/// The associated data of the check value (no secret can have this name).
const CHECK_AAD: &[u8] = b"\0opcode-vault-check";
/// Nonce length of AES-GCM.
const NONCE_LEN: usize = 12;

/// Why the vault cannot do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum VaultError {
    /// The passphrase does not open this vault.
    #[error("the vault passphrase is wrong (it does not open the vault of this database)")]
    WrongPassphrase,
    /// No passphrase was given.
    #[error("no vault passphrase: set OPCODE_VAULT_KEY or pass --vault-key-file to use secrets")]
    NoPassphrase,
    /// A secret name that cannot be used in `${{secrets.NAME}}`.
    #[error(
        "`{0}` is not a secret name: use letters, digits, `_`, `-` and `.`, starting with a letter or `_`"
    )]
    BadName(String),
    /// A sealed value does not open (tampered with, or moved to another name).
    #[error("the secret `{0}` cannot be opened: it was altered or belongs to another name")]
    Corrupt(String),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A secret's name and dates, never its value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretInfo {
    /// The name.
    pub name: String,
    /// When first set.
    pub created_at: String,
    /// When last set.
    pub updated_at: String,
}

/// An open vault.
pub struct Vault {
    store: Arc<dyn EventStore>,
    cipher: Aes256Gcm,
}

impl std::fmt::Debug for Vault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Vault")
    }
}

impl Vault {
    /// Opens the vault of `store` with `passphrase`, creating it (with a
    /// fresh salt) the first time.
    pub async fn open(store: Arc<dyn EventStore>, passphrase: &str) -> Result<Vault, VaultError> {
        Vault::open_with(store, passphrase, ITERATIONS).await
    }

    /// [`Vault::open`], with the iteration count for a new vault (tests use
    /// fewer; an existing vault keeps its own).
    pub async fn open_with(
        store: Arc<dyn EventStore>,
        passphrase: &str,
        iterations: u32,
    ) -> Result<Vault, VaultError> {
        if passphrase.is_empty() {
            return Err(VaultError::NoPassphrase);
        }
        if let Some(header) = store.vault_header().await? {
            return Vault::unlock(store, passphrase, &header);
        }
        let salt = <[u8; 16]>::generate().to_vec();
        let cipher = cipher(passphrase, &salt, iterations);
        let draft = VaultHeader {
            check: seal(&cipher, CHECK, CHECK_AAD),
            salt,
            iterations,
            created_at: rfc3339(now_ms()),
        };
        let stored = store.create_vault(draft.clone()).await?;
        if stored == draft {
            Ok(Vault { store, cipher })
        } else {
            // Another process created the vault first.
            Vault::unlock(store, passphrase, &stored)
        }
    }

    /// Opens the vault of `store` if one was created, without creating
    /// one: `Ok(None)` when there is none yet.
    pub async fn existing(
        store: Arc<dyn EventStore>,
        passphrase: &str,
    ) -> Result<Option<Vault>, VaultError> {
        match store.vault_header().await? {
            Some(header) => Vault::unlock(store, passphrase, &header).map(Some),
            None => Ok(None),
        }
    }

    fn unlock(
        store: Arc<dyn EventStore>,
        passphrase: &str,
        header: &VaultHeader,
    ) -> Result<Vault, VaultError> {
        let cipher = cipher(passphrase, &header.salt, header.iterations);
        match open(&cipher, &header.check, CHECK_AAD) {
            Some(text) if text == CHECK => Ok(Vault { store, cipher }),
            _ => Err(VaultError::WrongPassphrase),
        }
    }

    /// Seals and stores `value` as `name`.
    pub async fn set(&self, name: &str, value: &str) -> Result<(), VaultError> {
        check_name(name)?;
        let now = rfc3339(now_ms());
        let secret = SecretRow {
            name: name.to_owned(),
            sealed: seal(&self.cipher, value.as_bytes(), name.as_bytes()),
            created_at: now.clone(),
            updated_at: now,
        };
        Ok(self.store.put_secret(secret).await?)
    }

    /// The names of the secrets, with their dates.
    pub async fn list(&self) -> Result<Vec<SecretInfo>, VaultError> {
        Ok(list(self.store.as_ref()).await?)
    }

    /// Deletes `name`; false if there was none.
    pub async fn remove(&self, name: &str) -> Result<bool, VaultError> {
        Ok(self.store.delete_secret(name).await?)
    }

    /// The value of `name`, if set.
    pub async fn reveal(&self, name: &str) -> Result<Option<String>, VaultError> {
        let rows = self.store.secrets().await?;
        let Some(row) = rows.into_iter().find(|r| r.name == name) else {
            return Ok(None);
        };
        open(&self.cipher, &row.sealed, name.as_bytes())
            .and_then(|bytes| String::from_utf8(bytes).ok())
            .map(Some)
            .ok_or_else(|| VaultError::Corrupt(name.to_owned()))
    }
}

/// The passphrase from `key_file` (its first line), else from the
/// `OPCODE_VAULT_KEY` variable; `None` when neither is set.
pub fn passphrase(key_file: Option<&std::path::Path>) -> Result<Option<String>, String> {
    if let Some(path) = key_file {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read the vault key file {}: {e}", path.display()))?;
        let line = text.lines().next().unwrap_or_default().to_owned();
        if line.is_empty() {
            return Err(format!("the vault key file {} is empty", path.display()));
        }
        return Ok(Some(line));
    }
    Ok(opcode_stdlib::environment::var("OPCODE_VAULT_KEY").filter(|k| !k.is_empty()))
}

/// Opens the vault of `store` if a passphrase is configured (see
/// [`passphrase`]); an error names code R0124.
pub async fn open_configured(
    store: Arc<dyn EventStore>,
    key_file: Option<&std::path::Path>,
) -> Result<Option<Vault>, String> {
    let Some(passphrase) = passphrase(key_file).map_err(|e| format!("R0124: {e}"))? else {
        return Ok(None);
    };
    Vault::open(store, &passphrase)
        .await
        .map(Some)
        .map_err(|e| format!("R0124: {e}"))
}

/// The names of the secrets in `store` (no passphrase needed to list).
pub async fn list(store: &dyn EventStore) -> Result<Vec<SecretInfo>, StoreError> {
    Ok(store
        .secrets()
        .await?
        .into_iter()
        .map(|r| SecretInfo {
            name: r.name,
            created_at: r.created_at,
            updated_at: r.updated_at,
        })
        .collect())
}

/// Where the runtime's `${{secrets.NAME}}` come from: the vault when one is
/// open, then `OPCODE_SECRET_<NAME>` environment variables.
pub struct RuntimeSecrets {
    vault: Option<Arc<Vault>>,
}

impl RuntimeSecrets {
    /// Secrets from `vault` (if any) and the environment.
    pub fn new(vault: Option<Arc<Vault>>) -> RuntimeSecrets {
        RuntimeSecrets { vault }
    }
}

impl Secrets for RuntimeSecrets {
    fn secret<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Option<String>> {
        Box::pin(async move {
            if let Some(vault) = &self.vault {
                match vault.reveal(name).await {
                    Ok(Some(value)) => return Some(value),
                    Ok(None) => {}
                    Err(e) => tracing::error!(target: "vault", secret = name, "{e}"),
                }
            }
            EnvSecrets::lookup(name)
        })
    }
}

fn check_name(name: &str) -> Result<(), VaultError> {
    let mut chars = name.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    if first_ok && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')) {
        Ok(())
    } else {
        Err(VaultError::BadName(name.to_owned()))
    }
}

fn cipher(passphrase: &str, salt: &[u8], iterations: u32) -> Aes256Gcm {
    let mut key = [0u8; 32];
    pbkdf2::pbkdf2_hmac::<Sha256>(passphrase.as_bytes(), salt, iterations, &mut key);
    Aes256Gcm::new(&Key::<Aes256Gcm>::from(key))
}

/// `nonce || ciphertext || tag`.
fn seal(cipher: &Aes256Gcm, plain: &[u8], aad: &[u8]) -> Vec<u8> {
    let nonce = Nonce::generate();
    let sealed = cipher
        .encrypt(&nonce, Payload { msg: plain, aad })
        .unwrap_or_default();
    let mut out = nonce.to_vec();
    out.extend_from_slice(&sealed);
    out
}

fn open(cipher: &Aes256Gcm, sealed: &[u8], aad: &[u8]) -> Option<Vec<u8>> {
    if sealed.len() < NONCE_LEN {
        return None;
    }
    let (nonce, body) = sealed.split_at(NONCE_LEN);
    let nonce = Nonce::try_from(nonce).ok()?;
    cipher.decrypt(&nonce, Payload { msg: body, aad }).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::memory::MemoryStore;

    async fn vault(store: &Arc<dyn EventStore>, passphrase: &str) -> Result<Vault, VaultError> {
        Vault::open_with(store.clone(), passphrase, 1_000).await
    }

    #[tokio::test]
    async fn seals_lists_reveals_and_removes() {
        let store: Arc<dyn EventStore> = Arc::new(MemoryStore::new());
        let v = vault(&store, "pass").await.unwrap();
        v.set("API_TOKEN", "s3cret-value").await.unwrap();
        assert_eq!(
            v.reveal("API_TOKEN").await.unwrap().as_deref(),
            Some("s3cret-value")
        );
        let rows = store.secrets().await.unwrap();
        assert!(!rows[0].sealed.windows(6).any(|w| w == b"s3cret"));
        assert_eq!(v.list().await.unwrap()[0].name, "API_TOKEN");
        assert!(v.remove("API_TOKEN").await.unwrap());
        assert_eq!(v.reveal("API_TOKEN").await.unwrap(), None);
    }

    #[tokio::test]
    async fn a_wrong_passphrase_is_refused_at_open() {
        let store: Arc<dyn EventStore> = Arc::new(MemoryStore::new());
        vault(&store, "right").await.unwrap();
        assert!(matches!(
            vault(&store, "wrong").await,
            Err(VaultError::WrongPassphrase)
        ));
        assert!(matches!(
            vault(&store, "").await,
            Err(VaultError::NoPassphrase)
        ));
    }

    #[tokio::test]
    async fn a_value_moved_to_another_name_does_not_open() {
        let store: Arc<dyn EventStore> = Arc::new(MemoryStore::new());
        let v = vault(&store, "pass").await.unwrap();
        v.set("A", "alpha").await.unwrap();
        let mut row = store.secrets().await.unwrap().remove(0);
        row.name = "B".into();
        store.put_secret(row).await.unwrap();
        assert!(matches!(v.reveal("B").await, Err(VaultError::Corrupt(_))));
    }

    #[test]
    fn names_are_checked() {
        assert!(check_name("db.password-2").is_ok());
        assert!(check_name("_x").is_ok());
        for bad in ["", "2x", "a b", "a/b"] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
    }
}
