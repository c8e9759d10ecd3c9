//! Diagrams of a compiled workflow: Mermaid flowcharts and plain-text
//! level listings, optionally with each step's status drawn over it.
//!
//! Both read the [`Program`]'s blocks, so nesting (branches, loop bodies,
//! parallel branches, hooks) is drawn as it will run.

use std::collections::HashMap;
use std::fmt::Write as _;

use opcode_vm::instr::Instr;
use opcode_vm::program::{Block, BlockRole, Program, StepKind};

#[cfg(feature = "png")]
pub mod png;
pub mod svg;

/// Each step's status by step id (`completed`, `running`, `failed`…).
pub type Statuses = HashMap<String, String>;

/// The step's one-line label: its id, and what it does.
pub(crate) fn label(program: &Program, step: usize) -> String {
    let info = &program.steps[step];
    let what = match info.kind {
        StepKind::Action => action_of(program, step).unwrap_or("action").to_owned(),
        StepKind::Condition => "condition".into(),
        StepKind::Loop => "loop".into(),
        StepKind::Parallel => "parallel".into(),
        StepKind::Wait => "wait".into(),
        StepKind::Reasoning => "reasoning".into(),
    };
    format!("{} ({what})", info.id)
}

fn action_of(program: &Program, step: usize) -> Option<&str> {
    let code = &program.steps[step].code;
    program.code[code.start as usize..code.end as usize]
        .iter()
        .find_map(|instr| match instr {
            Instr::Call { action, .. } => Some(action.as_str()),
            _ => None,
        })
}

pub(crate) fn role_name(role: &BlockRole) -> String {
    match role {
        BlockRole::Root => "steps".into(),
        BlockRole::OnComplete => "on_complete".into(),
        BlockRole::OnError => "on_error".into(),
        BlockRole::Branch(key) => format!("when {key}"),
        BlockRole::Default => "default".into(),
        BlockRole::Body => "body".into(),
        BlockRole::Parallel(i) => format!("branch {}", i + 1),
    }
}

/// The blocks owned by `step` (or the top-level hooks when `None`).
pub(crate) fn blocks_of(
    program: &Program,
    owner: Option<u32>,
) -> impl Iterator<Item = (usize, &Block)> {
    program
        .blocks
        .iter()
        .enumerate()
        .filter(move |(i, b)| *i != 0 && b.owner == owner)
}

/// A Mermaid `flowchart` of the workflow.
pub fn mermaid(program: &Program, statuses: Option<&Statuses>) -> String {
    let mut out = String::from("flowchart TD\n");
    mermaid_block(program, 0, &mut out, 1, statuses);
    for (i, block) in blocks_of(program, None) {
        subgraph(program, i, block, &mut out, 1, statuses);
    }
    if let Some(statuses) = statuses {
        let mut used: Vec<&str> = statuses.values().map(String::as_str).collect();
        used.sort_unstable();
        used.dedup();
        for status in used {
            let (fill, stroke) = colours(status);
            let _ = writeln!(
                out,
                "  classDef {} fill:{fill},stroke:{stroke}",
                class_name(status)
            );
        }
    }
    out
}

fn mermaid_block(
    program: &Program,
    block: usize,
    out: &mut String,
    depth: usize,
    statuses: Option<&Statuses>,
) {
    let pad = "  ".repeat(depth);
    let b = &program.blocks[block];
    for (k, &step) in b.steps.iter().enumerate() {
        let s = step as usize;
        let id = &program.steps[s].id;
        let text = escape(&label(program, s));
        let status = statuses.and_then(|m| m.get(id));
        let shape = match program.steps[s].kind {
            StepKind::Condition => format!("{{\"{text}\"}}"),
            StepKind::Reasoning => format!("[/\"{text}\"/]"),
            _ => format!("[\"{text}\"]"),
        };
        let class = status.map_or_else(String::new, |st| format!(":::{}", class_name(st)));
        let _ = writeln!(out, "{pad}n{s}{shape}{class}");
        for &dep in &b.deps[k] {
            let _ = writeln!(out, "{pad}n{dep} --> n{s}");
        }
        for (i, child) in blocks_of(program, Some(step)) {
            subgraph(program, i, child, out, depth, statuses);
            let _ = writeln!(out, "{pad}n{s} -.-> b{i}");
        }
    }
}

fn subgraph(
    program: &Program,
    index: usize,
    block: &Block,
    out: &mut String,
    depth: usize,
    statuses: Option<&Statuses>,
) {
    let pad = "  ".repeat(depth);
    let title = match block.owner {
        Some(owner) => format!(
            "{}: {}",
            program.steps[owner as usize].id,
            role_name(&block.role)
        ),
        None => role_name(&block.role),
    };
    let _ = writeln!(out, "{pad}subgraph b{index}[\"{}\"]", escape(&title));
    mermaid_block(program, index, out, depth + 1, statuses);
    let _ = writeln!(out, "{pad}end");
}

