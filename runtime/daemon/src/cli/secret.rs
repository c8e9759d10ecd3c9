//! `opcode secret set|list|rm`: the vault's secrets, sealed in the database.
//! Values come from standard input and are never printed.

use std::io::Read;

use opcode_runtime::vault::{self, Vault};

use super::common::{DbArgs, Exit, fail};

/// Arguments of `secret`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
    #[command(flatten)]
    db: DbArgs,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Store a secret; its value is read from standard input (one trailing
    /// newline is dropped).
    Set {
        /// The name used in `${{secrets.NAME}}`.
        name: String,
    },
    /// List the secrets' names (never their values).
    List {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Delete a secret.
    Rm {
        /// The secret.
        name: String,
    },
}

/// Runs `secret`.
pub async fn secret(args: Args) -> Exit {
    let store = match args.db.open().await {
        Ok(store) => store,
        Err(exit) => return exit,
    };
    if let Command::List { json } = args.command {
        return match vault::list(store.as_ref()).await {
            Ok(rows) if json => {
                let rows: Vec<_> = rows
                    .iter()
                    .map(|r| serde_json::json!({"name": r.name, "created_at": r.created_at, "updated_at": r.updated_at}))
                    .collect();
                println!("{}", serde_json::Value::Array(rows));
                Exit::Ok
            }
            Ok(rows) => {
                for row in rows {
                    println!("{}\tupdated {}", row.name, row.updated_at);
                }
                Exit::Ok
            }
            Err(e) => fail(e),
        };
    }
    let from_env = std::env::var_os("OPCODE_VAULT_KEY_FILE").map(std::path::PathBuf::from);
    let key_file = args.db.vault_key_file.clone().or(from_env);
    let passphrase = match vault::passphrase(key_file.as_deref()) {
        Ok(Some(p)) => p,
        Ok(None) => return fail(format!("R0124: {}", vault::VaultError::NoPassphrase)),
        Err(e) => return fail(format!("R0124: {e}")),
    };
    let vault = match Vault::open(store, &passphrase).await {
        Ok(vault) => vault,
        Err(e) => return fail(format!("R0124: {e}")),
    };
    match args.command {
        Command::Set { name } => {
            let mut value = String::new();
            if let Err(e) = std::io::stdin().read_to_string(&mut value) {
                return fail(format!("cannot read the value from standard input: {e}"));
            }
            let value = value
                .strip_suffix('\n')
                .map_or(value.as_str(), |v| v.strip_suffix('\r').unwrap_or(v));
            match vault.set(&name, value).await {
                Ok(()) => {
                    eprintln!("secret `{name}` stored");
                    Exit::Ok
                }
                Err(e) => fail(e),
            }
        }
        Command::Rm { name } => match vault.remove(&name).await {
            Ok(true) => Exit::Ok,
            Ok(false) => fail(format!("there is no secret `{name}`")),
            Err(e) => fail(e),
        },
        Command::List { .. } => Exit::Ok,
    }
}
