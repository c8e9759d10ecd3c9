//! The disassembler: a stable, human-readable listing of a Program.
//!
//! Used by `opcodec disasm` and by the golden tests; every table is shown,
//! with indices as the instructions name them (`s3`, `b1`, `t0`, `e2`, `$4`).

use std::fmt::Write;

use crate::program::{BlockRole, PathSeg, Program, SlotSource, Template, TextPart};

/// Renders the listing.
pub fn listing(program: &Program) -> String {
    let mut out = String::new();
    let h = &program.header;
    let _ = writeln!(
        out,
        "program {:?} format v{} source sha256:{}",
        h.name, h.version, h.source_hash
    );
    let b = &h.bounds;
    let _ = writeln!(
        out,
        "bounds  steps={} slots={} levels={} max_fan_out={} max_depth={}",
        b.steps, b.slots, b.levels, b.max_fan_out, b.max_depth
    );
    let run = &program.run;
    let opt = |v: Option<String>| v.unwrap_or_else(|| "-".into());
    let _ = writeln!(
        out,
        "run     timeout={} on_timeout={} output={} on_complete={} on_error={} defaults={} schema={} context={}",
        opt(run.timeout_ms.map(|ms| format!("{ms}ms"))),
        opt(run.on_timeout.map(|t| t.as_str().to_owned())),
        opt(program.output.map(|t| format!("t{t}"))),
        opt(program.on_complete.map(|b| format!("b{b}"))),
        opt(program.on_error.map(|b| format!("b{b}"))),
        opt(run.input_defaults.map(|c| format!("c{c}"))),
        opt(run.input_schema.map(|c| format!("c{c}"))),
        opt(run.context.map(|c| format!("c{c}"))),
    );
    out.push_str("\nblocks\n");
    for (i, block) in program.blocks.iter().enumerate() {
        let role = match &block.role {
            BlockRole::Root => "root".to_owned(),
            BlockRole::OnComplete => "on_complete".to_owned(),
            BlockRole::OnError => "on_error".to_owned(),
            BlockRole::Branch(key) => format!("branch {key:?}"),
            BlockRole::Default => "default".to_owned(),
            BlockRole::Body => "body".to_owned(),
            BlockRole::Parallel(n) => format!("parallel branch {n}"),
        };
        let owner = block
            .owner
            .map(|o| format!(" of s{o} {}", program.steps[o as usize].id))
            .unwrap_or_default();
        let _ = writeln!(out, "  b{i} {role}{owner}");
        for (level, steps) in block.levels.iter().enumerate() {
            let names: Vec<String> = steps
                .iter()
                .map(|&s| format!("s{s} {}", program.steps[s as usize].id))
                .collect();
            let _ = writeln!(out, "    level {level}: {}", names.join(", "));
        }
        let fallbacks: Vec<String> = block
            .steps
            .iter()
            .filter(|&&s| program.steps[s as usize].fallback_only)
            .map(|&s| format!("s{s} {}", program.steps[s as usize].id))
            .collect();
        if !fallbacks.is_empty() {
            let _ = writeln!(out, "    fallback only: {}", fallbacks.join(", "));
        }
        let leaves: Vec<String> = block.leaves.iter().map(|s| format!("s{s}")).collect();
        let _ = writeln!(
            out,
            "    result: {}",
            if leaves.is_empty() {
                "-".into()
            } else {
                leaves.join(", ")
            }
        );
    }
    out.push_str("\nsteps\n");
    for (i, step) in program.steps.iter().enumerate() {
        let at = program
            .debug
            .steps
            .get(i)
            .map(|p| format!("  @ {}:{}", p.line, p.column))
            .unwrap_or_default();
        let kind = format!("{:?}", step.kind).to_lowercase();
        let _ = writeln!(
            out,
            "  s{i} {} {kind} block=b{} depth={}{at}",
            step.id, step.block, step.loop_depth
        );
        let block = &program.blocks[step.block as usize];
        if let Some(pos) = block.steps.iter().position(|&s| s as usize == i) {
            let deps = &block.deps[pos];
            if !deps.is_empty() {
                let names: Vec<String> = deps.iter().map(|d| format!("s{d}")).collect();
                let _ = writeln!(out, "      after {}", names.join(", "));
            }
        }
        if let Some(r) = &step.retry {
            let _ = writeln!(
                out,
                "      retry max={} {} delay={}ms max_delay={} jitter={}",
                r.max,
                r.backoff,
                r.delay_ms,
                r.max_delay_ms
                    .map_or_else(|| "-".into(), |m| format!("{m}ms")),
                r.jitter
            );
        }
        if let Some(ms) = step.timeout_ms {
            let _ = writeln!(out, "      timeout {ms}ms");
        }
        if let Some(e) = &step.on_error {
            let fallback = e.fallback.map(|f| format!(" s{f}")).unwrap_or_default();
            let _ = writeln!(out, "      on_error {}{fallback}", e.strategy);
        }
        if let Some(c) = step.isolation {
            let _ = writeln!(out, "      isolation c{c}");
        }
        for pc in step.code.clone() {
            if let Some(instr) = program.code.get(pc as usize) {
                let _ = writeln!(out, "      {pc:04}  {instr}");
            }
        }
    }
    if !program.slots.is_empty() {
        out.push_str("\nslots\n");
        for (i, slot) in program.slots.iter().enumerate() {
            let source = match &slot.source {
                SlotSource::Step { step } => format!("step s{step}"),
                SlotSource::Inputs => "inputs".into(),
                SlotSource::Workflow => "workflow".into(),
                SlotSource::Context => "context".into(),
                SlotSource::Secret { name } => format!("secret {name}"),
                SlotSource::LoopItem => "loop item".into(),
                SlotSource::LoopIndex => "loop index".into(),
            };
            let path: String = slot.path.iter().map(segment).collect();
            let _ = writeln!(out, "  ${i} {source}{path}    # {}", slot.text);
        }
    }
    if !program.templates.is_empty() {
        out.push_str("\ntemplates\n");
        for (i, t) in program.templates.iter().enumerate() {
            let _ = writeln!(out, "  t{i} {}", template(t, program));
        }
    }
    if !program.exprs.is_empty() {
        out.push_str("\nexprs\n");
        for (i, e) in program.exprs.iter().enumerate() {
            let reads = if e.all_steps {
                " reads all steps".to_owned()
            } else if e.steps.is_empty() {
                String::new()
            } else {
                let names: Vec<String> = e
                    .steps
                    .iter()
                    .map(|r| {
                        if r.name == program.steps[r.step as usize].id {
                            format!("s{}", r.step)
                        } else {
                            format!("s{} as {:?}", r.step, r.name)
                        }
                    })
                    .collect();
                format!(" reads {}", names.join(", "))
            };
            let _ = writeln!(out, "  e{i} {:?}{reads}", e.source);
        }
    }
    if !program.decisions.is_empty() {
        out.push_str("\ndecisions\n");
        for (i, d) in program.decisions.iter().enumerate() {
            let options: Vec<&str> = d.options.iter().map(|o| o.id.as_str()).collect();
            let inject: Vec<String> = d
                .data_inject
                .iter()
                .map(|(k, t)| format!("{k}=t{t}"))
                .collect();
            let _ = writeln!(
                out,
                "  d{i} options=[{}] timeout={} fallback={} target={} inject=[{}]",
                options.join(", "),
                d.timeout_ms
                    .map_or_else(|| "-".into(), |ms| format!("{ms}ms")),
                d.fallback.as_deref().unwrap_or("-"),
                d.target_agent.as_deref().unwrap_or("-"),
                inject.join(", ")
            );
            if let Some(prompt) = &d.prompt {
                let _ = writeln!(out, "      prompt {prompt:?}");
            }
        }
    }
    if !program.branch_tables.is_empty() {
        out.push_str("\nbranch tables\n");
        for (i, t) in program.branch_tables.iter().enumerate() {
            let entries: Vec<String> = t
                .branches
                .iter()
                .map(|(k, b)| format!("{k:?} => b{b}"))
                .collect();
            let default = t.default.map_or_else(|| "-".into(), |b| format!("b{b}"));
            let _ = writeln!(out, "  bt{i} {{{}}} default={default}", entries.join(", "));
        }
    }
    if !program.consts.is_empty() {
        out.push_str("\nconsts\n");
        for (i, c) in program.consts.iter().enumerate() {
            let _ = writeln!(out, "  c{i} {c}");
        }
    }
    out
}

fn segment(s: &PathSeg) -> String {
    match s {
        PathSeg::Key(k) => format!(".{k}"),
        PathSeg::Index(i) => format!("[{i}]"),
    }
}

fn template(t: &Template, program: &Program) -> String {
    match t {
        Template::Const(c) => program
            .consts
            .get(*c as usize)
            .map_or_else(|| format!("c{c}"), ToString::to_string),
        Template::Slot(s) => format!("${s}"),
        Template::Text(parts) => {
            let mut out = String::from("\"");
            for part in parts {
                match part {
                    TextPart::Text(text) => out.push_str(&text.escape_debug().to_string()),
                    TextPart::Slot(s) => {
                        let _ = write!(out, "{{${s}}}");
                    }
                }
            }
            out.push('"');
            out
        }
        Template::Array(items) => {
            let items: Vec<String> = items.iter().map(|i| template(i, program)).collect();
            format!("[{}]", items.join(", "))
        }
        Template::Object(members) => {
            let members: Vec<String> = members
                .iter()
                .map(|(k, v)| format!("{k:?}: {}", template(v, program)))
                .collect();
            format!("{{{}}}", members.join(", "))
        }
    }
}
