//! An SVG drawing of a workflow: each block's steps in rows by level,
//! arrows from what a step waits for, nested blocks (branches, loop
//! bodies, parallel branches) as titled clusters inside their step, hooks
//! beside the main block, and each step filled by its status when given.

use std::fmt::Write as _;

use opcode_vm::program::{Program, StepKind};

use super::{Statuses, blocks_of, colours, label, role_name};

/// The font family asked for (rasterizers map it to an installed one).
pub const FONT_FAMILY: &str = "DejaVu Sans, Verdana, sans-serif";
const FONT_SIZE: f64 = 13.0;
/// Width of an average character at [`FONT_SIZE`].
const CHAR_W: f64 = 7.6;
const PAD: f64 = 10.0;
const NODE_H: f64 = 34.0;
const GAP_X: f64 = 24.0;
const GAP_Y: f64 = 34.0;
const TITLE_H: f64 = 22.0;

fn text_w(text: &str) -> f64 {
    text.chars().count() as f64 * CHAR_W
}

/// A block's size, its rows of steps.
struct BlockBox {
    rows: Vec<Vec<StepBox>>,
    w: f64,
    h: f64,
}

/// A step's size, and its nested blocks.
struct StepBox {
    step: usize,
    w: f64,
    h: f64,
    clusters: Vec<Cluster>,
}

/// A titled nested block.
struct Cluster {
    title: String,
    block: BlockBox,
    w: f64,
    h: f64,
}

fn block_box(program: &Program, block: usize) -> BlockBox {
    let b = &program.blocks[block];
    let mut rows: Vec<Vec<StepBox>> = b
        .levels
        .iter()
        .map(|level| {
            level
                .iter()
                .map(|&s| step_box(program, s as usize))
                .collect()
        })
        .collect();
    // Steps outside the levels (fallback steps, run only on a failure)
    // go in a last row.
    let fallbacks: Vec<StepBox> = b
        .steps
        .iter()
        .filter(|s| !b.levels.iter().any(|level| level.contains(s)))
        .map(|&s| step_box(program, s as usize))
        .collect();
    if !fallbacks.is_empty() {
        rows.push(fallbacks);
    }
    let row_w = |row: &Vec<StepBox>| {
        row.iter().map(|s| s.w).sum::<f64>() + GAP_X * (row.len().saturating_sub(1)) as f64
    };
    let w = rows.iter().map(row_w).fold(0.0, f64::max);
    let h = rows
        .iter()
        .map(|row| row.iter().map(|s| s.h).fold(0.0, f64::max))
        .sum::<f64>()
        + GAP_Y * (rows.len().saturating_sub(1)) as f64;
    BlockBox { rows, w, h }
}

fn cluster(title: String, block: BlockBox) -> Cluster {
    let w = block.w.max(text_w(&title)) + 2.0 * PAD;
    let h = TITLE_H + block.h + 2.0 * PAD;
    Cluster { title, block, w, h }
}

fn step_box(program: &Program, step: usize) -> StepBox {
    let label_w = text_w(&label(program, step)) + 2.0 * PAD;
    let clusters: Vec<Cluster> = blocks_of(program, Some(step as u32))
        .map(|(i, b)| cluster(role_name(&b.role), block_box(program, i)))
        .collect();
    if clusters.is_empty() {
        return StepBox {
            step,
            w: label_w,
            h: NODE_H,
            clusters,
        };
    }
    let inner_w = clusters.iter().map(|c| c.w).sum::<f64>() + GAP_X * (clusters.len() - 1) as f64;
    let inner_h = clusters.iter().map(|c| c.h).fold(0.0, f64::max);
    StepBox {
        step,
        w: label_w.max(inner_w + 2.0 * PAD),
        h: NODE_H + inner_h + PAD,
        clusters,
    }
}

