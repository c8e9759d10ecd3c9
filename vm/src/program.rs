//! The Program: a compiled workflow, versioned and serializable.
//!
//! A Program is what the compiler produces and what every run of a workflow
//! executes, for months: it is stored with each run, so it carries a magic
//! number and a format version, and loading checks both and every index
//! before the VM touches it (an old or damaged program is rejected, never
//! misread). `${{…}}` references are resolved into [`Slot`]s at compile
//! time; nothing is looked up by name at run time.
//!
//! On disk: 8 bytes of magic, the format version as a little-endian `u16`,
//! then the JSON body.

use std::ops::Range;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::instr::{BlockId, ConstId, Instr, SlotId, StepId, TemplateId};
use crate::policy::{Backoff, OnTimeout, Strategy};

/// The first bytes of a serialized Program.
pub const MAGIC: [u8; 8] = *b"OPCODEPG";

/// The format version this build reads and writes.
pub const FORMAT_VERSION: u16 = 1;

/// A compiled workflow.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Program {
    /// Identity and bounds.
    pub header: Header,
    /// Constant values (literal JSON subtrees of params and outputs).
    pub consts: Vec<Value>,
    /// Every step, in pre-order (a step before the steps nested in it).
    pub steps: Vec<StepInfo>,
    /// Every block; block 0 is the top level.
    pub blocks: Vec<Block>,
    /// Every `${{…}}` reference, resolved.
    pub slots: Vec<Slot>,
    /// JSON templates with slots (params, outputs, data_inject).
    pub templates: Vec<Template>,
    /// CEL expressions.
    pub exprs: Vec<Expr>,
    /// Reasoning steps' decisions.
    pub decisions: Vec<Decision>,
    /// Condition steps' branch tables.
    pub branch_tables: Vec<BranchTable>,
    /// The code: each step's instructions, at [`StepInfo::code`].
    pub code: Vec<Instr>,
    /// The run's declared output, if any (else the leaf steps' outputs).
    pub output: Option<TemplateId>,
    /// The `on_complete` hook's block.
    pub on_complete: Option<BlockId>,
    /// The `on_error` hook's block.
    pub on_error: Option<BlockId>,
    /// Run-wide settings.
    pub run: RunSettings,
    /// Source positions, for error messages.
    pub debug: DebugInfo,
}

/// Identity and resource bounds, computed at compile time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Header {
    /// The format version the program was written with.
    pub version: u16,
    /// SHA-256 of the source text, hex.
    pub source_hash: String,
    /// The workflow's name (wrapper `name`, or `metadata.name`, or empty).
    pub name: String,
    /// Sizes the VM can allocate for up front.
    pub bounds: Bounds,
}

/// Sizes of the program.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bounds {
    /// Number of steps.
    pub steps: u32,
    /// Number of slots.
    pub slots: u32,
    /// Number of levels of the top-level block.
    pub levels: u32,
    /// Most steps in one level of any block, or branches of a parallel step.
    pub max_fan_out: u32,
    /// Deepest nesting of flow steps.
    pub max_depth: u32,
}

/// Settings that apply to the whole run.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct RunSettings {
    /// Run deadline, in milliseconds.
    pub timeout_ms: Option<u64>,
    /// What the deadline does.
    pub on_timeout: Option<OnTimeout>,
    /// Default input values (`input_schema` defaults, then `inputs`).
    pub input_defaults: Option<ConstId>,
    /// The `input_schema`, to validate run inputs.
    pub input_schema: Option<ConstId>,
    /// The initial `context` namespace.
    pub context: Option<ConstId>,
    /// Run admission by concurrency key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<crate::admission::Concurrency>,
}

/// What kind of step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepKind {
    /// `action`
    Action,
    /// `condition`
    Condition,
    /// `loop`
    Loop,
    /// `parallel`
    Parallel,
    /// `wait`
    Wait,
    /// `reasoning`
    Reasoning,
}

/// A retry policy, as compiled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RetryPolicy {
    /// Retries after the first attempt.
    pub max: u32,
    /// Delay growth.
    pub backoff: Backoff,
    /// Base delay, milliseconds.
    pub delay_ms: u64,
    /// Cap on the delay, milliseconds.
    pub max_delay_ms: Option<u64>,
    /// Spread delays by up to ±25%, derived from the idempotency key.
    pub jitter: bool,
}

