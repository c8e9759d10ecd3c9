//! Code generation: the checked AST becomes a [`Program`].
//!
//! Steps keep the model's numbering (pre-order, hooks last), blocks too
//! (block 0 is the top level). Each block gets its dependencies and levels
//! (longest dependency chain; the VM dispatches ready steps in this order).
//! Each step gets its code: an optional `guard`, then one body instruction.
//! References become slots, literal subtrees constants, CEL sources
//! expressions that list the steps they read.

mod values;

use opcode_vm::instr::{BlockId, ExprId, Instr, StepId};
use opcode_vm::program::{
    Block, Bounds, BranchTable, DebugInfo, Decision, DecisionOption, ErrorPolicy, Expr,
    FORMAT_VERSION, Header, Position, Program, Reads, RetryPolicy, RunSettings, StepInfo,
    StepKind as VmKind, StepRead,
};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use self::values::Values;
use crate::ast::{Document, Expr as AstExpr, Step, StepKind};
use crate::check::Checked;
use crate::check::cel;
use crate::check::expr_lang::{self, Dialect};
use crate::check::model::{BlockRole, Model, StepIdx};
use crate::check::references::resolve_step;
use crate::source::{LineIndex, Span};

/// Generates the Program of a document that checked without errors.
pub fn generate(doc: &Document, checked: &Checked<'_>, src: &str, file: &str) -> Program {
    let mut g = Gen {
        model: &checked.model,
        graph: &checked.graph,
        src,
        values: Values::default(),
        exprs: Vec::new(),
        expr_spans: Vec::new(),
        decisions: Vec::new(),
        branch_tables: Vec::new(),
        code: Vec::new(),
    };
    let steps: Vec<StepInfo> = (0..checked.model.steps.len()).map(|s| g.step(s)).collect();
    let blocks: Vec<Block> = (0..checked.model.blocks.len())
        .map(|b| g.block(b))
        .collect();
    let output = doc
        .workflow
        .output
        .as_ref()
        .map(|t| g.values.template(t, g.model));
    let run = g.run_settings(doc);
    let hook = |role: BlockRole| {
        checked
            .model
            .blocks
            .iter()
            .position(|b| b.role == role)
            .map(|b| b as BlockId)
    };
    let index = LineIndex::new(src);
    let position = |span: Span| {
        let lc = index.line_col(src, span.start as usize);
        Position {
            line: lc.line,
            column: lc.column,
        }
    };
    let debug = DebugInfo {
        file: file.to_owned(),
        steps: checked
            .model
            .steps
            .iter()
            .map(|s| position(s.step.span))
            .collect(),
        slots: g.values.slot_positions(src, &index),
        exprs: g.expr_spans.iter().map(|s| position(*s)).collect(),
    };
    let bounds = Bounds {
        steps: steps.len() as u32,
        slots: g.values.slots.len() as u32,
        levels: blocks.first().map_or(0, |b| b.levels.len() as u32),
        max_fan_out: max_fan_out(&blocks, &g.code),
        max_depth: max_depth(&checked.model),
    };
    let name = doc
        .wrapper
        .as_ref()
        .and_then(|w| w.name.as_ref().map(|n| n.value.clone()))
        .or_else(|| {
            doc.workflow
                .metadata
                .as_ref()
                .and_then(|m| m.value.get("name"))
                .and_then(Value::as_str)
                .map(str::to_owned)
        })
        .unwrap_or_default();
    Program {
        header: Header {
            version: FORMAT_VERSION,
            source_hash: hex(&Sha256::digest(src.as_bytes())),
            name,
            bounds,
        },
        consts: g.values.consts,
        steps,
        blocks,
        slots: g.values.slots,
        templates: g.values.templates,
        exprs: g.exprs,
        decisions: g.decisions,
        branch_tables: g.branch_tables,
        code: g.code,
        output,
        on_complete: hook(BlockRole::OnComplete),
        on_error: hook(BlockRole::OnError),
        run,
        debug,
    }
}

/// A hash of what the Program means: everything but source positions and
/// the source's own hash, so reformatting or converting the source (JSON ⇄
/// `.opc`) keeps it.
pub fn meaning_hash(program: &Program) -> String {
    let mut p = program.clone();
    p.header.source_hash = String::new();
    p.debug = DebugInfo::default();
    let bytes = serde_json::to_vec(&p).unwrap_or_default();
    hex(&Sha256::digest(&bytes))
}

