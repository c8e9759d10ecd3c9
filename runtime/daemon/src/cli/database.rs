//! Where runs are kept: a libSQL file (the default, one machine) or a
//! PostgreSQL server that several daemons share (spec/scale-out.md).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use opcode_runtime::store::libsql::LibsqlStore;
use opcode_runtime::store::postgres::PostgresStore;
use opcode_runtime::{Durability, EventStore};

/// A `--db`, `OPCODE_DB` or settings `db`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Database {
    /// A libSQL file.
    File(PathBuf),
    /// A `postgres://` or `postgresql://` URL.
    Server(String),
}

impl Database {
    /// Reads `text`: a URL of a scheme this build serves, or a file path.
    /// A URL of another scheme is refused, never taken for a file name.
    pub fn parse(text: &Path) -> Result<Database, String> {
        let shown = text.to_string_lossy();
        let Some((scheme, _)) = shown.split_once("://") else {
            return Ok(Database::File(text.to_path_buf()));
        };
        let is_scheme = !scheme.is_empty()
            && scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
        match scheme.to_ascii_lowercase().as_str() {
            "postgres" | "postgresql" => Ok(Database::Server(shown.into_owned())),
            _ if is_scheme => Err(format!(
                "the database `{shown}` is a {scheme}:// URL, which this build does not serve: \
                 give a postgres:// URL or a libSQL file path (--db, OPCODE_DB or \"db\" in \
                 settings)"
            )),
            _ => Ok(Database::File(text.to_path_buf())),
        }
    }

    /// Opens it: a file with `durability` (PostgreSQL's durability is the
    /// server's), a server by connecting and migrating.
    pub async fn open(&self, durability: Durability) -> Result<Arc<dyn EventStore>, String> {
        match self {
            Database::File(path) => LibsqlStore::open(path, durability)
                .map(|store| Arc::new(store) as Arc<dyn EventStore>)
                .map_err(|e| format!("cannot open {}: {e}", path.display())),
            Database::Server(url) => PostgresStore::connect(url)
                .await
                .map(|store| Arc::new(store) as Arc<dyn EventStore>)
                .map_err(|e| format!("cannot use the database {}: {e}", self.shown())),
        }
    }

    /// The file, for a database in one.
    pub fn file(&self) -> Option<&Path> {
        match self {
            Database::File(path) => Some(path),
            Database::Server(_) => None,
        }
    }

    /// How logs name it: a URL without its password.
    pub fn shown(&self) -> String {
        match self {
            Database::File(path) => path.display().to_string(),
            Database::Server(url) => without_password(url),
        }
    }
}

/// `url` with the password of its user info masked.
fn without_password(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    match authority.rsplit_once('@') {
        Some((user_info, host)) if user_info.contains(':') => {
            let user = user_info.split(':').next().unwrap_or_default();
            format!("{scheme}://{user}:***@{host}{tail}")
        }
        _ => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_of_servers_files_and_refusals() {
        let parse = |text: &str| Database::parse(Path::new(text));
        assert_eq!(
            parse("postgres://me@h:5432/db"),
            Ok(Database::Server("postgres://me@h:5432/db".into()))
        );
        assert!(matches!(
            parse("PostgreSQL://h/db"),
            Ok(Database::Server(_))
        ));
        assert_eq!(
            parse("runs/opcode.db"),
            Ok(Database::File(PathBuf::from("runs/opcode.db")))
        );
        let refused = parse("sqlite://x.db").unwrap_err();
        assert!(
            refused.contains("sqlite://") && refused.contains("file path"),
            "{refused}"
        );
    }

    #[test]
    fn logs_never_show_a_password() {
        assert_eq!(
            without_password("postgres://me:s3cret@h:5432/db?sslmode=require"),
            "postgres://me:***@h:5432/db?sslmode=require"
        );
        assert_eq!(without_password("postgres://me@h/db"), "postgres://me@h/db");
        assert_eq!(
            Database::Server("postgresql://a:b@c/d".into()).shown(),
            "postgresql://a:***@c/d"
        );
    }
}