/// What a step's failure does, as compiled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorPolicy {
    /// The strategy.
    pub strategy: Strategy,
    /// The fallback step, for `fallback_step`.
    pub fallback: Option<StepId>,
}

/// One row of the step table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepInfo {
    /// The step's id.
    pub id: String,
    /// What kind of step.
    pub kind: StepKind,
    /// The block it belongs to.
    pub block: BlockId,
    /// The step whose block this is (`None` at the top level and in hooks).
    pub parent: Option<StepId>,
    /// Number of enclosing loops.
    pub loop_depth: u32,
    /// Its instructions in [`Program::code`].
    pub code: Range<u32>,
    /// Retry policy.
    pub retry: Option<RetryPolicy>,
    /// Per-attempt deadline, milliseconds.
    pub timeout_ms: Option<u64>,
    /// What failure does (absent: fail).
    pub on_error: Option<ErrorPolicy>,
    /// Does it run only as another step's fallback?
    pub fallback_only: bool,
    /// The step's `isolation` settings, passed to the runtime.
    pub isolation: Option<ConstId>,
    /// How many of its calls may start in a window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_limit: Option<crate::admission::RateLimit>,
}

/// What a block is for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "role", content = "key", rename_all = "snake_case")]
pub enum BlockRole {
    /// The top-level steps.
    Root,
    /// The `on_complete` hook.
    OnComplete,
    /// The `on_error` hook.
    OnError,
    /// A condition branch.
    Branch(String),
    /// A condition's default branch.
    Default,
    /// A loop body.
    Body,
    /// A parallel branch.
    Parallel(u32),
}

/// A list of steps and how they are scheduled.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Block {
    /// What it is for.
    pub role: BlockRole,
    /// The step that owns it.
    pub owner: Option<StepId>,
    /// Its steps, in source order (fallback-only steps included).
    pub steps: Vec<StepId>,
    /// For each entry of `steps`, the steps of this block it waits for.
    pub deps: Vec<Vec<StepId>>,
    /// Scheduled steps grouped by level (longest dependency chain); the
    /// order in which ready steps are dispatched.
    pub levels: Vec<Vec<StepId>>,
    /// The steps no other step of the block depends on (the block's result:
    /// the last one for nested blocks, all of them for the top level).
    pub leaves: Vec<StepId>,
}

/// Where a slot reads from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "ns", rename_all = "snake_case")]
pub enum SlotSource {
    /// A step's output (the instance of the reader's iteration).
    Step {
        /// The step.
        step: StepId,
    },
    /// The run's inputs.
    Inputs,
    /// A fact about the run (`workflow.<field>`).
    Workflow,
    /// The context namespace.
    Context,
    /// A vault secret, resolved by the runtime at dispatch.
    Secret {
        /// The secret's name.
        name: String,
    },
    /// The innermost loop's current item.
    LoopItem,
    /// The innermost loop's current index.
    LoopIndex,
}

/// One path segment.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(untagged)]
pub enum PathSeg {
    /// An object member (or an array index written as a name, `.0`).
    Key(String),
    /// An array index.
    Index(u64),
}

/// A resolved `${{…}}` reference.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Slot {
    /// Where it reads from.
    pub source: SlotSource,
    /// The path inside that value.
    pub path: Vec<PathSeg>,
    /// The reference as written, for messages.
    pub text: String,
}

/// A JSON value with slots.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "t", content = "v", rename_all = "snake_case")]
pub enum Template {
    /// A constant.
    Const(ConstId),
    /// Exactly one reference: its value, with its type.
    Slot(SlotId),
    /// Text with references rendered into it.
    Text(Vec<TextPart>),
    /// An array.
    Array(Vec<Template>),
    /// An object.
    Object(Vec<(String, Template)>),
}

/// A piece of a text template.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum TextPart {
    /// Literal text.
    Text(String),
    /// A reference rendered as text.
    Slot(SlotId),
}

