//! Every diagnostic code's page carries an example that triggers it. This
//! test checks each example really reports its code, and snapshots the
//! rendered diagnostics (SOURCE + DIAGNOSTICS), so the pages and the
//! messages people read are reviewed together.

#![allow(clippy::expect_used, clippy::unwrap_used)] // test helpers may panic
use opcode_compiler::diagnostics::codes::ALL;
use opcode_compiler::diagnostics::render::human;
use opcode_compiler::{
    AgentLookup, AgentRef, Compiler, Embedding, IsolationCheck, MAX_SOURCE_BYTES, Syntax, Widening,
    decode_utf8,
};

/// A daemon's default ceiling, as far as the E0052 example needs: no host network.
struct NoNetwork;

impl IsolationCheck for NoNetwork {
    fn widenings(&self, _: Option<&str>, block: &serde_json::Value) -> Vec<Widening> {
        (block["network"] == true)
            .then(|| Widening {
                key: "network".into(),
                message: "the step asks for the host network".into(),
                help: "only the daemon's settings may allow it".into(),
            })
            .into_iter()
            .collect()
    }
}

/// An embedding whose ceiling fails inside (the E0059 example).
struct Failing;

impl IsolationCheck for Failing {
    fn widenings(&self, _: Option<&str>, _: &serde_json::Value) -> Vec<Widening> {
        panic!("the ceiling failed")
    }
}

/// A registry holding `db-fixer@0.1.0`, a worker (the E0070 example).
struct Published;

impl AgentLookup for Published {
    fn lookup(&self, reference: &str) -> AgentRef {
        match reference {
            "db-fixer" | "db-fixer@0.1.0" => AgentRef::Release {
                pinned: "db-fixer@0.1.0".into(),
                role: "worker".into(),
            },
            other => AgentRef::Unknown {
                message: format!("no agent `{other}`"),
                closest: None,
                help: "published: db-fixer".into(),
            },
        }
    }
}

/// `compile_with` of the isolation ceiling `isolation` alone.
fn ceiling(isolation: &dyn IsolationCheck) -> Embedding<'_> {
    Embedding {
        isolation: Some(isolation),
        agents: None,
    }
}

fn compiler() -> Compiler {
    Compiler::new().with_actions(opcode_stdlib::catalog())
}

/// The first fenced block under "## Example": (language, text).
fn example(doc: &str) -> (&str, &str) {
    let section = doc
        .split("## Example")
        .nth(1)
        .expect("page has an Example section");
    let fence = section.find("```").expect("example is fenced");
    let rest = &section[fence + 3..];
    let newline = rest.find('\n').expect("fence has a language line");
    let lang = &rest[..newline];
    let body = &rest[newline + 1..];
    let end = body.find("```").expect("fence is closed");
    (lang, body[..end].trim_end())
}

