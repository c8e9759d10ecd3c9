//! `opcode install`: writes the settings file from the flags (keeping what
//! it already holds), readable by its owner only: it may hold the token.

use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::Path;

use opcode_daemon::serve::guard::valid_token;

use super::common::{Exit, fail, home};
use super::serve;

/// Flags of `install`: those of `serve`, and opcode's `--vault-key`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct InstallArgs {
    #[command(flatten)]
    serve: serve::Args,
    /// The vault passphrase itself (opcode's flag). It is written to
    /// ~/.opcode/vault.key (mode 0600) and the settings name that file;
    /// a key on a command line is visible to other users, so prefer
    /// --vault-key-file.
    #[arg(long, value_name = "PASSPHRASE")]
    vault_key: Option<String>,
}

/// Writes the settings (and the vault key file when a key is given).
pub fn install(args: &InstallArgs) -> Exit {
    let path = args.serve.config_path();
    let current = match opcode_daemon::settings::Settings::load(&path) {
        Ok(current) => current,
        Err(e) => return fail(e),
    };
    let mut settings = current.overlay(args.serve.flags());
    settings
        .listen
        .get_or_insert_with(|| opcode_daemon::settings::DEFAULT_LISTEN.to_owned());
    settings
        .db
        .get_or_insert_with(|| home().join(".opcode").join("opcode.db"));
    if let Err(e) = settings.listen_addr() {
        return fail(e);
    }
    if let Some(token) = &settings.token
        && let Err(e) = valid_token(token)
    {
        return fail(e);
    }
    if let Some(key) = &args.vault_key {
        if key.trim().is_empty() {
            return fail("--vault-key is empty: give the passphrase, or --vault-key-file");
        }
        eprintln!(
            "warning: a vault key on the command line is visible to other users of this machine \
             (ps, /proc, shell history); prefer --vault-key-file"
        );
        let file = path.parent().unwrap_or(Path::new(".")).join("vault.key");
        if let Err(e) = write_private(&file, &format!("{key}\n")) {
            return fail(e);
        }
        println!("wrote {} (mode 0600)", file.display());
        settings.vault_key_file = Some(file);
    }
    let text = serde_json::to_string_pretty(&settings).unwrap_or_default();
    match write_private(&path, &format!("{text}\n")) {
        Ok(()) => {
            println!("wrote {}", path.display());
            println!("start the daemon with: opcode serve");
            Exit::Ok
        }
        Err(e) => fail(e),
    }
}

/// Writes `text` to `path` (its folder made if missing), readable and
/// writable by the owner only, whatever the file's mode was before.
fn write_private(path: &Path, text: &str) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt as _;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    let cannot = |e: std::io::Error| format!("cannot write {}: {e}", path.display());
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .map_err(cannot)?;
    file.set_permissions(std::fs::Permissions::from_mode(0o600))
        .map_err(cannot)?;
    file.write_all(text.as_bytes()).map_err(cannot)
}
