//! The daemon's engines: the operator's, and one per tenant
//! (spec/security.md, "Tenants"). Each has its database, vault,
//! workspaces and agents' files; each engine's sandboxes hide every other
//! engine's folders.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use opcode_daemon::settings::{OwnFiles, Settings, database_files};
use opcode_daemon::tenants::Tenant;
use opcode_runtime::Executor;
use opcode_runtime::store::Durability;
use opcode_runtime::vault::Vault;
use opcode_runtime::workspace::Workspaces;

use super::common::{Area, Database, Exit, executor_and_vault, fail};

/// One engine of the daemon.
pub struct Stack {
    /// Whose it is (none: the operator's).
    pub tenant: Option<Tenant>,
    /// Its database.
    pub db: Database,
    /// Its executor (not started: no background loop, nothing recovered).
    pub exec: Executor,
    /// Its vault, when a passphrase is set.
    pub vault: Option<Arc<Vault>>,
    /// Its data directory (transcripts, sessions, exports).
    pub data_dir: PathBuf,
}

/// Where an engine keeps what it makes, and its database.
struct Place {
    area: Area,
    workspace_root: Option<PathBuf>,
    db: Database,
    /// Its folders other engines' sandboxes hide.
    folders: Vec<PathBuf>,
}

/// Opens every engine's database and makes its executor: the operator's on
/// `db`, then each tenant's.
pub async fn open(
    settings: &Settings,
    db: Database,
    durability: Durability,
    settings_file: &Path,
    tenants: Vec<Tenant>,
) -> Result<Vec<Stack>, Exit> {
    let operator = Area::operator();
    let workspaces = settings.workspaces(&operator.data_dir).map_err(fail)?;
    let root = match (&workspaces, tenants.is_empty()) {
        (_, true) => None,
        (Workspaces::Fixed(dir), false) => {
            return Err(fail(format!(
                "tenants need a fresh workspace per run: `isolation.workspace` ({}) would \
                 give every tenant's runs one directory; set `isolation.workspace_root` instead",
                dir.display()
            )));
        }
        (Workspaces::Fresh { root, .. }, false) => Some(root.clone()),
    };
    // Tenants' folders beside the operator's workspaces and database.
    let beside = |path: &Path| path.parent().map_or_else(PathBuf::new, Path::to_path_buf);
    let mut places = vec![Place {
        workspace_root: None,
        folders: Vec::new(),
        area: operator.clone(),
        db: db.clone(),
    }];
    for tenant in &tenants {
        let root_parent = beside(root.as_deref().unwrap_or(Path::new("/")));
        let folder = tenant.folder(&root_parent);
        let tenant_db = match (&tenant.db, &db) {
            (Some(given), _) => Database::parse(given).map_err(fail)?,
            (None, Database::File(path)) => {
                Database::File(tenant.folder(&beside(path)).join("opcode.db"))
            }
            (None, Database::Server(_)) => {
                return Err(fail(format!(
                    "tenant `{}` needs its own `db`: the operator's database is a server",
                    tenant.name
                )));
            }
        };
        let mut folders = vec![folder.clone()];
        if let Database::File(path) = &tenant_db {
            folders.push(beside(path));
        }
        places.push(Place {
            area: Area {
                data_dir: tenant.folder(&operator.data_dir),
                agent_calls: folder.join("agent-calls"),
            },
            workspace_root: Some(folder.join("workspaces")),
            db: tenant_db,
            folders,
        });
    }
    if let Some(root) = &root {
        // Tenants' sandboxes hide the operator's workspaces, agents' homes,
        // data directory and database, wherever they are.
        places[0].folders = vec![
            root.clone(),
            operator.agent_calls.clone(),
            operator.data_dir.clone(),
        ];
        if let Database::File(path) = &db {
            places[0].folders.extend(database_files(path));
        }
    }
    let mut stacks = Vec::with_capacity(places.len());
    let owners: Vec<Option<Tenant>> = std::iter::once(None)
        .chain(tenants.into_iter().map(Some))
        .collect();
    for (n, (place, tenant)) in places.iter().zip(owners).enumerate() {
        let others: Vec<PathBuf> = places
            .iter()
            .enumerate()
            .filter(|(m, _)| *m != n)
            .flat_map(|(_, p)| p.folders.iter().cloned())
            .collect();
        let own_settings = match (&tenant, &place.workspace_root) {
            (Some(tenant), Some(root)) => {
                make_private(&place.area.data_dir)?;
                if let Database::File(path) = &place.db {
                    make_private(&beside(path))?;
                }
                Settings {
                    isolation: Some(tenant.isolation(settings.isolation.as_ref(), root)),
                    ..settings.clone()
                }
            }
            _ => settings.clone(),
        };
        let store = place.db.open(durability).await.map_err(fail)?;
        let files = OwnFiles {
            db: place.db.file().map(Path::to_path_buf),
            settings: settings_file.to_path_buf(),
            vault_key: settings.vault_key_file.clone(),
            others,
        };
        let shared = matches!(place.db, Database::Server(_));
        let (exec, vault) = executor_and_vault(
            store,
            true,
            shared,
            Some(&own_settings),
            &files,
            &place.area,
        )
        .await?;
        stacks.push(Stack {
            tenant,
            db: place.db.clone(),
            exec,
            vault,
            data_dir: place.area.data_dir.clone(),
        });
    }
    Ok(stacks)
}

/// Makes `dir` (and its parents) readable by the daemon's user only.
fn make_private(dir: &Path) -> Result<(), Exit> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .and_then(|()| std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)))
        .map_err(|e| fail(format!("cannot make {}: {e}", dir.display())))
}