fn hex(bytes: &[u8]) -> String {
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
            use std::fmt::Write;
            let _ = write!(s, "{b:02x}");
            s
        })
}

struct Gen<'m, 'a> {
    model: &'m Model<'a>,
    graph: &'m crate::check::graph::Graph,
    src: &'m str,
    values: Values,
    exprs: Vec<Expr>,
    expr_spans: Vec<Span>,
    decisions: Vec<Decision>,
    branch_tables: Vec<BranchTable>,
    code: Vec<Instr>,
}

impl Gen<'_, '_> {
    /// The block index of child `n` of step `s`.
    fn child(&self, s: StepIdx, n: usize) -> BlockId {
        self.model.steps[s]
            .children
            .get(n)
            .copied()
            .unwrap_or_default() as BlockId
    }

    fn expr(&mut self, e: &AstExpr) -> ExprId {
        let refs = cel::analyze(e, self.src, "");
        self.expr_of(e.source.clone(), e.span, refs.ok())
    }

    /// The expression `source` at `span`, reading what `refs` says (all
    /// of it when they are unknown).
    fn expr_of(&mut self, source: String, span: Span, refs: Option<cel::CelRefs>) -> ExprId {
        let (steps, all_steps, reads) = match refs {
            Some(refs) => {
                let mut reads: Vec<StepRead> = refs
                    .steps
                    .iter()
                    .filter_map(|(name, _)| {
                        resolve_step(self.model, name).map(|s| StepRead {
                            name: name.clone(),
                            step: s as StepId,
                        })
                    })
                    .collect();
                reads.sort_by(|a, b| (a.step, &a.name).cmp(&(b.step, &b.name)));
                reads.dedup();
                (reads, refs.dynamic_steps, refs.reads)
            }
            None => (Vec::new(), true, Reads::ALL),
        };
        self.exprs.push(Expr {
            source,
            steps,
            all_steps,
            reads,
        });
        self.expr_spans.push(span);
        (self.exprs.len() - 1) as ExprId
    }

    fn step(&mut self, s: StepIdx) -> StepInfo {
        let info = &self.model.steps[s];
        let step: &Step = info.step;
        let start = self.code.len() as u32;
        if let Some(guard) = &step.guard {
            let expr = self.expr(guard);
            self.code.push(Instr::Guard { expr });
        }
        let (kind, body) = self.body(s, step);
        self.code.push(body);
        let end = self.code.len() as u32;
        StepInfo {
            id: step.id.value.clone(),
            kind,
            block: info.block as BlockId,
            parent: info.parent.map(|p| p as StepId),
            loop_depth: info.loops.len() as u32,
            code: start..end,
            retry: step.retry.as_ref().map(|r| RetryPolicy {
                max: u32::try_from(r.max.value).unwrap_or(u32::MAX),
                backoff: r.backoff,
                delay_ms: r.delay.as_ref().map_or(0, |d| d.value),
                max_delay_ms: r.max_delay.as_ref().map(|d| d.value),
                jitter: r.jitter,
            }),
            timeout_ms: step.timeout.as_ref().map(|t| t.value),
            on_error: step.on_error.as_ref().map(|e| ErrorPolicy {
                strategy: e.strategy.value,
                fallback: self.graph.fallback[s].map(|f| f as StepId),
            }),
            fallback_only: self.graph.is_fallback_only(s),
            isolation: step
                .isolation
                .as_ref()
                .map(|i| self.values.constant(i.value.clone())),
            rate_limit: step.rate_limit.as_deref().map(concurrency::rate_limit),
        }
    }