#[test]
fn every_page_example_triggers_its_code() {
    let compiler = compiler();
    for code in ALL {
        let (lang, source) = example(code.doc);
        let (text, diagnostics) = match (code.id, lang) {
            ("E0002", "text") => {
                let bytes = b"{\"steps\": [{\"id\": \"a\", \"action\": \"workflow.log\", \"params\": {\"message\": \"caf\xe9\"}}]}";
                let diagnostic = decode_utf8(bytes).expect_err("invalid UTF-8 is reported");
                (
                    String::from_utf8_lossy(bytes).into_owned(),
                    vec![diagnostic],
                )
            }
            ("E0006", "text") => {
                let big = format!("{{\"steps\": []}}{}", " ".repeat(MAX_SOURCE_BYTES));
                (String::new(), compiler.check(&big).into_sorted())
            }
            ("E0052", "json") => {
                let (_, found) =
                    compiler.compile_with(source, "workflow.json", ceiling(&NoNetwork));
                (source.to_owned(), found.into_sorted())
            }
            ("E0059", "json") => {
                let (program, found) =
                    compiler.compile_with(source, "workflow.json", ceiling(&Failing));
                assert!(program.is_none(), "E0059: a program despite the failure");
                (source.to_owned(), found.into_sorted())
            }
            ("E0070", "json") => {
                let agents = Embedding {
                    isolation: None,
                    agents: Some(&Published),
                };
                let (_, found) = compiler.compile_with(source, "workflow.json", agents);
                (source.to_owned(), found.into_sorted())
            }
            // A workflow test file's (opcodec's lint tests run these), and a
            // command with what it prints: the registry's refusals, which
            // need a store or the settings (runtime/daemon/tests/agents.rs).
            (_, "test-json" | "console") => continue,
            (_, "agent-json") => (
                source.to_owned(),
                opcode_compiler::agent::read(source).1.into_sorted(),
            ),
            (_, "eval-json") => (
                source.to_owned(),
                opcode_compiler::agent::suite::read(source).1.into_sorted(),
            ),
            (_, "json") => (source.to_owned(), compiler.check(source).into_sorted()),
            (_, "opc") => (
                source.to_owned(),
                compiler.check_as(source, Syntax::Opc).into_sorted(),
            ),
            (id, other) => panic!("{id}: unexpected example language {other}"),
        };
        assert!(
            diagnostics.iter().any(|d| d.code.id == code.id),
            "{}: the page's example does not report it; got {:?}",
            code.id,
            diagnostics.iter().map(|d| d.code.id).collect::<Vec<_>>()
        );
        if code.id == "E0006" {
            continue;
        }
        let rendered = human::render(&diagnostics, "workflow.json", &text, false);
        insta::assert_snapshot!(
            code.id,
            format!("--- SOURCE\n{text}\n--- DIAGNOSTICS\n{rendered}")
        );
    }
}

/// Applying a page example's fixes removes the diagnostics they fix and
/// brings in none: what remains is what had no fix.
#[test]
fn every_fix_removes_its_own_diagnostic() {
    let compiler = compiler();
    for code in ALL {
        let (lang, source) = example(code.doc);
        let check = |text: &str| match lang {
            "json" => compiler.check(text).into_sorted(),
            "agent-json" => opcode_compiler::agent::read(text).1.into_sorted(),
            "eval-json" => opcode_compiler::agent::suite::read(text).1.into_sorted(),
            "opc" => compiler.check_as(text, Syntax::Opc).into_sorted(),
            _ => Vec::new(),
        };
        let before = check(source);
        let (fixed, applied) = opcode_compiler::diagnostics::apply_fixes(source, &before);
        if applied == 0 {
            continue;
        }
        let mut left: Vec<&str> = check(&fixed).iter().map(|d| d.code.id).collect();
        let mut unfixed: Vec<&str> = before
            .iter()
            .filter(|d| d.fix.is_none())
            .map(|d| d.code.id)
            .collect();
        left.sort_unstable();
        unfixed.sort_unstable();
        assert_eq!(left, unfixed, "{}: after its fixes:\n{fixed}", code.id);
        if lang == "json" || lang == "agent-json" {
            patches_make_what_edits_make(code.id, source, &before);
        }
    }
}

/// Each fix of a JSON example carries an RFC 6902 patch (unless its text is
/// not JSON), and the `json-patch` crate, applying it to the document as a
/// client would, gets what the fix's text edits give.
fn patches_make_what_edits_make(
    id: &str,
    source: &str,
    diagnostics: &[opcode_compiler::diagnostics::Diagnostic],
) {
    let Ok(document) = serde_json::from_str::<serde_json::Value>(source) else {
        return;
    };
    for diagnostic in diagnostics {
        let Some(fix) = &diagnostic.fix else {
            continue;
        };
        let (edited, _) = opcode_compiler::diagnostics::apply_fixes(source, [diagnostic]);
        let expected: serde_json::Value = serde_json::from_str(&edited)
            .unwrap_or_else(|e| panic!("{id}: the fix's text is not JSON ({e}):\n{edited}"));
        assert!(
            !fix.patch.is_empty(),
            "{id}: a fix without a patch: {}",
            fix.message
        );
        let operations: json_patch::Patch =
            serde_json::from_value(serde_json::to_value(&fix.patch).unwrap()).unwrap();
        let mut patched = document.clone();
        json_patch::patch(&mut patched, &operations)
            .unwrap_or_else(|e| panic!("{id}: the patch does not apply ({e}): {:?}", fix.patch));
        assert_eq!(patched, expected, "{id}: the patch and the edits differ");
    }
}