/// A CEL expression and what it reads.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Expr {
    /// The source text.
    pub source: String,
    /// Steps it reads, under the name it reads them by (`steps['x']`, or
    /// opcode's namespaced `steps['parent.true.x']`); the VM passes only these.
    pub steps: Vec<StepRead>,
    /// Does it read `steps` as a whole (then every step is passed)?
    pub all_steps: bool,
    /// Which other namespaces it reads (programs compiled before this field
    /// existed read them all).
    #[serde(default)]
    pub reads: Reads,
}

/// The namespaces besides `steps` an expression reads: only these are
/// passed to it, so that what it costs does not grow with data it ignores.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[allow(
    clippy::struct_excessive_bools,
    reason = "one independent flag per namespace"
)]
pub struct Reads {
    /// `inputs`.
    pub inputs: bool,
    /// `workflow`.
    pub workflow: bool,
    /// `context`.
    pub context: bool,
    /// `iter`.
    pub iter: bool,
}

impl Reads {
    /// Every namespace.
    pub const ALL: Reads = Reads {
        inputs: true,
        workflow: true,
        context: true,
        iter: true,
    };
    /// None of them.
    pub const NONE: Reads = Reads {
        inputs: false,
        workflow: false,
        context: false,
        iter: false,
    };
}

impl Default for Reads {
    fn default() -> Reads {
        Reads::ALL
    }
}

/// One step an expression reads.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepRead {
    /// The key in the `steps` map.
    pub name: String,
    /// The step.
    pub step: StepId,
}

/// One option of a decision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DecisionOption {
    /// The choice id.
    pub id: String,
    /// What it means, as written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The description's template when it reads values (`${{…}}`),
    /// rendered as text when the decision is asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description_template: Option<TemplateId>,
}

/// A reasoning step's decision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Decision {
    /// The question, as written.
    pub prompt: Option<String>,
    /// The question's template when it reads values (`${{…}}`), rendered
    /// as text when the decision is asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_template: Option<TemplateId>,
    /// The choices (empty: free-form).
    pub options: Vec<DecisionOption>,
    /// Values shown to the decider.
    pub data_inject: Vec<(String, TemplateId)>,
    /// How long to wait, milliseconds.
    pub timeout_ms: Option<u64>,
    /// The choice taken when the timeout passes.
    pub fallback: Option<String>,
    /// The only agent allowed to decide.
    pub target_agent: Option<String>,
}

/// A condition step's branches.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BranchTable {
    /// Key → block, in source order.
    pub branches: Vec<(String, BlockId)>,
    /// The default block.
    pub default: Option<BlockId>,
}

/// A source position.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Position {
    /// 1-based line.
    pub line: u32,
    /// 1-based column.
    pub column: u32,
}

/// Source positions of steps and slots, for run-time messages.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct DebugInfo {
    /// The source's file name, when known.
    pub file: String,
    /// Position of each step's object (parallel to [`Program::steps`]).
    pub steps: Vec<Position>,
    /// Position of each slot's token (parallel to [`Program::slots`]).
    pub slots: Vec<Position>,
    /// Position of each expression (parallel to [`Program::exprs`]).
    pub exprs: Vec<Position>,
}

impl DebugInfo {
    /// `file:line:column` of a step, for messages.
    pub fn step_location(&self, step: StepId) -> Option<String> {
        let p = self.steps.get(step as usize)?;
        Some(format!("{}:{}:{}", self.file, p.line, p.column))
    }
}

/// Why a Program could not be loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoadError {
    /// Not a Program file at all.
    NotAProgram,
    /// Written by another format version.
    Version {
        /// The file's version.
        found: u16,
    },
    /// The body does not decode.
    Corrupt(String),
    /// An index points outside its table.
    Invalid(String),
}

impl std::fmt::Display for LoadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LoadError::NotAProgram => write!(f, "not an opcode Program (bad magic number)"),
            LoadError::Version { found } => write!(
                f,
                "Program format version {found} is not supported by this build (it reads version {FORMAT_VERSION}); recompile the workflow"
            ),
            LoadError::Corrupt(why) => write!(f, "the Program is damaged: {why}"),
            LoadError::Invalid(why) => write!(f, "the Program is inconsistent: {why}"),
        }
    }
}