    fn body(&mut self, s: StepIdx, step: &Step) -> (VmKind, Instr) {
        match &step.kind {
            StepKind::Action(a) => {
                let language = (a.action.value == "expr.eval")
                    .then(|| crate::check::actions::expr_eval_expression(a))
                    .flatten();
                let params = match (&a.params, &language) {
                    (Some(t), Some((_, dialect))) => self
                        .values
                        .template(&with_language(t, *dialect), self.model),
                    (Some(t), None) => self.values.template(t, self.model),
                    (None, _) => self.values.empty_object(),
                };
                let scope = match a.action.value.as_str() {
                    "expr.eval" => Some(self.expr_eval_scope(a, language)),
                    // `workflow.context` reads the context from its scope.
                    "workflow.context" => Some(self.empty_scope(a.action.span)),
                    _ => None,
                };
                (
                    VmKind::Action,
                    Instr::Call {
                        action: a.action.value.clone(),
                        params,
                        scope,
                    },
                )
            }
            StepKind::Condition(c) => {
                let expr = self.expr(&c.expression);
                let branches = c
                    .branches
                    .iter()
                    .enumerate()
                    .map(|(i, (k, _))| (k.value.clone(), self.child(s, i)))
                    .collect();
                let default = c.default.as_ref().map(|_| self.child(s, c.branches.len()));
                self.branch_tables.push(BranchTable { branches, default });
                let table = (self.branch_tables.len() - 1) as u32;
                (VmKind::Condition, Instr::Branch { expr, table })
            }
            StepKind::Loop(l) => {
                let body = self.child(s, 0);
                let max_iter = l.max_iter.as_ref().map(|m| m.value);
                let instr = match (l.mode.value, &l.over, &l.condition) {
                    (opcode_vm::policy::LoopMode::ForEach, Some(over), _) => Instr::ForEach {
                        over: self.expr(over),
                        body,
                        max_iter,
                    },
                    (mode, _, Some(cond)) => Instr::Repeat {
                        mode,
                        cond: self.expr(cond),
                        body,
                        max_iter,
                    },
                    (mode, over, None) => {
                        // Unreachable after checks (E0011); keep the program well-formed.
                        let cond = self.expr(&AstExpr {
                            source: "false".into(),
                            span: over.as_ref().map_or(step.span, |o| o.span),
                            origin: crate::ast::TextOrigin::Verbatim(0),
                        });
                        Instr::Repeat {
                            mode,
                            cond,
                            body,
                            max_iter,
                        }
                    }
                };
                (VmKind::Loop, instr)
            }
            StepKind::Parallel(p) => (
                VmKind::Parallel,
                Instr::Fork {
                    branches: (0..p.branches.len()).map(|i| self.child(s, i)).collect(),
                    mode: p.mode.value,
                    max_concurrency: p.max_concurrency.as_ref().map(|m| m.value),
                },
            ),
            StepKind::Wait(w) => {
                let instr = match &w.signal {
                    Some(name) => Instr::AwaitSignal {
                        name: name.value.clone(),
                        timeout_ms: w.duration.as_ref().map(|d| d.value),
                    },
                    None => Instr::Sleep {
                        ms: w.duration.as_ref().map_or(0, |d| d.value),
                    },
                };
                (VmKind::Wait, instr)
            }
            StepKind::Reasoning(r) => {
                let data_inject = r
                    .data_inject
                    .iter()
                    .map(|(k, t)| (k.value.clone(), self.values.template(t, self.model)))
                    .collect();
                let prompt_template = r
                    .prompt_template
                    .as_ref()
                    .map(|t| self.values.template(t, self.model));
                let options = r
                    .options
                    .iter()
                    .map(|o| DecisionOption {
                        id: o.id.value.clone(),
                        description: o.description.clone(),
                        description_template: o
                            .description_template
                            .as_ref()
                            .map(|t| self.values.template(t, self.model)),
                    })
                    .collect();
                self.decisions.push(Decision {
                    prompt: r.prompt_context.as_ref().map(|p| p.value.clone()),
                    prompt_template,
                    options,
                    data_inject,
                    timeout_ms: r.timeout.as_ref().map(|t| t.value),
                    fallback: r.fallback.as_ref().map(|f| f.value.clone()),
                    target_agent: r.target_agent.as_ref().map(|t| t.value.clone()),
                });
                let decision = (self.decisions.len() - 1) as u32;
                (VmKind::Reasoning, Instr::Decide { decision })
            }
        }
    }

