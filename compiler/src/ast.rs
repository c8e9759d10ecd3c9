//! The workflow AST.
//!
//! One tree for both surface syntaxes: the JSON reader and the `.opc` reader
//! lower into it, and every later phase (checks, codegen, the LSP) reads only
//! this. Every name and value keeps its span; every step and block keeps the
//! JSON Pointer it has in the document's JSON form, so diagnostics can name
//! the node for tools that edit JSON.

use opcode_vm::policy::{Backoff, LoopMode, OnTimeout, ParallelMode, Strategy};

use crate::source::Span;
use crate::syntax::template::Segment;

/// A value with the span it was written at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spanned<T> {
    /// The value.
    pub value: T,
    /// Where it was written.
    pub span: Span,
}

impl<T> Spanned<T> {
    /// Pairs a value with its span.
    pub fn new(value: T, span: Span) -> Spanned<T> {
        Spanned { value, span }
    }
}

/// A duration in milliseconds.
pub type Millis = u64;

/// A plain JSON value with the span it was written at.
pub type Json = Spanned<serde_json::Value>;

/// A parsed workflow file.
#[derive(Debug, Clone)]
pub struct Document {
    /// opcode's wrapper fields, when the file uses the wrapper format.
    pub wrapper: Option<Wrapper>,
    /// The workflow definition.
    pub workflow: Workflow,
    /// JSON Pointer of the definition (`""` bare, `"/definition"` wrapped).
    pub base_pointer: String,
}

/// opcode's template wrapper: `{name, description, input_schema, definition, …}`.
#[derive(Debug, Clone, Default)]
pub struct Wrapper {
    /// Template name.
    pub name: Option<Spanned<String>>,
    /// One line about the workflow.
    pub description: Option<Spanned<String>>,
    /// Free-form category.
    pub category: Option<Spanned<String>>,
    /// Free-form feature tags.
    pub features: Option<Json>,
    /// JSON Schema of the run inputs.
    pub input_schema: Option<Json>,
    /// JSON Schema of the workflow output.
    pub output_schema: Option<Json>,
    /// Triggers such as `{"cron": "0 9 * * 1"}`.
    pub triggers: Option<Json>,
    /// Is the template an MCP tool of its own (spec/mcp.md)?
    pub expose: Option<bool>,
    /// Its runs' priority: 0 (first) to 9 (last) (spec/flow-control.md).
    pub priority: Option<Spanned<u64>>,
}

/// A workflow definition.
#[derive(Debug, Clone)]
pub struct Workflow {
    /// The definition object.
    pub span: Span,
    /// The top-level steps.
    pub steps: Block,
    /// Default values for run inputs.
    pub inputs: Option<Json>,
    /// The initial `context` namespace (`intent`, `notes`, anything else).
    pub context: Option<Json>,
    /// Workflow deadline.
    pub timeout: Option<Spanned<Millis>>,
    /// What the deadline does.
    pub on_timeout: Option<Spanned<OnTimeout>>,
    /// Hook run after every step finished successfully.
    pub on_complete: Option<Box<Step>>,
    /// Hook run when the workflow fails.
    pub on_error: Option<Box<Step>>,
    /// The workflow output, as a template.
    pub output: Option<Template>,
    /// Free-form metadata (`metadata.name` titles diagrams).
    pub metadata: Option<Json>,
    /// Run admission by concurrency key.
    pub concurrency: Option<Concurrency>,
}

/// A workflow's `concurrency` block (spec/flow-control.md, "Admission").
#[derive(Debug, Clone)]
pub struct Concurrency {
    /// The key (none: one key for the template).
    pub key: Option<Template>,
    /// Runs of one key holding a slot at once.
    pub limit: u32,
    /// What a run does at the limit.
    pub on_limit: opcode_vm::policy::OnLimit,
}

impl Workflow {
    /// Every step, nested ones and hooks included, parents before children.
    pub fn all_steps(&self) -> Vec<&Step> {
        fn walk<'a>(block: &'a Block, out: &mut Vec<&'a Step>) {
            for step in &block.steps {
                out.push(step);
                for (_, child) in step.children() {
                    walk(child, out);
                }
            }
        }
        let mut out = Vec::new();
        walk(&self.steps, &mut out);
        out.extend(self.on_complete.as_deref());
        out.extend(self.on_error.as_deref());
        out
    }
}