/// An SVG drawing of `program`, statuses drawn over it when given.
pub fn svg(program: &Program, statuses: Option<&Statuses>) -> String {
    let title = if program.header.name.is_empty() {
        "workflow"
    } else {
        &program.header.name
    };
    let main = cluster("steps".into(), block_box(program, 0));
    let hooks: Vec<Cluster> = blocks_of(program, None)
        .map(|(i, b)| cluster(role_name(&b.role), block_box(program, i)))
        .collect();
    let clusters: Vec<&Cluster> = std::iter::once(&main).chain(&hooks).collect();
    let margin = 16.0;
    let width = clusters.iter().map(|c| c.w).sum::<f64>()
        + GAP_X * (clusters.len() - 1) as f64
        + 2.0 * margin;
    let height = clusters.iter().map(|c| c.h).fold(0.0, f64::max) + TITLE_H + 2.0 * margin;
    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0}" height="{height:.0}" viewBox="0 0 {width:.0} {height:.0}" font-family="{FONT_FAMILY}" font-size="{FONT_SIZE}">"#
    );
    out.push_str(concat!(
        r#"<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse">"#,
        r##"<path d="M 0 0 L 10 5 L 0 10 z" fill="#555"/></marker></defs>"##,
        "\n"
    ));
    let _ = writeln!(
        out,
        r##"<rect width="100%" height="100%" fill="#ffffff"/>"##
    );
    let _ = writeln!(
        out,
        r##"<text x="{margin}" y="{:.1}" font-weight="bold" fill="#222">{}</text>"##,
        margin + 14.0,
        xml(title)
    );
    let mut drawer = Drawer {
        program,
        statuses,
        out,
    };
    let mut x = margin;
    for c in clusters {
        drawer.cluster(c, x, margin + TITLE_H);
        x += c.w + GAP_X;
    }
    drawer.out.push_str("</svg>\n");
    drawer.out
}

struct Drawer<'p> {
    program: &'p Program,
    statuses: Option<&'p Statuses>,
    out: String,
}

impl Drawer<'_> {
    fn cluster(&mut self, c: &Cluster, x: f64, y: f64) {
        let _ = writeln!(
            self.out,
            r##"<rect x="{x:.1}" y="{y:.1}" width="{:.1}" height="{:.1}" rx="6" fill="#f6f8fa" stroke="#b0b7c3" stroke-dasharray="4 3"/>"##,
            c.w, c.h
        );
        let _ = writeln!(
            self.out,
            r##"<text x="{:.1}" y="{:.1}" fill="#57606a" font-size="11">{}</text>"##,
            x + PAD,
            y + 15.0,
            xml(&c.title)
        );
        let inner_x = x + (c.w - c.block.w) / 2.0;
        self.block(&c.block, inner_x, y + TITLE_H + PAD);
    }

    fn block(&mut self, b: &BlockBox, x: f64, y: f64) {
        // Where each step's box is, to draw the arrows after the boxes.
        let mut placed: Vec<(usize, f64, f64, f64, f64)> = Vec::new();
        let mut row_y = y;
        for row in &b.rows {
            let row_w =
                row.iter().map(|s| s.w).sum::<f64>() + GAP_X * (row.len().saturating_sub(1)) as f64;
            let row_h = row.iter().map(|s| s.h).fold(0.0, f64::max);
            let mut step_x = x + (b.w - row_w) / 2.0;
            for s in row {
                self.step(s, step_x, row_y);
                placed.push((s.step, step_x, row_y, s.w, s.h));
                step_x += s.w + GAP_X;
            }
            row_y += row_h + GAP_Y;
        }
        let program = self.program;
        for &(step, x, y, w, _) in &placed {
            let block = program
                .blocks
                .iter()
                .find(|bl| bl.steps.contains(&(step as u32)));
            let Some(block) = block else { continue };
            let k = block
                .steps
                .iter()
                .position(|&s| s as usize == step)
                .unwrap_or(0);
            for &dep in &block.deps[k] {
                if let Some(&(_, dx, dy, dw, dh)) = placed.iter().find(|p| p.0 == dep as usize) {
                    let _ = writeln!(
                        self.out,
                        r##"<line x1="{:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="#555" stroke-width="1.3" marker-end="url(#arrow)"/>"##,
                        dx + dw / 2.0,
                        dy + dh,
                        x + w / 2.0,
                        y - 1.0
                    );
                }
            }
        }
    }

    fn step(&mut self, s: &StepBox, x: f64, y: f64) {
        let info = &self.program.steps[s.step];
        let status = self.statuses.and_then(|m| m.get(&info.id));
        let (fill, stroke) = status.map_or(("#ffffff", "#4a5568"), |st| colours(st));
        let radius = match info.kind {
            StepKind::Action => 4,
            _ => 12,
        };
        let _ = writeln!(
            self.out,
            r#"<g><title>{}</title><rect x="{x:.1}" y="{y:.1}" width="{:.1}" height="{:.1}" rx="{radius}" fill="{fill}" stroke="{stroke}" stroke-width="1.5"/>"#,
            xml(&status.map_or_else(|| info.id.clone(), |st| format!("{}: {st}", info.id))),
            s.w,
            s.h
        );
        let _ = writeln!(
            self.out,
            r##"<text x="{:.1}" y="{:.1}" text-anchor="middle" fill="#1a202c">{}</text></g>"##,
            x + s.w / 2.0,
            y + NODE_H / 2.0 + 4.5,
            xml(&label(self.program, s.step))
        );
        let mut cx = x + PAD;
        for c in &s.clusters {
            self.cluster(c, cx, y + NODE_H);
            cx += c.w + GAP_X;
        }
    }
}

