//! Tenants (spec/security.md, "Tenants"): the settings' `tenants`, each a
//! name, the tokens that act as it, and where its database is. A tenant
//! is a whole engine of its own (its database, runs, templates, schedules,
//! decisions, vault, workspaces and agents' files), served by the same
//! daemon: a request's token chooses whose routes answer it, so nothing
//! one tenant can reach names another's.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

use crate::serve::guard::valid_token;

/// One tenant of the settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tenant {
    /// Its name: lower-case letters, digits, `-` and `_`.
    pub name: String,
    /// The bearer tokens that act as it.
    pub tokens: Vec<String>,
    /// Its database (default: `tenants/<name>/opcode.db` beside the
    /// operator's file; required when that is a server).
    pub db: Option<PathBuf>,
    /// What its templates and agents may widen (the settings' isolation
    /// `grants` are the operator's own, never a tenant's).
    pub grants: Vec<Value>,
}

/// A tenant as written in the settings.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Written {
    tokens: Vec<String>,
    #[serde(default)]
    db: Option<PathBuf>,
    #[serde(default)]
    grants: Vec<Value>,
}

/// The longest tenant name.
const MAX_NAME: usize = 64;

/// The settings' `tenants` (`{name: {tokens, db?, grants?}}`), checked:
/// names are short and plain, every token is long enough and acts as one
/// tenant only, never as the operator (`operator_token`), who must have
/// one when there are tenants.
pub fn parse(value: Option<&Value>, operator_token: Option<&str>) -> Result<Vec<Tenant>, String> {
    let Some(value) = value else {
        return Ok(Vec::new());
    };
    let Value::Object(entries) = value else {
        return Err("`tenants` is an object: {\"name\": {\"tokens\": [...]}}".into());
    };
    if !entries.is_empty() && operator_token.is_none() {
        return Err(
            "tenants need the operator's own token (`token`): without it every request \
             without a token would act as the operator"
                .into(),
        );
    }
    let mut tenants: Vec<Tenant> = Vec::new();
    for (name, entry) in entries {
        if !valid_name(name) {
            return Err(format!(
                "tenant `{name}`: a name is 1 to {MAX_NAME} lower-case letters, digits, `-` or `_`"
            ));
        }
        let written: Written =
            serde_json::from_value(entry.clone()).map_err(|e| format!("tenant `{name}`: {e}"))?;
        if written.tokens.is_empty() {
            return Err(format!("tenant `{name}` has no token"));
        }
        for token in &written.tokens {
            valid_token(token).map_err(|e| format!("tenant `{name}`: {e}"))?;
            let taken = operator_token == Some(token.as_str())
                || tenants.iter().any(|t| t.tokens.contains(token))
                || written.tokens.iter().filter(|t| *t == token).count() > 1;
            if taken {
                return Err(format!(
                    "tenant `{name}`: a token acts as one tenant only (and never as the operator)"
                ));
            }
        }
        tenants.push(Tenant {
            name: name.clone(),
            tokens: written.tokens,
            db: written.db,
            grants: written.grants,
        });
    }
    Ok(tenants)
}

/// Is `name` a tenant name?
fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
}

impl Tenant {
    /// Its folder beside the operator's `dir` (a data directory or a
    /// workspace root's parent): `<dir>/tenants/<name>`.
    pub fn folder(&self, dir: &Path) -> PathBuf {
        dir.join("tenants").join(&self.name)
    }

    /// The settings' isolation block for it: the operator's, its fresh
    /// workspaces under `workspace_root`, its own grants in place of the
    /// operator's.
    pub fn isolation(&self, block: Option<&Value>, workspace_root: &Path) -> Value {
        let mut block = block
            .cloned()
            .unwrap_or_else(|| Value::Object(serde_json::Map::new()));
        if let Value::Object(map) = &mut block {
            map.insert(
                "workspace_root".into(),
                Value::String(workspace_root.to_string_lossy().into_owned()),
            );
            map.insert("grants".into(), Value::Array(self.grants.clone()));
        }
        block
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const OPERATOR: &str = "operator-token-0123456789";

    #[test]
    fn tenants_are_named_plainly_and_their_tokens_act_as_one_only() {
        let ok = json!({"acme": {"tokens": ["acme-token-0123456789"]},
                        "globex": {"tokens": ["globex-token-012345678"], "db": "/srv/g.db"}});
        let tenants = parse(Some(&ok), Some(OPERATOR)).unwrap();
        assert_eq!(tenants.len(), 2);
        assert_eq!(tenants[1].db.as_deref(), Some(Path::new("/srv/g.db")));
        let refused = [
            json!({"Acme": {"tokens": ["acme-token-0123456789"]}}),
            json!({"../x": {"tokens": ["acme-token-0123456789"]}}),
            json!({"acme": {"tokens": []}}),
            json!({"acme": {"tokens": ["short"]}}),
            json!({"acme": {"tokens": [OPERATOR]}}),
            json!({"a": {"tokens": ["same-token-0123456789"]}, "b": {"tokens": ["same-token-0123456789"]}}),
            json!({"acme": {"tokens": ["acme-token-0123456789"], "colour": "red"}}),
            json!(["acme"]),
        ];
        for bad in refused {
            assert!(parse(Some(&bad), Some(OPERATOR)).is_err(), "{bad}");
        }
        assert!(
            parse(Some(&ok), None).is_err(),
            "tenants without the operator's token"
        );
        assert_eq!(parse(None, None).unwrap(), Vec::new());
    }

    #[test]
    fn a_tenants_isolation_has_its_own_root_and_grants_only() {
        let tenant = Tenant {
            name: "acme".into(),
            tokens: Vec::new(),
            db: None,
            grants: vec![json!({"template": "t", "network": true})],
        };
        let operator =
            json!({"memory": "1G", "grants": [{"template": "t", "workspaces": ["/srv"]}]});
        let block = tenant.isolation(Some(&operator), Path::new("/w/tenants/acme/workspaces"));
        assert_eq!(block["memory"], "1G");
        assert_eq!(block["workspace_root"], "/w/tenants/acme/workspaces");
        assert_eq!(block["grants"], json!([{"template": "t", "network": true}]));
    }
}
