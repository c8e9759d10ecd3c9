//! A test file's diagnostics, for the editor (spec/testing.md, "In the
//! editor"): mocks, decisions and expectations that name no step of the
//! workflow (E0055), and mock outputs that do not fit their action's
//! output (E0056), each at its place in the test file.

use std::collections::HashMap;
use std::path::Path;

use opcode_compiler::diagnostics::codes::{E0055, E0056};
use opcode_compiler::diagnostics::{Diagnostic, Diagnostics, Fix, did_you_mean};
use opcode_compiler::index::Index;
use opcode_compiler::source::Span;
use opcode_compiler::syntax::json;
use opcode_compiler::syntax::node::{Member, Node};
use opcode_compiler::{Compiler, Syntax};
use opcode_vm::catalog::{Ty, describe_value};
use serde_json::Value;

/// The steps of one workflow: each id and its action, if it has one.
type Steps = HashMap<String, Option<String>>;

/// The diagnostics of the test file `text`, read from `path`.
pub fn lint(path: &Path, text: &str, compiler: &Compiler) -> Vec<Diagnostic> {
    let mut sink = Diagnostics::new();
    let Some(root) = json::parse(text, &mut sink) else {
        return sink.into_sorted();
    };
    let folder = super::case::folder_of(path);
    let default = match root.get("workflow") {
        Some(m) => workflow_at(folder, &m.value, compiler, &mut sink),
        None => beside(path, compiler),
    };
    if let (Some(mocks), Some(steps)) = (root.get("mocks"), &default) {
        check_mocks(&mocks.value, steps, compiler, &mut sink);
    }
    let cases = root
        .get("cases")
        .and_then(|c| c.value.as_array())
        .unwrap_or_default();
    for case in cases {
        let steps = match case.get("workflow") {
            Some(m) => workflow_at(folder, &m.value, compiler, &mut sink),
            None => default.clone(),
        };
        let Some(steps) = steps else { continue };
        if let Some(mocks) = case.get("mocks") {
            check_mocks(&mocks.value, &steps, compiler, &mut sink);
        }
        for member in case.get("decisions").map(members).unwrap_or_default() {
            known_step(
                &member.key,
                member.key_span,
                &steps,
                "a decision",
                &mut sink,
            );
        }
        let expect = case.get("expect");
        let expected = expect.and_then(|e| e.value.get("steps")).map(members);
        for member in expected.unwrap_or_default() {
            known_step(
                &member.key,
                member.key_span,
                &steps,
                "an expectation",
                &mut sink,
            );
        }
        let never = expect.and_then(|e| e.value.get("never_ran"));
        for item in never.and_then(|n| n.value.as_array()).unwrap_or_default() {
            if let Some(id) = item.as_str() {
                known_step(id, item.span, &steps, "`never_ran`", &mut sink);
            }
        }
    }
    sink.into_sorted()
}

fn members<'a, 's>(member: &'a Member<'s>) -> &'a [Member<'s>] {
    member.value.as_object().unwrap_or_default()
}

/// The steps of the workflow `node` gives: a path from `folder`, or a
/// definition written in the test file.
fn workflow_at(
    folder: &Path,
    node: &Node,
    compiler: &Compiler,
    sink: &mut Diagnostics,
) -> Option<Steps> {
    if node.as_object().is_some() {
        return steps_of(&node.to_value().to_string(), Syntax::Json, compiler);
    }
    let relative = node.as_str()?;
    let path = folder.join(relative);
    match crate::check::read_source(&path) {
        Ok((_, text)) => steps_of(&text, Syntax::of_file(relative), compiler),
        Err(why) => {
            sink.push(Diagnostic::error(
                E0055,
                node.span,
                format!("the workflow cannot be read: {why}"),
            ));
            None
        }
    }
}

/// The steps of the workflow beside the test file at `path`, if there is one.
fn beside(path: &Path, compiler: &Compiler) -> Option<Steps> {
    let workflow = super::file::workflow_beside(path).ok()?;
    let (_, text) = crate::check::read_source(&workflow).ok()?;
    let name = workflow.to_string_lossy();
    steps_of(&text, Syntax::of_file(&name), compiler)
}