/// Mermaid label text: quotes and markup characters as entities.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '"' => out.push_str("#quot;"),
            '<' => out.push_str("#lt;"),
            '>' => out.push_str("#gt;"),
            '#' => out.push_str("#35;"),
            '&' => out.push_str("#amp;"),
            '\n' | '\r' => out.push(' '),
            _ => out.push(c),
        }
    }
    out
}

fn class_name(status: &str) -> String {
    let clean: String = status
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    format!("st_{clean}")
}

pub(crate) fn colours(status: &str) -> (&'static str, &'static str) {
    match status {
        "completed" => ("#d4edda", "#28a745"),
        "running" | "retrying" => ("#cce5ff", "#004085"),
        "failed" => ("#f8d7da", "#dc3545"),
        "suspended" => ("#fff3cd", "#ffc107"),
        "skipped" | "cancelled" => ("#e2e3e5", "#6c757d"),
        _ => ("#ffffff", "#999999"),
    }
}

/// A plain-text diagram: each block's steps level by level, with what
/// each waits for, nested blocks indented under their step.
pub fn ascii(program: &Program, statuses: Option<&Statuses>) -> String {
    let mut out = String::new();
    let name = if program.header.name.is_empty() {
        "workflow"
    } else {
        &program.header.name
    };
    let _ = writeln!(out, "{name}");
    ascii_block(program, 0, &mut out, 1, statuses);
    for (i, _) in blocks_of(program, None) {
        let _ = writeln!(out, "  [{}]", role_name(&program.blocks[i].role));
        ascii_block(program, i, &mut out, 2, statuses);
    }
    out
}

fn ascii_block(
    program: &Program,
    block: usize,
    out: &mut String,
    depth: usize,
    statuses: Option<&Statuses>,
) {
    let pad = "  ".repeat(depth);
    let b = &program.blocks[block];
    for (level, steps) in b.levels.iter().enumerate() {
        let _ = writeln!(out, "{pad}level {}", level + 1);
        for &step in steps {
            let s = step as usize;
            let id = &program.steps[s].id;
            let k = b.steps.iter().position(|&x| x == step).unwrap_or(0);
            let mut line = format!("{pad}  - {}", label(program, s));
            if let Some(status) = statuses.and_then(|m| m.get(id)) {
                let _ = write!(line, " [{status}]");
            }
            let deps: Vec<&str> = b.deps[k]
                .iter()
                .map(|&d| program.steps[d as usize].id.as_str())
                .collect();
            if !deps.is_empty() {
                let _ = write!(line, " <- {}", deps.join(", "));
            }
            let _ = writeln!(out, "{line}");
            for (i, child) in blocks_of(program, Some(step)) {
                let _ = writeln!(out, "{pad}    [{}]", role_name(&child.role));
                ascii_block(program, i, out, depth + 3, statuses);
            }
        }
    }
    let fallbacks: Vec<&str> = b
        .steps
        .iter()
        .filter(|&&s| program.steps[s as usize].fallback_only)
        .map(|&s| program.steps[s as usize].id.as_str())
        .collect();
    if !fallbacks.is_empty() {
        let _ = writeln!(out, "{pad}fallbacks: {}", fallbacks.join(", "));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn compile(src: &str) -> Program {
        let compiler = crate::Compiler::new();
        let (program, diagnostics) = compiler.compile(src, "t.json");
        program.unwrap_or_else(|| panic!("{diagnostics:?}"))
    }

    const NESTED: &str = r#"{"name": "n", "steps": [
        {"id": "a", "type": "wait", "config": {"duration": "1s"}},
        {"id": "each", "type": "loop", "depends_on": ["a"],
         "config": {"mode": "for_each", "over": "[1, 2]", "body": [
            {"id": "inner", "type": "wait", "config": {"duration": "1s"}}]}}
    ]}"#;

    #[test]
    fn mermaid_draws_edges_and_clusters() {
        let text = mermaid(&compile(NESTED), None);
        assert!(text.starts_with("flowchart TD\n"), "{text}");
        assert!(text.contains("n0 --> n1"), "{text}");
        assert!(text.contains("subgraph"), "{text}");
        assert!(text.contains("inner (wait)"), "{text}");
    }

    #[test]
    fn status_overlay_marks_steps() {
        let statuses = Statuses::from([("a".to_owned(), "completed".to_owned())]);
        let program = compile(NESTED);
        let text = mermaid(&program, Some(&statuses));
        assert!(text.contains(":::st_completed"), "{text}");
        assert!(text.contains("classDef st_completed"), "{text}");
        let plain = ascii(&program, Some(&statuses));
        assert!(plain.contains("a (wait) [completed]"), "{plain}");
        assert!(plain.contains("each (loop) <- a"), "{plain}");
    }

    #[test]
    fn labels_are_escaped() {
        assert_eq!(escape(r#"say "hi" <b>"#), "say #quot;hi#quot; #lt;b#gt;");
    }
}