impl std::error::Error for LoadError {}

impl Program {
    /// Serializes: magic, version, JSON body.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(4096);
        out.extend_from_slice(&MAGIC);
        out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        // Serializing plain data into a Vec cannot fail.
        let _ = serde_json::to_writer(&mut out, self);
        out
    }

    /// Deserializes and validates.
    pub fn from_bytes(bytes: &[u8]) -> Result<Program, LoadError> {
        let magic = bytes.get(..8).ok_or(LoadError::NotAProgram)?;
        if magic != MAGIC {
            return Err(LoadError::NotAProgram);
        }
        let version = bytes
            .get(8..10)
            .map(|v| u16::from_le_bytes([v[0], v[1]]))
            .ok_or(LoadError::NotAProgram)?;
        if version != FORMAT_VERSION {
            return Err(LoadError::Version { found: version });
        }
        let program: Program = serde_json::from_slice(bytes.get(10..).unwrap_or_default())
            .map_err(|e| LoadError::Corrupt(e.to_string()))?;
        if program.header.version != FORMAT_VERSION {
            return Err(LoadError::Version {
                found: program.header.version,
            });
        }
        program.validate().map_err(LoadError::Invalid)?;
        Ok(program)
    }

    /// The vault secrets the program names (`${{secrets.NAME}}`), each once.
    pub fn secret_names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self
            .slots
            .iter()
            .filter_map(|slot| match &slot.source {
                SlotSource::Secret { name } => Some(name.as_str()),
                _ => None,
            })
            .collect();
        names.sort_unstable();
        names.dedup();
        names
    }

    /// Does the program call `action` anywhere?
    pub fn calls(&self, action: &str) -> bool {
        self.code
            .iter()
            .any(|instr| matches!(instr, Instr::Call { action: a, .. } if a == action))
    }

    /// The action step `id` calls (`None` for a step of another kind).
    pub fn action_of(&self, id: &str) -> Option<&str> {
        let step = &self.steps[self.step_by_id(id)? as usize];
        if step.kind != StepKind::Action {
            return None;
        }
        let code = self
            .code
            .get(step.code.start as usize..step.code.end as usize)?;
        code.iter().find_map(|instr| match instr {
            Instr::Call { action, .. } => Some(action.as_str()),
            _ => None,
        })
    }

    /// The signals the program's wait steps take: each such step's id and
    /// the signal name it waits for (a signal matches by either).
    pub fn awaited_signals(&self) -> Vec<(&str, &str)> {
        self.steps
            .iter()
            .filter(|step| step.kind == StepKind::Wait)
            .filter_map(|step| {
                let code = self
                    .code
                    .get(step.code.start as usize..step.code.end as usize)?;
                code.iter().find_map(|instr| match instr {
                    Instr::AwaitSignal { name, .. } => Some((step.id.as_str(), name.as_str())),
                    _ => None,
                })
            })
            .collect()
    }

    /// The step with this id.
    pub fn step_by_id(&self, id: &str) -> Option<StepId> {
        self.steps
            .iter()
            .position(|s| s.id == id)
            .map(|i| i as StepId)
    }

    /// Checks every index, so the VM may index tables directly.
    pub fn validate(&self) -> Result<(), String> {
        let n = |len: usize| len as u32;
        let (steps, blocks, slots, templates, exprs, consts) = (
            n(self.steps.len()),
            n(self.blocks.len()),
            n(self.slots.len()),
            n(self.templates.len()),
            n(self.exprs.len()),
            n(self.consts.len()),
        );
        let check = |ok: bool, what: &str| if ok { Ok(()) } else { Err(what.to_owned()) };
        check(blocks > 0, "no root block")?;
        for (i, step) in self.steps.iter().enumerate() {
            check(
                step.block < blocks,
                &format!("step {i}: block out of range"),
            )?;
            check(
                step.parent.is_none_or(|p| p < steps),
                &format!("step {i}: parent out of range"),
            )?;
            check(
                step.code.start < step.code.end && step.code.end as usize <= self.code.len(),
                &format!("step {i}: code out of range"),
            )?;
            check(
                step.isolation.is_none_or(|c| c < consts),
                &format!("step {i}: isolation out of range"),
            )?;
            if let Some(policy) = &step.on_error {
                check(
                    policy.fallback.is_none_or(|f| f < steps),
                    &format!("step {i}: fallback out of range"),
                )?;
            }
        }
        for (i, block) in self.blocks.iter().enumerate() {
            check(
                block.deps.len() == block.steps.len(),
                &format!("block {i}: deps do not match steps"),
            )?;
            let all = block
                .steps
                .iter()
                .chain(block.deps.iter().flatten())
                .chain(block.levels.iter().flatten())
                .chain(&block.leaves);
            for &s in all {
                check(s < steps, &format!("block {i}: step out of range"))?;
            }
            check(
                block.owner.is_none_or(|o| o < steps),
                &format!("block {i}: owner out of range"),
            )?;
        }
        for (i, slot) in self.slots.iter().enumerate() {
            if let SlotSource::Step { step } = slot.source {
                check(step < steps, &format!("slot {i}: step out of range"))?;
            }
        }
        for (i, t) in self.templates.iter().enumerate() {
            check(
                template_ok(t, consts, slots),
                &format!("template {i}: index out of range"),
            )?;
        }
        for (i, e) in self.exprs.iter().enumerate() {
            check(
                e.steps.iter().all(|r| r.step < steps),
                &format!("expr {i}: step out of range"),
            )?;
        }
        for (i, d) in self.decisions.iter().enumerate() {
            let texts = d
                .prompt_template
                .into_iter()
                .chain(d.options.iter().filter_map(|o| o.description_template));
            check(
                d.data_inject.iter().all(|(_, t)| *t < templates)
                    && texts.into_iter().all(|t| t < templates),
                &format!("decision {i}: template out of range"),
            )?;
        }
        for (i, table) in self.branch_tables.iter().enumerate() {
            let ok = table.branches.iter().all(|(_, b)| *b < blocks)
                && table.default.is_none_or(|b| b < blocks);
            check(ok, &format!("branch table {i}: block out of range"))?;
        }
        for (i, instr) in self.code.iter().enumerate() {
            let ok = match instr {
                Instr::Guard { expr } => *expr < exprs,
                Instr::Call { params, scope, .. } => {
                    *params < templates && scope.is_none_or(|e| e < exprs)
                }
                Instr::Branch { expr, table } => {
                    *expr < exprs && (*table as usize) < self.branch_tables.len()
                }
                Instr::ForEach { over, body, .. } => *over < exprs && *body < blocks,
                Instr::Repeat { cond, body, .. } => *cond < exprs && *body < blocks,
                Instr::Fork { branches, .. } => branches.iter().all(|b| *b < blocks),
                Instr::Sleep { .. } | Instr::AwaitSignal { .. } => true,
                Instr::Decide { decision } => (*decision as usize) < self.decisions.len(),
            };
            check(ok, &format!("instruction {i}: operand out of range"))?;
        }
        check(
            self.output.is_none_or(|t| t < templates),
            "output template out of range",
        )?;
        check(
            self.on_complete.is_none_or(|b| b < blocks),
            "on_complete out of range",
        )?;
        check(
            self.on_error.is_none_or(|b| b < blocks),
            "on_error out of range",
        )?;
        let run = &self.run;
        for c in [run.input_defaults, run.input_schema, run.context]
            .into_iter()
            .flatten()
        {
            check(c < consts, "run settings: constant out of range")?;
        }
        Ok(())
    }
}

fn template_ok(t: &Template, consts: u32, slots: u32) -> bool {
    match t {
        Template::Const(c) => *c < consts,
        Template::Slot(s) => *s < slots,
        Template::Text(parts) => parts.iter().all(|p| match p {
            TextPart::Text(_) => true,
            TextPart::Slot(s) => *s < slots,
        }),
        Template::Array(items) => items.iter().all(|i| template_ok(i, consts, slots)),
        Template::Object(members) => members.iter().all(|(_, v)| template_ok(v, consts, slots)),
    }
}