fn steps_of(text: &str, syntax: Syntax, compiler: &Compiler) -> Option<Steps> {
    let mut ignored = Diagnostics::new();
    let doc = compiler.parse_as(text, syntax, &mut ignored)?;
    let index = Index::new(&doc, text);
    Some(
        index
            .steps
            .into_iter()
            .map(|s| (s.id, s.action.map(|(a, _)| a)))
            .collect(),
    )
}

/// Each mock names a step (or an instance `step[i]`) or an action, and
/// gives outputs its action can give.
fn check_mocks(mocks: &Node, steps: &Steps, compiler: &Compiler, sink: &mut Diagnostics) {
    for mock in mocks.as_object().unwrap_or_default() {
        let action = if mock.key.contains('.') && !mock.key.contains('[') {
            if compiler.catalog().get(&mock.key).is_none() {
                sink.push(Diagnostic::error(
                    E0055,
                    mock.key_span,
                    format!(
                        "a mock names the action `{}`, which does not exist",
                        mock.key
                    ),
                ));
                continue;
            }
            Some(mock.key.to_string())
        } else {
            if !known_step(&mock.key, mock.key_span, steps, "a mock", sink) {
                continue;
            }
            steps.get(step_of(&mock.key)).cloned().flatten()
        };
        let Some(spec) = action.as_deref().and_then(|a| compiler.catalog().get(a)) else {
            continue;
        };
        let sequence = mock.value.get("sequence").and_then(|s| s.value.as_array());
        let results = std::iter::once(&mock.value).chain(sequence.unwrap_or_default());
        for output in results.filter_map(|r| r.get("output")) {
            if let Some(why) = misfit(&spec.output, &output.value.to_value(), "") {
                sink.push(
                    Diagnostic::error(
                        E0056,
                        output.value.span,
                        format!("`{}` never gives this output: {why}", spec.name),
                    )
                    .with_help(format!("its output is {}", spec.output.shape())),
                );
            }
        }
    }
}

/// Where `value` does not fit `ty`: a field of another type, or one an
/// object with declared fields does not have.
fn misfit(ty: &Ty, value: &Value, at: &str) -> Option<String> {
    if !ty.accepts(value) {
        let place = if at.is_empty() { "it" } else { at };
        return Some(format!(
            "{place} is {}, not {}",
            describe_value(value),
            ty.describe()
        ));
    }
    let (Ty::Object { fields }, Value::Object(map)) = (ty, value) else {
        return None;
    };
    if fields.is_empty() {
        return None;
    }
    map.iter().find_map(|(key, v)| match fields.get(key) {
        Some(field) => misfit(field, v, &format!("{at}.{key}")),
        None => Some(format!("it has no field `{at}.{key}`")),
    })
}

/// The step an instance name (`id[N]`) or a step id names.
fn step_of(name: &str) -> &str {
    name.split_once('[').map_or(name, |(id, _)| id)
}