    /// The variables an `expr.eval` step needs: the steps its literal
    /// expression reads (all of them when the expression is interpolated).
    /// An Expr expression's scope has no CEL source: it is evaluated by
    /// the action, never by the host.
    fn expr_eval_scope(
        &mut self,
        a: &crate::ast::ActionStep,
        literal: Option<(AstExpr, Dialect)>,
    ) -> ExprId {
        match literal {
            Some((expr, Dialect::Cel)) => self.expr(&expr),
            Some((expr, Dialect::Expr)) => {
                let refs = expr_lang::analyze(&expr, self.src, "").ok().map(|a| a.refs);
                self.expr_of(String::new(), expr.span, refs)
            }
            None => self.expr_of(String::new(), a.action.span, None),
        }
    }

    /// A scope with no steps, for an action that reads the context.
    fn empty_scope(&mut self, span: Span) -> ExprId {
        self.exprs.push(Expr {
            source: String::new(),
            steps: Vec::new(),
            all_steps: false,
            reads: Reads {
                context: true,
                ..Reads::NONE
            },
        });
        self.expr_spans.push(span);
        (self.exprs.len() - 1) as ExprId
    }

    fn block(&self, b: usize) -> Block {
        let info = &self.model.blocks[b];
        let steps: Vec<StepId> = info.steps.iter().map(|&s| s as StepId).collect();
        let deps: Vec<Vec<StepId>> = info
            .steps
            .iter()
            .map(|&s| self.graph.deps[s].iter().map(|&d| d as StepId).collect())
            .collect();
        // Level = longest chain of dependencies inside the block (Kahn's
        // algorithm; cycles were reported by the checks and get no level).
        let scheduled: Vec<StepIdx> = info
            .steps
            .iter()
            .copied()
            .filter(|&s| !self.graph.is_fallback_only(s))
            .collect();
        let position: std::collections::HashMap<StepIdx, usize> =
            scheduled.iter().enumerate().map(|(i, &s)| (s, i)).collect();
        let mut indegree: Vec<usize> = vec![0; scheduled.len()];
        let mut dependents: Vec<Vec<usize>> = vec![Vec::new(); scheduled.len()];
        for (i, &s) in scheduled.iter().enumerate() {
            for d in &self.graph.deps[s] {
                if let Some(&p) = position.get(d) {
                    indegree[i] += 1;
                    dependents[p].push(i);
                }
            }
        }
        let mut level: Vec<usize> = vec![0; scheduled.len()];
        let mut placed: Vec<bool> = vec![false; scheduled.len()];
        let mut queue: std::collections::VecDeque<usize> =
            (0..scheduled.len()).filter(|&i| indegree[i] == 0).collect();
        while let Some(p) = queue.pop_front() {
            placed[p] = true;
            for &q in &dependents[p] {
                level[q] = level[q].max(level[p] + 1);
                indegree[q] -= 1;
                if indegree[q] == 0 {
                    queue.push_back(q);
                }
            }
        }
        let depth = (0..scheduled.len())
            .filter(|&i| placed[i])
            .map(|i| level[i] + 1)
            .max()
            .unwrap_or(0);
        let mut levels: Vec<Vec<StepId>> = vec![Vec::new(); depth];
        for (i, &s) in scheduled.iter().enumerate() {
            if placed[i] {
                levels[level[i]].push(s as StepId);
            }
        }
        let depended: Vec<StepIdx> = scheduled
            .iter()
            .flat_map(|&s| self.graph.deps[s].iter().copied())
            .collect();
        let leaves: Vec<StepId> = if info.role == BlockRole::Root {
            scheduled
                .iter()
                .filter(|s| !depended.contains(s))
                .map(|&s| s as StepId)
                .collect()
        } else {
            scheduled
                .last()
                .map(|&s| vec![s as StepId])
                .unwrap_or_default()
        };
        Block {
            role: info.role.clone(),
            owner: info.owner.map(|o| o as StepId),
            steps,
            deps,
            levels,
            leaves,
        }
    }