/// An ordered list of steps: the top level, a branch, or a loop body.
#[derive(Debug, Clone)]
pub struct Block {
    /// The steps, in source order.
    pub steps: Vec<Step>,
    /// The array holding them.
    pub span: Span,
    /// JSON Pointer of the array.
    pub pointer: String,
}

/// One step.
#[derive(Debug, Clone)]
pub struct Step {
    /// The step id.
    pub id: Spanned<String>,
    /// The whole step object.
    pub span: Span,
    /// JSON Pointer of the step object.
    pub pointer: String,
    /// What the step does.
    pub kind: StepKind,
    /// Sibling steps that must finish first.
    pub depends_on: Vec<Spanned<String>>,
    /// CEL guard: the step is skipped when it is false.
    pub guard: Option<Box<Expr>>,
    /// Retry policy.
    pub retry: Option<Box<Retry>>,
    /// Per-attempt deadline.
    pub timeout: Option<Spanned<Millis>>,
    /// What happens when the step fails for good.
    pub on_error: Option<Box<OnError>>,
    /// Process isolation settings (checked by the runtime).
    pub isolation: Option<Box<Json>>,
    /// How many of its calls may start in a window.
    pub rate_limit: Option<Box<RateLimit>>,
    /// Free text.
    pub description: Option<Spanned<String>>,
}

/// A step's `rate_limit` block (spec/flow-control.md, "Rate limits").
#[derive(Debug, Clone)]
pub struct RateLimit {
    /// The key (none: the step's own; `host`: the call's target).
    pub key: Option<Template>,
    /// Calls a window.
    pub limit: u32,
    /// The window.
    pub per: Millis,
}

impl Step {
    /// The step type's JSON spelling.
    pub fn type_name(&self) -> &'static str {
        self.kind.type_name()
    }

    /// The blocks nested directly in this step, with a label each
    /// (branch key, `default`, `body`, `branch_<i>`).
    pub fn children(&self) -> Vec<(String, &Block)> {
        match &self.kind {
            StepKind::Condition(c) => {
                let mut out: Vec<(String, &Block)> = c
                    .branches
                    .iter()
                    .map(|(k, b)| (k.value.clone(), b))
                    .collect();
                if let Some(d) = &c.default {
                    out.push(("default".into(), d));
                }
                out
            }
            StepKind::Loop(l) => vec![("body".into(), &l.body)],
            StepKind::Parallel(p) => p
                .branches
                .iter()
                .enumerate()
                .map(|(i, b)| (format!("branch_{i}"), b))
                .collect(),
            StepKind::Action(_) | StepKind::Wait(_) | StepKind::Reasoning(_) => Vec::new(),
        }
    }
}

/// The six step types.
#[derive(Debug, Clone)]
pub enum StepKind {
    /// Run an action.
    Action(Box<ActionStep>),
    /// Branch on a CEL value.
    Condition(Box<ConditionStep>),
    /// Repeat a body.
    Loop(Box<LoopStep>),
    /// Run branches concurrently.
    Parallel(Box<ParallelStep>),
    /// Wait for a duration or a named signal.
    Wait(Box<WaitStep>),
    /// Suspend until an agent or a person decides.
    Reasoning(Box<ReasoningStep>),
}

impl StepKind {
    /// The JSON spelling of the type.
    pub fn type_name(&self) -> &'static str {
        match self {
            StepKind::Action(_) => "action",
            StepKind::Condition(_) => "condition",
            StepKind::Loop(_) => "loop",
            StepKind::Parallel(_) => "parallel",
            StepKind::Wait(_) => "wait",
            StepKind::Reasoning(_) => "reasoning",
        }
    }
}

/// The spellings of the six step types.
pub const STEP_TYPES: &[&str] = &[
    "action",
    "condition",
    "loop",
    "parallel",
    "wait",
    "reasoning",
];