/// XML text and attribute values: markup characters as entities, and the
/// control characters XML 1.0 cannot hold at all left out (a name or a
/// message may have them; the document must still parse).
pub fn xml(text: &str) -> String {
    text.chars()
        .filter(|c| !c.is_control() || matches!(c, '\n' | '\t' | '\r'))
        .collect::<String>()
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Compiler;

    #[test]
    fn draws_every_step_and_nested_blocks_as_clusters() {
        let src = r#"{"name": "x<y>\u0001", "definition": {"steps": [
            {"id": "a", "action": "crypto.uuid"},
            {"id": "l", "type": "loop", "depends_on": ["a"], "config": {"over": "[1, 2]", "body": [
                {"id": "inner", "action": "workflow.log"}]}}]}}"#;
        let compiler = Compiler::new().with_actions([
            opcode_vm::catalog::ActionSpec {
                name: "crypto.uuid".into(),
                doc: String::new(),
                params: Vec::new(),
                open_params: false,
                output: opcode_vm::catalog::Ty::Any,
                placement: opcode_vm::catalog::Placement::Dispatched,
                reads_only: false,
            },
            opcode_vm::catalog::ActionSpec {
                name: "workflow.log".into(),
                doc: String::new(),
                params: Vec::new(),
                open_params: true,
                output: opcode_vm::catalog::Ty::Any,
                placement: opcode_vm::catalog::Placement::Dispatched,
                reads_only: false,
            },
        ]);
        let (program, diagnostics) = compiler.compile(src, "w.json");
        let program = program.unwrap_or_else(|| panic!("{diagnostics:?}"));
        let mut statuses = Statuses::new();
        statuses.insert("a".into(), "completed".into());
        let drawing = svg(&program, Some(&statuses));
        assert!(drawing.starts_with("<svg"));
        assert!(drawing.contains("a (crypto.uuid)") && drawing.contains("l (loop)"));
        assert!(drawing.contains("inner (workflow.log)"));
        assert!(drawing.contains("x&lt;y&gt;"), "text is escaped");
        assert!(
            !drawing.contains('\u{1}'),
            "no control character XML cannot hold"
        );
        assert!(
            drawing.contains(">body<"),
            "the loop body is a titled cluster"
        );
        assert!(drawing.contains("#d4edda"), "the completed step is filled");
        assert_eq!(
            drawing.matches("marker-end").count(),
            1,
            "one dependency arrow"
        );
    }
}
