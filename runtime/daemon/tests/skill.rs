//! The agent skill (`editors/skill/opcode/`) never drifts from the product:
//! every action, tool, field, error code and resource it names exists;
//! every field table lists exactly the fields there are; every example
//! workflow compiles without a diagnostic; its conversation runs, call by
//! call, against a real daemon API; and its action reference is the
//! catalog's (`OPCODE_BLESS=1` rewrites it).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeSet;
use std::sync::Arc;

use opcode_daemon::api::skill::{ACTIONS_MD, SKILL_MD, actions_reference, guide};
use opcode_daemon::api::{Api, tool, tools};
use opcode_runtime::Executor;
use opcode_runtime::executor::Config;
use opcode_runtime::store::EventStore;
use opcode_runtime::store::memory::MemoryStore;
use opcode_stdlib::exec::EnvSecrets;
use opcode_vm::catalog::Catalog;
use serde_json::Value;

fn api() -> Api {
    let store: Arc<dyn EventStore> = Arc::new(MemoryStore::new());
    Api::new(Executor::new(
        store,
        Arc::new(EnvSecrets),
        Config::default(),
    ))
}

fn catalog() -> Catalog {
    Catalog::new(opcode_stdlib::catalog())
}

/// The fenced blocks of the guide: (info string, body).
fn blocks() -> Vec<(String, String)> {
    let mut found = Vec::new();
    let mut lines = guide().lines();
    while let Some(line) = lines.next() {
        if let Some(info) = line.strip_prefix("```") {
            let body: Vec<&str> = lines.by_ref().take_while(|l| *l != "```").collect();
            found.push((info.to_owned(), body.join("\n")));
        }
    }
    found
}

/// The guide's prose: everything outside fenced blocks.
fn prose() -> String {
    let mut text = String::new();
    let mut fenced = false;
    for line in guide().lines() {
        if line.starts_with("```") {
            fenced = !fenced;
        } else if !fenced {
            text.push_str(line);
            text.push('\n');
        }
    }
    text
}

/// The spans of the prose written `like this`.
fn code_spans() -> Vec<String> {
    prose()
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

#[test]
fn the_action_reference_is_the_catalogs() {
    let generated = actions_reference(catalog().iter());
    if std::env::var_os("OPCODE_BLESS").is_some() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../editors/skill/opcode/references/actions.md"
        );
        std::fs::write(path, &generated).unwrap();
        return;
    }
    assert!(
        generated == ACTIONS_MD,
        "editors/skill/opcode/references/actions.md is not the catalog's: \
         run `OPCODE_BLESS=1 cargo test -p opcode-daemon --test skill`"
    );
}

#[test]
fn every_action_tool_and_code_it_names_exists() {
    let catalog = catalog();
    let families: BTreeSet<&str> = catalog
        .iter()
        .filter_map(|a| a.name.split_once('.').map(|(f, _)| f))
        .collect();
    for span in code_spans() {
        let Some((family, rest)) = span.split_once('.') else {
            continue;
        };
        let word = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_lowercase() || c == '_');
        if !word(family) || !word(rest) {
            continue;
        }
        if family == "opcode" {
            assert!(
                tool(&span).is_some(),
                "the skill names a tool `{span}` that is not one"
            );
        } else if families.contains(family) {
            assert!(
                catalog.get(&span).is_some(),
                "the skill names an action `{span}` that is not in the catalog"
            );
        }
    }
    let text = guide();
    let mut codes = 0;
    for (at, _) in text.match_indices(['E', 'W', 'R']) {
        let candidate = &text[at..text.len().min(at + 5)];
        let boundary = |i: usize| {
            text[i..]
                .chars()
                .next()
                .is_none_or(|c| !c.is_alphanumeric())
        };
        let digits = candidate.len() == 5 && candidate[1..].chars().all(|c| c.is_ascii_digit());
        let starts = at == 0 || !text[..at].ends_with(char::is_alphanumeric);
        if digits && starts && boundary(at + 5) {
            codes += 1;
            let page = format!(
                "{}/../../spec/errors/{candidate}.md",
                env!("CARGO_MANIFEST_DIR")
            );
            assert!(
                std::path::Path::new(&page).is_file(),
                "the skill names an error code {candidate} that has no page in spec/errors"
            );
        }
    }
    assert!(codes >= 5, "the skill should name the codes an agent meets");
}