/// `type: action`.
#[derive(Debug, Clone)]
pub struct ActionStep {
    /// The action name, such as `http.get`.
    pub action: Spanned<String>,
    /// The parameters (absent means `{}`).
    pub params: Option<Template>,
}

/// `type: condition`.
#[derive(Debug, Clone)]
pub struct ConditionStep {
    /// The CEL expression whose value picks the branch.
    pub expression: Expr,
    /// Branches by key, in source order.
    pub branches: Vec<(Spanned<String>, Block)>,
    /// The branch taken when no key matches.
    pub default: Option<Block>,
}

/// `type: loop`.
#[derive(Debug, Clone)]
pub struct LoopStep {
    /// `for_each`, `while` or `until`.
    pub mode: Spanned<LoopMode>,
    /// CEL list to iterate (`for_each`).
    pub over: Option<Expr>,
    /// CEL boolean (`while`, `until`).
    pub condition: Option<Expr>,
    /// The steps run per iteration.
    pub body: Block,
    /// Most iterations to run.
    pub max_iter: Option<Spanned<u64>>,
}

/// `type: parallel`.
#[derive(Debug, Clone)]
pub struct ParallelStep {
    /// `all` or `race`.
    pub mode: Spanned<ParallelMode>,
    /// The branches.
    pub branches: Vec<Block>,
    /// Most branches running at once.
    pub max_concurrency: Option<Spanned<u64>>,
}

/// `type: wait`.
#[derive(Debug, Clone)]
pub struct WaitStep {
    /// How long to wait (with `signal`: the longest to wait for it).
    pub duration: Option<Spanned<Millis>>,
    /// The signal name to wait for.
    pub signal: Option<Spanned<String>>,
}

/// `type: reasoning`.
#[derive(Debug, Clone)]
pub struct ReasoningStep {
    /// What the decider is asked, as written.
    pub prompt_context: Option<Spanned<String>>,
    /// The question's template, when it reads values (`${{…}}`).
    pub prompt_template: Option<Template>,
    /// The choices (empty: free-form).
    pub options: Vec<DecisionOption>,
    /// Values shown to the decider, by name.
    pub data_inject: Vec<(Spanned<String>, Template)>,
    /// How long to wait for the decision.
    pub timeout: Option<Spanned<Millis>>,
    /// The choice taken when the timeout passes.
    pub fallback: Option<Spanned<String>>,
    /// The agent that must decide.
    pub target_agent: Option<Spanned<String>>,
}

impl ReasoningStep {
    /// The texts shown to the decider that read values, with their JSON
    /// pointers inside `config`: the question, then option descriptions.
    pub fn texts(&self) -> Vec<(String, &Template)> {
        let prompt = self
            .prompt_template
            .iter()
            .map(|t| ("prompt_context".to_owned(), t));
        let options = self.options.iter().enumerate().filter_map(|(i, o)| {
            let template = o.description_template.as_ref()?;
            Some((format!("options/{i}/description"), template))
        });
        prompt.chain(options).collect()
    }
}

/// One choice of a reasoning step.
#[derive(Debug, Clone)]
pub struct DecisionOption {
    /// The choice id.
    pub id: Spanned<String>,
    /// What it means, as written.
    pub description: Option<String>,
    /// The description's template, when it reads values (`${{…}}`).
    pub description_template: Option<Template>,
}

/// `retry: {max, backoff, delay, max_delay, jitter}`.
#[derive(Debug, Clone)]
pub struct Retry {
    /// The retry object.
    pub span: Span,
    /// Retries after the first attempt.
    pub max: Spanned<u64>,
    /// Delay growth.
    pub backoff: Backoff,
    /// Base delay.
    pub delay: Option<Spanned<Millis>>,
    /// Cap on the delay.
    pub max_delay: Option<Spanned<Millis>>,
    /// Spread delays by up to ±25% (deterministically).
    pub jitter: bool,
}

/// `on_error: {strategy, fallback_step}`.
#[derive(Debug, Clone)]
pub struct OnError {
    /// The on_error object.
    pub span: Span,
    /// What to do.
    pub strategy: Spanned<Strategy>,
    /// The step run instead, for `fallback_step`.
    pub fallback_step: Option<Spanned<String>>,
}