/// Whether `id` is a step of the workflow; if not, says so at `span`
/// (with the closest id as a fix).
fn known_step(id: &str, span: Span, steps: &Steps, what: &str, sink: &mut Diagnostics) -> bool {
    let id = step_of(id);
    if steps.contains_key(id) {
        return true;
    }
    let ids: Vec<&str> = steps.keys().map(String::as_str).collect();
    let mut d = Diagnostic::error(
        E0055,
        span,
        format!("{what} names `{id}`, which is no step of the workflow"),
    );
    if let Some(close) = did_you_mean(id, &ids) {
        d = d.with_fix(Fix::replace(
            format!("replace with `{close}`"),
            span,
            format!("\"{close}\""),
            None,
        ));
    }
    sink.push(d);
    false
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // tests may panic

    use super::*;

    fn compiler() -> Compiler {
        crate::check::compiler()
    }

    /// A folder holding `workflow.json` with a `fetch` (http.get) step
    /// and an `approve` decision.
    fn folder(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("opcodec-lint-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let workflow = r#"{"steps": [
            {"id": "fetch", "action": "http.get", "params": {"url": "https://example.com"}},
            {"id": "approve", "type": "reasoning", "depends_on": ["fetch"],
             "config": {"prompt_context": "ok?", "options": [{"id": "yes"}, {"id": "no"}]}}]}"#;
        std::fs::write(dir.join("workflow.json"), workflow).unwrap();
        dir
    }

    fn found(text: &str, dir: &Path) -> Vec<(String, String, String)> {
        lint(&dir.join("workflow.test.json"), text, &compiler())
            .into_iter()
            .map(|d| {
                let span = d.span();
                let at = text[span.start as usize..span.end as usize].to_owned();
                (d.code.id.to_owned(), at, d.message)
            })
            .collect()
    }

    #[test]
    fn names_the_workflow_lacks_are_found_where_they_are_written() {
        let dir = folder("names");
        let text = r#"{"cases": [{"name": "a", "mocks": {"fetch-it": {"output": {}}, "http.gett": {}},
            "decisions": {"aprove": "yes"},
            "expect": {"steps": {"fetch[0]": {}}, "never_ran": ["nope"]}}]}"#;
        let found = found(text, &dir);
        let at: Vec<(&str, &str)> = found
            .iter()
            .map(|(c, a, _)| (c.as_str(), a.as_str()))
            .collect();
        assert_eq!(
            at,
            [
                ("E0055", "\"fetch-it\""),
                ("E0055", "\"http.gett\""),
                ("E0055", "\"aprove\""),
                ("E0055", "\"nope\"")
            ],
            "{found:?}"
        );
        let fixed = lint(&dir.join("workflow.test.json"), text, &compiler());
        assert!(
            fixed[2]
                .fix
                .as_ref()
                .is_some_and(|f| f.message.contains("`approve`")),
            "{fixed:?}"
        );
    }

    #[test]
    fn a_mocked_output_of_the_wrong_shape_is_refused() {
        let dir = folder("shape");
        let text = r#"{"mocks": {"fetch": {"sequence": [{"error": {"message": "503"}}, {"output": {"status_code": "200"}}]}},
            "cases": [{"name": "a", "mocks": {"http.get": {"output": {"status_code": 200}}}}]}"#;
        let found = found(text, &dir);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(
            (found[0].0.as_str(), found[0].1.as_str()),
            ("E0056", r#"{"status_code": "200"}"#)
        );
        assert!(
            found[0].2.contains("`http.get` never gives this output"),
            "{found:?}"
        );
    }

    #[test]
    fn a_workflow_that_cannot_be_read_is_said_at_its_name() {
        let dir = folder("missing");
        let found = found(r#"{"workflow": "gone.json", "cases": []}"#, &dir);
        assert_eq!(
            (found[0].0.as_str(), found[0].1.as_str()),
            ("E0055", "\"gone.json\"")
        );
    }

    /// The examples of E0055's and E0056's pages, beside a workflow whose
    /// `fetch` is an `http.get`, report their codes.
    #[test]
    fn the_pages_examples_report_their_codes() {
        let dir = folder("pages");
        for code in [E0055, E0056] {
            let page = code.doc;
            let start = page.find("```test-json\n").unwrap() + 13;
            let end = start + page[start..].find("```").unwrap();
            let codes: Vec<&str> = lint(
                &dir.join("workflow.test.json"),
                &page[start..end],
                &compiler(),
            )
            .iter()
            .map(|d| d.code.id)
            .collect();
            assert_eq!(codes, [code.id]);
        }
    }

    #[test]
    fn every_example_test_file_is_clean() {
        let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
        for entry in std::fs::read_dir(examples).unwrap() {
            let path = entry.unwrap().path().join("workflow.test.json");
            if let Ok(text) = std::fs::read_to_string(&path) {
                let found = lint(&path, &text, &compiler());
                assert!(found.is_empty(), "{}: {found:?}", path.display());
            }
        }
    }
}
