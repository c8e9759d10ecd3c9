//! Edits of an MCP client's configuration file that change one entry and
//! keep every other byte: JSON with comments (Claude Code, Cursor, VS Code)
//! and TOML (Codex).

use jsonc_parser::ParseOptions;
use jsonc_parser::cst::{CstInputValue, CstObject, CstRootNode};
use serde_json::Value;

/// A JSON (or JSONC) configuration file.
pub struct JsonFile(CstRootNode);

impl JsonFile {
    /// Parses `text` (empty text is an empty object).
    pub fn parse(text: &str) -> Result<JsonFile, String> {
        let root = CstRootNode::parse(text, &ParseOptions::default()).map_err(|e| e.to_string())?;
        if root.value().is_some() && root.object_value().is_none() {
            return Err("it is not a JSON object".into());
        }
        Ok(JsonFile(root))
    }

    /// Sets `table.name` to `value`, or removes it when `value` is `None`;
    /// false when it was so already (nothing changed).
    pub fn set_member(
        &self,
        table: &str,
        name: &str,
        value: Option<&Value>,
    ) -> Result<bool, String> {
        let root = self.0.object_value_or_set();
        let existing = root.get(table);
        let Some(value) = value else {
            let Some(members) = existing.and_then(|_| root.object_value(table)) else {
                return Ok(false);
            };
            let Some(member) = members.get(name) else {
                return Ok(false);
            };
            member.remove();
            return Ok(true);
        };
        let members = root
            .object_value_or_create(table)
            .ok_or_else(|| format!("`{table}` is not an object"))?;
        Ok(set_in(&members, name, value))
    }

    /// Keeps `value` in the array `table` as the element whose `key` is
    /// `id` (adding or replacing it), or removes that element when `value`
    /// is `None`; false when nothing changed.
    pub fn set_element(
        &self,
        table: &str,
        key: &str,
        id: &str,
        value: Option<&Value>,
    ) -> Result<bool, String> {
        let root = self.0.object_value_or_set();
        let found = root.array_value(table).and_then(|array| {
            array.elements().into_iter().find(|element| {
                element
                    .to_serde_value()
                    .is_some_and(|v| v.get(key).and_then(Value::as_str) == Some(id))
            })
        });
        match (found, value) {
            (None, None) => Ok(false),
            (Some(element), None) => {
                element.remove();
                Ok(true)
            }
            (Some(element), Some(value)) if element.to_serde_value().as_ref() == Some(value) => {
                Ok(false)
            }
            (Some(element), Some(value)) => {
                let array = root.array_value(table).ok_or("the array went away")?;
                let index = element.child_index();
                element.remove();
                let position = array
                    .elements()
                    .iter()
                    .position(|e| e.child_index() >= index)
                    .unwrap_or(array.elements().len());
                array.insert(position, input(value));
                Ok(true)
            }
            (None, Some(value)) => {
                let array = root
                    .array_value_or_create(table)
                    .ok_or_else(|| format!("`{table}` is not an array"))?;
                array.append(input(value));
                Ok(true)
            }
        }
    }

    /// The file's text.
    pub fn text(&self) -> String {
        self.0.to_string()
    }
}

/// Sets `name` in `object` to `value` unless it holds it already; false
/// when it did.
fn set_in(object: &CstObject, name: &str, value: &Value) -> bool {
    match object.get(name) {
        Some(member) => {
            let current = member.value().and_then(|v| v.to_serde_value());
            if current.as_ref() == Some(value) {
                return false;
            }
            member.set_value(input(value));
        }
        None => {
            object.append(name, input(value));
        }
    }
    true
}

/// `value` as the CST's input.
fn input(value: &Value) -> CstInputValue {
    match value {
        Value::Null => CstInputValue::Null,
        Value::Bool(b) => CstInputValue::Bool(*b),
        Value::Number(n) => CstInputValue::Number(n.to_string()),
        Value::String(s) => CstInputValue::String(s.clone()),
        Value::Array(items) => CstInputValue::Array(items.iter().map(input).collect()),
        Value::Object(map) => {
            CstInputValue::Object(map.iter().map(|(k, v)| (k.clone(), input(v))).collect())
        }
    }
}

/// A TOML configuration file.
pub struct TomlFile(toml_edit::DocumentMut);

