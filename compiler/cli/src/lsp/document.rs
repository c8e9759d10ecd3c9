//! An open document: its text, its syntax, and what the compiler made of
//! it (diagnostics, the index editors navigate by).

use std::path::Path;

use opcode_compiler::diagnostics::{Diagnostic, Diagnostics};
use opcode_compiler::index::Index;
use opcode_compiler::{Compiler, Syntax};

use super::position::Lines;

/// One document.
pub struct Document {
    /// The text.
    pub text: String,
    /// Its lines.
    pub lines: Lines,
    /// `.opc`, or JSON.
    pub syntax: Syntax,
    /// The compiler's findings, when the document is a workflow.
    pub analysis: Option<Analysis>,
    /// The text a kept (stale) index was built from.
    stale_text: Option<String>,
}

/// What the compiler found.
pub struct Analysis {
    /// Every diagnostic, sorted.
    pub diagnostics: Vec<Diagnostic>,
    /// Steps, uses of step ids, references (when the document could be read).
    pub index: Option<Index>,
    /// The input names of the workflow, with their schema.
    pub inputs: Vec<(String, serde_json::Value)>,
}

impl Document {
    /// Reads and analyses `text`, named `uri`; `file` is the file it is,
    /// when the URI names one (a workflow test file finds its workflow from
    /// there).
    pub fn new(uri: &str, file: Option<&Path>, text: String, compiler: &Compiler) -> Document {
        let syntax = Syntax::of_file(uri);
        let test_file = file.filter(|_| uri.ends_with(".test.json"));
        let analysis = if let Some(path) = test_file {
            Some(Analysis {
                diagnostics: crate::test::lint::lint(path, &text, compiler),
                index: None,
                inputs: Vec::new(),
            })
        } else if let Some(found) = opcode_compiler::agent::diagnose(uri, &text) {
            Some(Analysis {
                diagnostics: found.into_sorted(),
                index: None,
                inputs: Vec::new(),
            })
        } else {
            is_workflow(&text, syntax).then(|| analyse(&text, syntax, compiler))
        };
        Document {
            lines: Lines::new(&text),
            text,
            syntax,
            analysis,
            stale_text: None,
        }
    }

    /// Where byte `offset` of the text was in the text the index was built
    /// from (the same unless the index is a kept, stale one): offsets after
    /// the edited region shift back, offsets inside it map to its start.
    pub fn index_offset(&self, offset: usize) -> usize {
        let Some(old) = &self.stale_text else {
            return offset;
        };
        let new = self.text.as_bytes();
        let prefix = new
            .iter()
            .zip(old.as_bytes())
            .take_while(|(a, b)| a == b)
            .count();
        if offset <= prefix {
            return offset;
        }
        let longest = new.len().min(old.len()) - prefix;
        let suffix = new
            .iter()
            .rev()
            .zip(old.as_bytes().iter().rev())
            .take(longest)
            .take_while(|(a, b)| a == b)
            .count();
        let new_edit_end = new.len() - suffix;
        if offset < new_edit_end {
            prefix
        } else {
            offset - new_edit_end + (old.len() - suffix)
        }
    }

    /// Keeps `old`'s index (and inputs) when this text could not be read.
    pub fn keep_index_of(&mut self, old: Document) {
        let Some(analysis) = self.analysis.as_mut() else {
            return;
        };
        if analysis.index.is_none()
            && let Some(previous) = old.analysis
            && previous.index.is_some()
        {
            analysis.index = previous.index;
            analysis.inputs = previous.inputs;
            self.stale_text = Some(old.stale_text.unwrap_or(old.text));
        }
    }

    /// The index, if any.
    pub fn index(&self) -> Option<&Index> {
        self.analysis.as_ref()?.index.as_ref()
    }
}

/// Is the text a workflow? Every `.opc` file; a JSON document whose top
/// level has `steps`, or a wrapper's `definition`, whatever its name.
pub fn is_workflow(text: &str, syntax: Syntax) -> bool {
    match syntax {
        Syntax::Opc => true,
        Syntax::Json => {
            let mut sink = Diagnostics::new();
            match opcode_compiler::syntax::json::parse(text, &mut sink) {
                Some(node) => node.get("steps").is_some() || node.get("definition").is_some(),
                // Unreadable JSON: a workflow if it says so early on.
                None => text.contains("\"steps\"") || text.contains("\"definition\""),
            }
        }
    }
}

fn analyse(text: &str, syntax: Syntax, compiler: &Compiler) -> Analysis {
    let mut sink = Diagnostics::new();
    let doc = compiler.parse_as(text, syntax, &mut sink);
    let index = doc.as_ref().map(|d| Index::new(d, text));
    let inputs = doc.as_ref().map(inputs_of).unwrap_or_default();
    if let Some(doc) = &doc {
        opcode_compiler::check::check(doc, compiler.catalog(), text, &mut sink);
    }
    Analysis {
        diagnostics: sink.into_sorted(),
        index,
        inputs,
    }
}

fn inputs_of(doc: &opcode_compiler::ast::Document) -> Vec<(String, serde_json::Value)> {
    let mut out = Vec::new();
    if let Some(schema) = doc.wrapper.as_ref().and_then(|w| w.input_schema.as_ref())
        && let Some(props) = schema.value.get("properties").and_then(|p| p.as_object())
    {
        out.extend(props.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
    if let Some(defaults) = doc
        .workflow
        .inputs
        .as_ref()
        .and_then(|i| i.value.as_object())
    {
        for (k, v) in defaults {
            if !out.iter().any(|(name, _)| name == k) {
                out.push((k.clone(), serde_json::json!({"default": v})));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stale_index_maps_offsets_around_the_edit() {
        let compiler = crate::check::compiler();
        let good =
            r#"{"steps": [{"id": "a", "action": "workflow.log", "params": {"message": "x"}}]}"#;
        let old = Document::new("w.json", None, good.to_owned(), &compiler);
        let typing = good.replace(r#""x"}"#, r#""x", }"#);
        let mut doc = Document::new("w.json", None, typing.clone(), &compiler);
        assert!(doc.index().is_none(), "the edited text does not parse");
        doc.keep_index_of(old);
        assert!(doc.index().is_some());
        let cursor = typing.find(", }").unwrap() + 2;
        assert_eq!(doc.index_offset(cursor), good.find("\"x\"}").unwrap() + 3);
        assert_eq!(doc.index_offset(3), 3);
        assert_eq!(doc.index_offset(typing.len()), good.len());
    }

    #[test]
    fn an_agent_definition_gets_its_own_diagnostics() {
        let compiler = crate::check::compiler();
        let text = r#"{"name": "db", "version": "1.2", "role": "scout"}"#;
        let doc = Document::new("file:///a/db.agent.json", None, text.to_owned(), &compiler);
        let analysis = doc.analysis.expect("analysed");
        let codes: Vec<&str> = analysis.diagnostics.iter().map(|d| d.code.id).collect();
        assert_eq!(codes, ["E0065"]);
    }
}