/// A CEL expression.
#[derive(Debug, Clone)]
pub struct Expr {
    /// The expression text.
    pub source: String,
    /// The string node holding it (quotes included, for JSON).
    pub span: Span,
    /// How offsets in `source` map back to the file.
    pub origin: TextOrigin,
}

/// Where the characters of a decoded string came from, so that an offset in
/// the string (a CEL error, a bad reference) can point into the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TextOrigin {
    /// Copied byte for byte from the file, starting at this offset.
    Verbatim(u32),
    /// A JSON string literal at this span (quotes included) that has escapes.
    JsonString(Span),
}

impl TextOrigin {
    /// The origin of a JSON string node whose decoded text is `decoded`.
    pub fn json_string(span: Span, decoded: &str) -> TextOrigin {
        if span.len() == decoded.len() + 2 {
            // No escapes: decoded byte i is source byte start + 1 + i.
            TextOrigin::Verbatim(span.start + 1)
        } else {
            TextOrigin::JsonString(span)
        }
    }

    /// The file offset of byte `decoded` of the string.
    pub fn file_offset(self, src: &str, decoded: usize) -> usize {
        match self {
            TextOrigin::Verbatim(start) => start as usize + decoded,
            TextOrigin::JsonString(span) => {
                let raw = src.get(span.range()).unwrap_or_default();
                span.start as usize + crate::syntax::json::lexer::raw_offset(raw, decoded)
            }
        }
    }

    /// The file span of bytes `range` of the string.
    pub fn file_span(self, src: &str, range: std::ops::Range<usize>) -> Span {
        Span::new(
            self.file_offset(src, range.start),
            self.file_offset(src, range.end),
        )
    }
}

/// A JSON value that may contain `${{…}}` references.
#[derive(Debug, Clone)]
pub struct Template {
    /// Where the value is.
    pub span: Span,
    /// The value.
    pub kind: TemplateKind,
}

/// The shapes of a template.
#[derive(Debug, Clone)]
pub enum TemplateKind {
    /// A value with no references anywhere inside.
    Literal(serde_json::Value),
    /// A string that is exactly one reference: the referenced value, typed.
    Ref(Reference),
    /// A string mixing text and references: rendered as text.
    Text(Vec<TextPart>),
    /// An array with references inside.
    Array(Vec<Template>),
    /// An object with references inside.
    Object(Vec<(Spanned<String>, Template)>),
}

/// A piece of a [`TemplateKind::Text`].
#[derive(Debug, Clone)]
pub enum TextPart {
    /// Literal text.
    Text(String),
    /// A reference, rendered as text.
    Ref(Reference),
}

/// A reference such as `steps.fetch.output.body`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reference {
    /// The whole `${{…}}` token (or the bare reference).
    pub span: Span,
    /// The first name.
    pub namespace: Spanned<String>,
    /// The path after it.
    pub segments: Vec<Spanned<Segment>>,
}

impl Reference {
    /// The reference as text, canonically spelled.
    pub fn render(&self) -> String {
        let mut out = self.namespace.value.clone();
        for segment in &self.segments {
            out.push_str(&segment.value.render());
        }
        out
    }
}

impl Template {
    /// Every reference in the template, in source order.
    pub fn references(&self) -> Vec<&Reference> {
        let mut out = Vec::new();
        self.collect_references(&mut out);
        out
    }

    fn collect_references<'a>(&'a self, out: &mut Vec<&'a Reference>) {
        match &self.kind {
            TemplateKind::Literal(_) => {}
            TemplateKind::Ref(r) => out.push(r),
            TemplateKind::Text(parts) => out.extend(parts.iter().filter_map(|p| match p {
                TextPart::Ref(r) => Some(r),
                TextPart::Text(_) => None,
            })),
            TemplateKind::Array(items) => {
                for item in items {
                    item.collect_references(out);
                }
            }
            TemplateKind::Object(members) => {
                for (_, value) in members {
                    value.collect_references(out);
                }
            }
        }
    }
}