#[test]
fn every_field_table_lists_exactly_the_fields_there_are() {
    let schema: Value = serde_json::from_str(include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../spec/workflow.schema.json"
    )))
    .unwrap();
    let text = guide();
    let mut tables = 0;
    for (at, _) in text.match_indices("<!-- fields: ") {
        let rest = &text[at + "<!-- fields: ".len()..];
        let (what, table) = rest.split_once(" -->").unwrap();
        let listed: BTreeSet<String> = table
            .trim_start()
            .lines()
            .take_while(|l| l.starts_with('|'))
            .skip(2)
            .map(|row| row.split('`').nth(1).unwrap().to_owned())
            .collect();
        let expected: BTreeSet<String> = match what.split_once(' ') {
            Some(("tool", name)) => {
                let spec = tool(name).unwrap_or_else(|| panic!("no tool {name}"));
                spec.input_schema["properties"]
                    .as_object()
                    .unwrap()
                    .keys()
                    .cloned()
                    .collect()
            }
            _ => schema["$defs"][what]["properties"]
                .as_object()
                .unwrap_or_else(|| panic!("no schema definition `{what}`"))
                .keys()
                .filter(|k| *k != "$schema")
                .cloned()
                .collect(),
        };
        assert_eq!(listed, expected, "the skill's table of {what}");
        tables += 1;
    }
    assert_eq!(
        tables,
        tools().len() + 2,
        "a table per tool, definition and step"
    );
}

#[test]
fn every_example_workflow_compiles_without_a_diagnostic() {
    let api = api();
    let mut checked = 0;
    for (info, body) in blocks() {
        let diagnostics = match info.as_str() {
            "json definition" => opcode_daemon::api::check_text(&api, &body, "example.json"),
            "json opcode.define" => {
                let args: Value = serde_json::from_str(&body).unwrap();
                let text = serde_json::to_string(&args["definition"]).unwrap();
                opcode_daemon::api::check_text(&api, &text, "example.json")
            }
            _ => continue,
        };
        let diagnostics = diagnostics.unwrap_or_else(|e| panic!("{body}\n{}", e.to_json()));
        assert_eq!(diagnostics, Value::Array(vec![]), "{body}");
        checked += 1;
    }
    assert!(checked >= 5, "only {checked} examples");
}

#[tokio::test]
async fn its_conversation_runs_call_by_call() {
    let api = api();
    let mut workflow_id = String::new();
    let mut last = Value::Null;
    for (info, body) in blocks() {
        match info.as_str() {
            "json definition" => continue,
            "json config" => {
                serde_json::from_str::<Value>(&body).unwrap();
                continue;
            }
            _ => {}
        }
        let name = info
            .strip_prefix("json ")
            .unwrap_or_else(|| panic!("a block of unknown kind `{info}`"));
        assert!(tool(name).is_some(), "a block calls `{name}`, not a tool");
        let args: Value = serde_json::from_str(&body.replace("WORKFLOW_ID", &workflow_id)).unwrap();
        last = api
            .call(name, args)
            .await
            .unwrap_or_else(|e| panic!("{name} {body}: {}", e.to_json()));
        if let Some(id) = last["workflow_id"].as_str() {
            workflow_id = id.to_owned();
        }
        if name == "opcode.run" {
            assert_eq!(last["status"], "suspended", "{last}");
            assert_eq!(last["pending_decisions"][0]["step_id"], "review");
        }
    }
    assert_eq!(last["status"], "completed", "{last}");
    assert_eq!(last["output"]["choice"], "ship", "{last}");
    assert_eq!(last["steps"]["review"]["status"], "completed", "{last}");
}

#[test]
fn its_frontmatter_is_what_skill_hosts_read() {
    let head = SKILL_MD.strip_prefix("---\n").unwrap();
    let (frontmatter, _) = head.split_once("\n---\n").unwrap();
    let keys: Vec<&str> = frontmatter
        .lines()
        .map(|l| l.split_once(": ").unwrap().0)
        .collect();
    assert_eq!(keys, ["name", "description"]);
    let (name, description) = opcode_daemon::api::skill::frontmatter();
    assert_eq!(name, "opcode");
    assert!(
        description.len() <= 1024,
        "hosts cap a description at 1024 characters"
    );
}

#[test]
fn the_language_reference_lists_every_action() {
    let language = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../spec/language.md"
    ));
    for action in catalog().iter() {
        let listed = language.lines().filter(|l| l.starts_with("| `")).any(|l| {
            l.split(" | ")
                .next()
                .is_some_and(|cell| cell.contains(&format!("`{}`", action.name)))
        });
        assert!(
            listed,
            "spec/language.md's table of actions lacks `{}`",
            action.name
        );
    }
}
