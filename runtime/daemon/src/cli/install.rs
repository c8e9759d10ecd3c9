//! `opcode install`: writes the settings file from the flags (keeping what
//! it already holds), readable by its owner only: it may hold the token.
//! With `--client`, registers the daemon in an MCP client's configuration
//! instead; `opcode uninstall --client` takes it out again.

mod client;
mod edit;

use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};

use opcode_daemon::serve::guard::valid_token;
use opcode_daemon::settings::Settings;

use self::client::{Client, ENTRY, Endpoint};
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
    #[command(flatten)]
    client: ClientArgs,
}

/// Which client's configuration to change, and how.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ClientArgs {
    /// Register the daemon in this MCP client's configuration (only that:
    /// the settings file is left alone).
    #[arg(long, value_enum)]
    client: Option<Client>,
    /// The client's configuration file, instead of its usual one (e.g. a
    /// project's .mcp.json or .vscode/mcp.json).
    #[arg(long, value_name = "PATH", requires = "client")]
    client_config: Option<PathBuf>,
    /// Show the change as a diff and write nothing.
    #[arg(long, requires = "client")]
    dry_run: bool,
}

/// Flags of `uninstall`.
#[derive(Debug, Clone, clap::Args)]
pub struct UninstallArgs {
    /// The MCP client to take the daemon out of.
    #[arg(long, value_enum)]
    client: Client,
    /// The client's configuration file, instead of its usual one.
    #[arg(long, value_name = "PATH")]
    client_config: Option<PathBuf>,
    /// Show the change as a diff and write nothing.
    #[arg(long)]
    dry_run: bool,
}

/// Writes the settings (and the vault key file when a key is given).
pub fn install(args: &InstallArgs) -> Exit {
    if let Some(client) = args.client.client {
        let endpoint = match args.serve.settings().and_then(|s| endpoint(&s)) {
            Ok(endpoint) => endpoint,
            Err(e) => return fail(e),
        };
        return edit_client(
            client,
            args.client.client_config.as_deref(),
            Some(&endpoint),
            args.client.dry_run,
        );
    }
    let path = args.serve.config_path();
    let current = match Settings::load(&path) {
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

/// Takes the daemon out of a client's configuration.
pub fn uninstall(args: &UninstallArgs) -> Exit {
    edit_client(
        args.client,
        args.client_config.as_deref(),
        None,
        args.dry_run,
    )
}

/// Where clients reach the daemon the settings describe.
fn endpoint(settings: &Settings) -> Result<Endpoint, String> {
    let url = if let Some(base) = &settings.base_url {
        format!("{}/mcp", base.trim_end_matches('/'))
    } else {
        let mut listen = settings.listen_addr()?;
        if listen.ip().is_unspecified() {
            listen.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
        }
        format!("http://{listen}/mcp")
    };
    Ok(Endpoint {
        url,
        token: settings.token.is_some(),
    })
}

/// Sets our entry in `client`'s configuration to `endpoint` (or removes
/// it), changing nothing else; with `dry_run`, prints the diff instead.
fn edit_client(
    client: Client,
    given: Option<&Path>,
    endpoint: Option<&Endpoint>,
    dry_run: bool,
) -> Exit {
    let home = home();
    let path = given.map_or_else(
        || client.config_file(&home, opcode_stdlib::environment::var),
        Path::to_path_buf,
    );
    let marker = client.installed_marker(&path, &home);
    if given.is_none() && !path.exists() && !marker.exists() {
        if endpoint.is_none() {
            println!(
                "{}: no {} here; nothing to remove",
                client.title(),
                path.display()
            );
            return Exit::Ok;
        }
        return fail(format!(
            "{} does not seem to be installed here ({} does not exist): install it, or name \
             its configuration file with --client-config",
            client.title(),
            marker.display()
        ));
    }
    let before = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return fail(format!("cannot read {}: {e}", path.display())),
    };
    let after = match client.edit(&before, endpoint) {
        Ok(Some(after)) => after,
        Ok(None) => {
            let state = if endpoint.is_some() {
                "has this entry already"
            } else {
                "has no entry"
            };
            println!(
                "{}: {} {state} (`{ENTRY}`); nothing to change",
                client.title(),
                path.display()
            );
            return Exit::Ok;
        }
        Err(e) => {
            return fail(format!(
                "cannot edit {}: {e}; correct the file, or name another with --client-config",
                path.display()
            ));
        }
    };
    if dry_run {
        let shown = path.display().to_string();
        print!(
            "{}",
            similar::TextDiff::from_lines(&before, &after)
                .unified_diff()
                .header(&shown, &shown)
        );
        println!("(dry run: {} not changed)", path.display());
        return Exit::Ok;
    }
    if let Err(e) = replace(&path, &after) {
        return fail(e);
    }
    match endpoint {
        Some(endpoint) => {
            println!(
                "{}: registered `{ENTRY}` at {} in {}",
                client.title(),
                endpoint.url,
                path.display()
            );
            if endpoint.token {
                println!("{}", client.token_hint());
            }
        }
        None => println!(
            "{}: removed `{ENTRY}` from {}",
            client.title(),
            path.display()
        ),
    }
    Exit::Ok
}

/// Replaces `path`'s content with `text` at once (a file beside it renamed
/// over it), keeping its permissions (0600 for a new file).
fn replace(path: &Path, text: &str) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt as _;
    let mode = std::fs::metadata(path).map_or(0o600, |m| m.permissions().mode() & 0o7777);
    let mut staged = path.as_os_str().to_owned();
    staged.push(format!(".opcode-{}", std::process::id()));
    let staged = PathBuf::from(staged);
    write_private(&staged, text)?;
    std::fs::set_permissions(&staged, std::fs::Permissions::from_mode(mode))
        .and_then(|()| std::fs::rename(&staged, path))
        .map_err(|e| {
            let _ = std::fs::remove_file(&staged);
            format!("cannot write {}: {e}", path.display())
        })
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