impl TomlFile {
    /// Parses `text`.
    pub fn parse(text: &str) -> Result<TomlFile, String> {
        text.parse().map(TomlFile).map_err(|e| e.to_string())
    }

    /// Sets the table `[parent.name]` to `entries` (string values), or
    /// removes it when `entries` is `None`; false when nothing changed.
    pub fn set_table(
        &mut self,
        parent: &str,
        name: &str,
        entries: Option<&[(&str, String)]>,
    ) -> Result<bool, String> {
        let doc = &mut self.0;
        let Some(entries) = entries else {
            let removed = doc
                .get_mut(parent)
                .and_then(toml_edit::Item::as_table_like_mut)
                .and_then(|t| t.remove(name));
            return Ok(removed.is_some());
        };
        let same = doc
            .get(parent)
            .and_then(|p| p.get(name))
            .and_then(toml_edit::Item::as_table_like)
            .is_some_and(|t| {
                t.len() == entries.len()
                    && entries
                        .iter()
                        .all(|(k, v)| t.get(k).and_then(toml_edit::Item::as_str) == Some(v))
            });
        if same {
            return Ok(false);
        }
        if doc.get(parent).is_none() {
            let mut implicit = toml_edit::Table::new();
            implicit.set_implicit(true);
            doc.insert(parent, toml_edit::Item::Table(implicit));
        }
        let parent_table = doc
            .get_mut(parent)
            .and_then(toml_edit::Item::as_table_mut)
            .ok_or_else(|| format!("`{parent}` is not a table"))?;
        let mut table = toml_edit::Table::new();
        for (key, value) in entries {
            table.insert(key, toml_edit::value(value.as_str()));
        }
        parent_table.insert(name, toml_edit::Item::Table(table));
        Ok(true)
    }

    /// The file's text.
    pub fn text(&self) -> String {
        self.0.to_string()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use serde_json::json;

    const JSONC: &str = "{\n  // my servers\n  \"mcpServers\": {\n    \"other\": { \"command\": \"x\" }\n  },\n  \"theme\": \"dark\"\n}\n";

    #[test]
    fn a_json_member_is_added_kept_and_removed_leaving_the_rest() {
        let file = JsonFile::parse(JSONC).unwrap();
        let entry = json!({"type": "http", "url": "http://127.0.0.1:4100/mcp"});
        assert!(
            file.set_member("mcpServers", "opcode", Some(&entry))
                .unwrap()
        );
        let added = file.text();
        assert!(added.contains("// my servers") && added.contains("\"theme\": \"dark\""));
        let again = JsonFile::parse(&added).unwrap();
        assert!(
            !again
                .set_member("mcpServers", "opcode", Some(&entry))
                .unwrap()
        );
        assert_eq!(again.text(), added);
        assert!(again.set_member("mcpServers", "opcode", None).unwrap());
        assert_eq!(again.text(), JSONC);
    }

    #[test]
    fn a_json_array_element_is_found_by_its_id() {
        let text = "{\n  \"inputs\": [\n    {\"id\": \"a\"}\n  ]\n}\n";
        let file = JsonFile::parse(text).unwrap();
        let input = json!({"id": "b", "type": "promptString"});
        assert!(file.set_element("inputs", "id", "b", Some(&input)).unwrap());
        assert!(!file.set_element("inputs", "id", "b", Some(&input)).unwrap());
        assert!(file.set_element("inputs", "id", "b", None).unwrap());
        assert_eq!(file.text(), text);
        assert!(JsonFile::parse("[1]").is_err());
    }

    #[test]
    fn a_toml_table_is_added_kept_and_removed_leaving_the_rest() {
        let text = "# Codex\nmodel = \"o3\"\n\n[mcp_servers.other]\ncommand = \"x\"\n";
        let mut file = TomlFile::parse(text).unwrap();
        let entries = [("url", "http://127.0.0.1:4100/mcp".to_owned())];
        assert!(
            file.set_table("mcp_servers", "opcode", Some(&entries))
                .unwrap()
        );
        let added = file.text();
        assert!(added.starts_with(text), "{added}");
        assert!(added.contains("[mcp_servers.opcode]\nurl = \"http://127.0.0.1:4100/mcp\""));
        assert!(
            !file
                .set_table("mcp_servers", "opcode", Some(&entries))
                .unwrap()
        );
        assert!(file.set_table("mcp_servers", "opcode", None).unwrap());
        assert_eq!(file.text(), text);
    }
}