    fn run_settings(&mut self, doc: &Document) -> RunSettings {
        let schema = doc.wrapper.as_ref().and_then(|w| w.input_schema.as_ref());
        let mut defaults = Map::new();
        if let Some(properties) = schema
            .and_then(|s| s.value.get("properties"))
            .and_then(Value::as_object)
        {
            for (name, property) in properties {
                if let Some(default) = property.get("default") {
                    defaults.insert(name.clone(), default.clone());
                }
            }
        }
        if let Some(inputs) = doc
            .workflow
            .inputs
            .as_ref()
            .and_then(|i| i.value.as_object())
        {
            for (name, value) in inputs {
                defaults.insert(name.clone(), value.clone());
            }
        }
        let input_defaults =
            (!defaults.is_empty()).then(|| self.values.constant(Value::Object(defaults)));
        let input_schema = schema.map(|s| self.values.constant(s.value.clone()));
        let context = doc
            .workflow
            .context
            .as_ref()
            .map(|c| self.values.constant(c.value.clone()));
        RunSettings {
            timeout_ms: doc.workflow.timeout.as_ref().map(|t| t.value),
            on_timeout: doc.workflow.on_timeout.as_ref().map(|t| t.value),
            input_defaults,
            input_schema,
            context,
            concurrency: doc.workflow.concurrency.as_ref().map(concurrency::compile),
        }
    }
}

mod concurrency {
    //! Flow-control blocks (`concurrency`, `rate_limit`) as the VM reads them.

    use opcode_vm::admission::{Concurrency, KeyPart, PathStep, RateLimit};

    use crate::ast::{self, Reference, TemplateKind, TextPart};
    use crate::syntax::template::Segment;

    /// The block, its key as text and paths to read.
    pub(super) fn compile(block: &ast::Concurrency) -> Concurrency {
        Concurrency {
            key: key(block.key.as_ref()),
            limit: block.limit,
            on_limit: block.on_limit,
        }
    }

    /// A step's `rate_limit`.
    pub(super) fn rate_limit(block: &ast::RateLimit) -> RateLimit {
        RateLimit {
            key: key(block.key.as_ref()),
            limit: block.limit,
            per_ms: block.per,
        }
    }

    /// A key as text and paths to read.
    fn key(key: Option<&ast::Template>) -> Vec<KeyPart> {
        match key.map(|k| &k.kind) {
            Some(TemplateKind::Literal(serde_json::Value::String(text))) => {
                vec![KeyPart::Text(text.clone())]
            }
            Some(TemplateKind::Ref(reference)) => vec![read(reference)],
            Some(TemplateKind::Text(parts)) => parts
                .iter()
                .map(|part| match part {
                    TextPart::Text(text) => KeyPart::Text(text.clone()),
                    TextPart::Ref(reference) => read(reference),
                })
                .collect(),
            // No key (one for the template), or not a string (refused when lowered).
            None | Some(_) => Vec::new(),
        }
    }

    fn read(reference: &Reference) -> KeyPart {
        let mut path = vec![PathStep::Key(reference.namespace.value.clone())];
        path.extend(reference.segments.iter().map(|s| match &s.value {
            Segment::Key(name) => PathStep::Key(name.clone()),
            Segment::Index(i) => PathStep::Index(*i),
        }));
        KeyPart::Read(path)
    }
}

fn max_fan_out(blocks: &[Block], code: &[Instr]) -> u32 {
    let widest_level = blocks
        .iter()
        .flat_map(|b| b.levels.iter().map(Vec::len))
        .max()
        .unwrap_or(0);
    let widest_fork = code
        .iter()
        .filter_map(|i| match i {
            Instr::Fork { branches, .. } => Some(branches.len()),
            _ => None,
        })
        .max()
        .unwrap_or(0);
    widest_level.max(widest_fork) as u32
}

fn max_depth(model: &Model<'_>) -> u32 {
    (0..model.steps.len())
        .map(|s| model.path_of(s).len() as u32)
        .max()
        .unwrap_or(0)
}

/// `params` with `language` written in, when it is not given: the runtime
/// then never has to tell the languages apart.
fn with_language(params: &crate::ast::Template, dialect: Dialect) -> crate::ast::Template {
    use crate::ast::{Spanned, Template, TemplateKind};
    let language = Value::String(dialect.name().to_owned());
    let mut params = params.clone();
    match &mut params.kind {
        TemplateKind::Literal(Value::Object(members)) => {
            members.entry("language").or_insert(language);
        }
        TemplateKind::Object(members) if !members.iter().any(|(k, _)| k.value == "language") => {
            members.push((
                Spanned {
                    value: "language".to_owned(),
                    span: params.span,
                },
                Template {
                    span: params.span,
                    kind: TemplateKind::Literal(language),
                },
            ));
        }
        _ => {}
    }
    params
}
