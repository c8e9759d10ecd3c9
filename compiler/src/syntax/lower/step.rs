//! Lowering one step and its type-specific `config`, nested to any depth.

use opcode_vm::policy::{Backoff, LoopMode, ParallelMode, Strategy};

use super::Lowerer;
use super::fields::Fields;
use crate::ast::{
    ActionStep, ConditionStep, DecisionOption, LoopStep, OnError, ParallelStep, ReasoningStep,
    Retry, STEP_TYPES, Spanned, Step, StepKind, WaitStep,
};
use crate::diagnostics::codes::{E0010, E0011, E0012, E0013, E0016, W0001};
use crate::diagnostics::{Diagnostic, Fix, PatchOp, did_you_mean as suggestion};
use crate::source::Span;
use crate::syntax::node::{Node, NodeKind};

const STEP_FIELDS: &[&str] = &[
    "id",
    "type",
    "action",
    "params",
    "depends_on",
    "condition",
    "retry",
    "timeout",
    "on_error",
    "config",
    "isolation",
    "rate_limit",
    "description",
];

const CONDITION_FIELDS: &[&str] = &["expression", "branches", "default"];
const LOOP_FIELDS: &[&str] = &["mode", "over", "condition", "body", "max_iter"];

/// What other tools call a `for_each` loop's list (offered as `over`).
const OVER_SPELLINGS: &[&str] = &[
    "items",
    "in",
    "list",
    "each",
    "collection",
    "iterate",
    "values",
];
const PARALLEL_FIELDS: &[&str] = &["mode", "branches", "max_concurrency"];
const WAIT_FIELDS: &[&str] = &["duration", "signal"];
const REASONING_FIELDS: &[&str] = &[
    "prompt_context",
    "options",
    "data_inject",
    "timeout",
    "fallback",
    "target_agent",
];
const RETRY_FIELDS: &[&str] = &["max", "backoff", "delay", "max_delay", "jitter"];
const ON_ERROR_FIELDS: &[&str] = &["strategy", "fallback_step"];
const OPTION_FIELDS: &[&str] = &["id", "description"];

/// Can `id` be spelled in references (`steps.<id>`) and CEL (`steps['<id>']`)?
pub fn valid_step_id(id: &str) -> bool {
    !id.is_empty()
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

impl Lowerer<'_> {
    /// Lowers one step object.
    pub(crate) fn step(&mut self, node: &Node<'_>, pointer: &str) -> Option<Step> {
        let fields = self.fields(node, pointer, "a step", STEP_FIELDS)?;
        let id = self.step_id(node, &fields);
        let type_name = match fields.get("type") {
            None => Some(Spanned::new("action".to_owned(), node.span)),
            Some(member) => match member.value.as_str() {
                Some(t) if STEP_TYPES.contains(&t) => {
                    Some(Spanned::new(t.to_owned(), member.value.span))
                }
                Some(t) => {
                    let has_action = fields.get("action").is_some();
                    self.unknown_type(member.value.span, t, &fields.pointer_of("type"), has_action);
                    None
                }
                None => {
                    self.wrong_type(member, &fields.pointer_of("type"), "a string");
                    None
                }
            },
        }?;
        let kind = self.step_kind(&type_name, node, &fields)?;
        Some(Step {
            id,
            span: node.span,
            pointer: pointer.to_owned(),
            kind,
            depends_on: self.depends_on(&fields),
            guard: self.opt_expr(&fields, "condition").map(Box::new),
            retry: fields
                .get("retry")
                .and_then(|m| self.retry(&m.value, &fields.pointer_of("retry"))),
            timeout: self.opt_duration(&fields, "timeout"),
            on_error: fields
                .get("on_error")
                .and_then(|m| self.on_error(&m.value, &fields.pointer_of("on_error"))),
            isolation: self.opt_typed(&fields, "isolation", "object").map(Box::new),
            rate_limit: fields
                .get("rate_limit")
                .and_then(|m| self.rate_limit(&m.value, &fields.pointer_of("rate_limit")))
                .map(Box::new),
            description: self.opt_string(&fields, "description"),
        })
    }

    fn step_id(&mut self, node: &Node<'_>, fields: &Fields<'_, '_>) -> Spanned<String> {
        let Some(member) = fields.get("id") else {
            self.report(
                Diagnostic::error(
                    E0011,
                    Span::new(node.span.start as usize, node.span.start as usize + 1),
                    "step is missing its `id`",
                )
                .with_help("give every step a unique `id` such as \"fetch-data\"")
                .with_pointer(fields.pointer.clone()),
            );
            return Spanned::new(String::new(), node.span);
        };
        let Some(id) = member.value.as_str() else {
            self.wrong_type(member, &fields.pointer_of("id"), "a string");
            return Spanned::new(String::new(), member.value.span);
        };
        if !valid_step_id(id) {
            let cleaned: String = id
                .chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                        c
                    } else {
                        '-'
                    }
                })
                .collect();
            let mut diagnostic = Diagnostic::error(
                E0016,
                member.value.span,
                if id.is_empty() {
                    "step id is empty".to_owned()
                } else {
                    format!("step id `{id}` has characters references cannot spell")
                },
            )
            .with_help("step ids use letters, digits, `_` and `-`")
            .with_pointer(fields.pointer_of("id"));
            if !cleaned.trim_matches('-').is_empty() {
                diagnostic = diagnostic.with_fix(Fix::replace(
                    format!("rename to `{cleaned}`"),
                    member.value.span,
                    format!("\"{cleaned}\""),
                    Some(PatchOp::Replace {
                        path: fields.pointer_of("id"),
                        value: cleaned.clone().into(),
                    }),
                ));
            }
            self.report(diagnostic);
            // Keep the id so that references to it still resolve.
        }
        Spanned::new(id.to_owned(), member.value.span)
    }

    /// An unknown `type`: the closest type, or `action` for a step that
    /// names an `action` (`"type": "shell"` beside `"action": "shell.exec"`).
    fn unknown_type(&mut self, span: Span, found: &str, pointer: &str, has_action: bool) {
        let mut diagnostic = Diagnostic::error(E0013, span, format!("unknown step type `{found}`"))
            .with_help(format!("step types are {}", STEP_TYPES.join(", ")))
            .with_pointer(pointer);
        let guess = suggestion(found, STEP_TYPES).or(has_action.then_some("action"));
        if let Some(close) = guess {
            diagnostic = diagnostic.with_fix(Fix::replace(
                format!("replace with `{close}`"),
                span,
                format!("\"{close}\""),
                Some(PatchOp::Replace {
                    path: pointer.to_owned(),
                    value: close.into(),
                }),
            ));
        }
        self.report(diagnostic);
    }

    fn depends_on(&mut self, fields: &Fields<'_, '_>) -> Vec<Spanned<String>> {
        let Some(member) = fields.get("depends_on") else {
            return Vec::new();
        };
        let pointer = fields.pointer_of("depends_on");
        match &member.value.kind {
            // A single id is accepted for convenience.
            NodeKind::String(s) => vec![Spanned::new(s.clone().into_owned(), member.value.span)],
            NodeKind::Array(items) => items
                .iter()
                .enumerate()
                .filter_map(|(i, item)| {
                    if let Some(s) = item.as_str() {
                        Some(Spanned::new(s.to_owned(), item.span))
                    } else {
                        self.report(
                            Diagnostic::error(
                                E0010,
                                item.span,
                                format!("`depends_on` lists step ids, found {}", item.kind_name()),
                            )
                            .with_pointer(format!("{pointer}/{i}")),
                        );
                        None
                    }
                })
                .collect(),
            _ => {
                self.wrong_type(member, &pointer, "an array of step ids");
                Vec::new()
            }
        }
    }

    /// The type-specific part of a step.
    fn step_kind(
        &mut self,
        type_name: &Spanned<String>,
        node: &Node<'_>,
        fields: &Fields<'_, '_>,
    ) -> Option<StepKind> {
        if type_name.value == "action" {
            for key in ["config"] {
                if let Some(member) = fields.get(key) {
                    self.ignored_field(
                        member.key_span,
                        key,
                        "action",
                        &fields.pointer_of(key),
                        None,
                    );
                }
            }
            return self
                .action(node, fields)
                .map(|a| StepKind::Action(Box::new(a)));
        }
        // `params` without `config` is the config written where an
        // action's parameters go: one error, whose fix renames it.
        let misplaced = fields
            .get("params")
            .filter(|_| fields.get("config").is_none());
        for key in ["action", "params"] {
            if let Some(member) = fields
                .get(key)
                .filter(|_| key != "params" || misplaced.is_none())
            {
                let fix = (key == "params")
                    .then(|| self.params_into_config(fields))
                    .flatten();
                self.ignored_field(
                    member.key_span,
                    key,
                    &type_name.value,
                    &fields.pointer_of(key),
                    fix,
                );
            }
        }
        let Some(config) = fields.get("config") else {
            let mut d = Diagnostic::error(
                E0011,
                type_name.span,
                format!("a `{}` step needs a `config` object", type_name.value),
            )
            .with_pointer(fields.pointer.clone());
            if let Some(params) = misplaced {
                d = d
                    .with_help(format!(
                        "a `{}` step's settings go in `config`; `params` are an action's",
                        type_name.value
                    ))
                    .with_fix(Fix::rename_key(
                        "rename `params` to `config`",
                        params.key_span,
                        &fields.pointer_of("params"),
                        "config",
                    ));
            }
            self.report(d);
            return None;
        };
        let pointer = fields.pointer_of("config");
        let what = format!("`{}` config", type_name.value);
        let config_node = &config.value;
        match type_name.value.as_str() {
            "condition" => {
                let config = self.fields(config_node, &pointer, &what, CONDITION_FIELDS)?;
                self.condition(config_node, &config)
                    .map(|c| StepKind::Condition(Box::new(c)))
            }
            "loop" => {
                let config = self.fields(config_node, &pointer, &what, LOOP_FIELDS)?;
                self.loop_step(config_node, &config)
                    .map(|l| StepKind::Loop(Box::new(l)))
            }
            "parallel" => {
                let config = self.fields(config_node, &pointer, &what, PARALLEL_FIELDS)?;
                self.parallel(config_node, &config)
                    .map(|p| StepKind::Parallel(Box::new(p)))
            }
            "wait" => {
                let config = self.fields(config_node, &pointer, &what, WAIT_FIELDS)?;
                Some(StepKind::Wait(Box::new(self.wait(config_node, &config))))
            }
            _ => {
                let config = self.fields(config_node, &pointer, &what, REASONING_FIELDS)?;
                Some(StepKind::Reasoning(Box::new(self.reasoning(&config))))
            }
        }
    }

    fn ignored_field(
        &mut self,
        span: Span,
        key: &str,
        type_name: &str,
        pointer: &str,
        fix: Option<Fix>,
    ) {
        let mut d = Diagnostic::warning(
            W0001,
            span,
            format!("`{key}` is ignored on a `{type_name}` step"),
        )
        .with_pointer(pointer);
        if let Some(fix) = fix {
            d = d
                .with_help("a flow step's settings go in `config`; `params` are an action's")
                .with_fix(fix);
        }
        self.report(d);
    }

    /// A flow step's `params` beside its `config` (`prompt_context` where an
    /// action's parameters go): its members moved into `config`, when
    /// both are objects and no key is in both.
    fn params_into_config(&self, fields: &Fields<'_, '_>) -> Option<Fix> {
        let params = fields.get("params")?;
        let config = fields.get("config")?;
        let (NodeKind::Object(moved), NodeKind::Object(kept)) =
            (&params.value.kind, &config.value.kind)
        else {
            return None;
        };
        if moved.is_empty() || moved.iter().any(|m| kept.iter().any(|k| k.key == m.key)) {
            return None;
        }
        let src = self.src;
        let inner = |node: &Node<'_>| {
            let (start, end) = (node.span.start as usize, node.span.end as usize);
            src.get(start + 1..end - 1).map(str::trim)
        };
        let members = inner(&params.value)?;
        let open = config.value.span.start as usize + 1;
        let insert = if kept.is_empty() {
            members.to_owned()
        } else {
            format!("{members}, ")
        };
        let mut patch: Vec<PatchOp> = moved
            .iter()
            .map(|m| PatchOp::Move {
                from: crate::syntax::node::child_pointer(&fields.pointer_of("params"), &m.key),
                path: crate::syntax::node::child_pointer(&fields.pointer_of("config"), &m.key),
            })
            .collect();
        patch.push(PatchOp::Remove {
            path: fields.pointer_of("params"),
        });
        let mut fix = Fix::replace(
            "move `params` into `config`",
            Span::new(open, open),
            insert,
            None,
        );
        let removed = fields.index_of("params")?;
        fix.edits.push(crate::diagnostics::TextEdit {
            span: crate::diagnostics::item_removal(&fields.member_spans(), removed)?,
            replacement: String::new(),
        });
        fix.patch = patch;
        Some(fix)
    }

    fn action(&mut self, node: &Node<'_>, fields: &Fields<'_, '_>) -> Option<ActionStep> {
        let action = if let Some(member) = fields.get("action") {
            if let Some(name) = member.value.as_str() {
                Spanned::new(name.to_owned(), member.value.span)
            } else {
                self.wrong_type(member, &fields.pointer_of("action"), "an action name");
                return None;
            }
        } else {
            self.report(
                Diagnostic::error(E0011, node.span, "action step is missing its `action`")
                    .with_help("name the action to run, such as \"http.get\", or set `type`")
                    .with_pointer(fields.pointer.clone()),
            );
            return None;
        };
        let params = match fields.get("params") {
            Some(member) if matches!(member.value.kind, NodeKind::Object(_) | NodeKind::Null) => {
                Some(self.object_template(&member.value, &fields.pointer_of("params")))
            }
            Some(member) => {
                self.wrong_type(member, &fields.pointer_of("params"), "an object");
                None
            }
            None => None,
        };
        Some(ActionStep { action, params })
    }

    fn required<'n, 's>(
        &mut self,
        node: &Node<'_>,
        fields: &Fields<'n, 's>,
        key: &str,
        what: &str,
    ) -> Option<&'n crate::syntax::node::Member<'s>> {
        let member = fields.get(key);
        if member.is_none() {
            self.report(
                Diagnostic::error(E0011, node.span, format!("{what} needs `{key}`"))
                    .with_pointer(fields.pointer.clone()),
            );
        }
        member
    }

    fn condition(&mut self, node: &Node<'_>, config: &Fields<'_, '_>) -> Option<ConditionStep> {
        self.required(node, config, "expression", "a condition")?;
        let expression = self.opt_expr(config, "expression")?;
        let mut branches = Vec::new();
        if let Some(member) = config.get("branches") {
            let pointer = config.pointer_of("branches");
            match member.value.as_object() {
                Some(members) => {
                    for branch in members {
                        let child = super::child_pointer(&pointer, &branch.key);
                        let block = self.block(
                            &branch.value,
                            &child,
                            &format!("branch `{}`", branch.key),
                            false,
                        );
                        branches.push((
                            Spanned::new(branch.key.clone().into_owned(), branch.key_span),
                            block,
                        ));
                    }
                }
                None => {
                    self.wrong_type(member, &pointer, "an object of step arrays keyed by value");
                }
            }
        }
        let default = config
            .get("default")
            .map(|m| self.block(&m.value, &config.pointer_of("default"), "default", false));
        Some(ConditionStep {
            expression,
            branches,
            default,
        })
    }

    fn loop_step(&mut self, node: &Node<'_>, config: &Fields<'_, '_>) -> Option<LoopStep> {
        let mode = self
            .opt_enum(config, "mode", LoopMode::parse, LoopMode::SPELLINGS)
            .unwrap_or_else(|| Spanned::new(LoopMode::ForEach, node.span));
        let over = self.opt_expr(config, "over");
        let condition = self.opt_expr(config, "condition");
        match mode.value {
            LoopMode::ForEach if over.is_none() && config.get("over").is_none() => {
                let mut d = Diagnostic::error(E0011, mode.span, "a `for_each` loop needs `over`")
                    .with_help(
                        "set `over` to a CEL expression giving a list, such as \"inputs.items\"",
                    )
                    .with_pointer(config.pointer.clone());
                // The list given under another tool's name for it.
                let named = OVER_SPELLINGS.iter().find_map(|key| config.get(key));
                if let Some(member) = named {
                    let mut fix = Fix::rename_key(
                        format!("rename `{}` to `over`", member.key),
                        member.key_span,
                        &config.pointer_of(&member.key),
                        "over",
                    );
                    // `over` is CEL: interpolation is rewritten as the
                    // expression it reads (as E0030's fix does).
                    let bare = member
                        .value
                        .as_str()
                        .filter(|text| !crate::syntax::template::is_plain(text))
                        .and_then(crate::check::cel::rewrite_interpolation);
                    if let Some(bare) = bare {
                        fix.message = format!("rename `{}` to `over`, written as CEL", member.key);
                        fix.edits.push(crate::diagnostics::TextEdit {
                            span: member.value.span,
                            replacement: serde_json::Value::from(bare.as_str()).to_string(),
                        });
                        fix.patch.push(PatchOp::Replace {
                            path: config.pointer_of("over"),
                            value: bare.into(),
                        });
                    }
                    d = d.with_fix(fix);
                }
                self.report(d);
            }
            LoopMode::While | LoopMode::Until
                if condition.is_none() && config.get("condition").is_none() =>
            {
                self.report(
                    Diagnostic::error(
                        E0011,
                        mode.span,
                        format!("a `{}` loop needs `condition`", mode.value),
                    )
                    .with_help("set `condition` to a CEL boolean expression")
                    .with_pointer(config.pointer.clone()),
                );
            }
            _ => {}
        }
        let body = match self.required(node, config, "body", "a loop") {
            Some(member) => self.block(&member.value, &config.pointer_of("body"), "body", true),
            None => return None,
        };
        Some(LoopStep {
            mode,
            over,
            condition,
            body,
            max_iter: self.opt_count(config, "max_iter"),
        })
    }

    fn parallel(&mut self, node: &Node<'_>, config: &Fields<'_, '_>) -> Option<ParallelStep> {
        let mode = self
            .opt_enum(config, "mode", ParallelMode::parse, ParallelMode::SPELLINGS)
            .unwrap_or_else(|| Spanned::new(ParallelMode::All, node.span));
        let member = self.required(node, config, "branches", "a parallel step")?;
        let pointer = config.pointer_of("branches");
        let Some(items) = member.value.as_array() else {
            self.wrong_type(member, &pointer, "an array of step arrays");
            return None;
        };
        if items.is_empty() {
            self.report(
                Diagnostic::error(E0012, member.value.span, "a parallel step has no branches")
                    .with_pointer(pointer.clone()),
            );
        }
        let branches = items
            .iter()
            .enumerate()
            .map(|(i, item)| {
                self.block(
                    item,
                    &format!("{pointer}/{i}"),
                    &format!("branch {i}"),
                    true,
                )
            })
            .collect();
        let max_concurrency = self.opt_count(config, "max_concurrency");
        if let Some(limit) = max_concurrency.as_ref().filter(|m| m.value == 0) {
            self.report(
                Diagnostic::error(
                    crate::diagnostics::codes::E0017,
                    limit.span,
                    "`max_concurrency` must be at least 1",
                )
                .with_pointer(config.pointer_of("max_concurrency")),
            );
        }
        Some(ParallelStep {
            mode,
            branches,
            max_concurrency,
        })
    }

    fn wait(&mut self, node: &Node<'_>, config: &Fields<'_, '_>) -> WaitStep {
        let duration = self.opt_duration(config, "duration");
        let signal = self.opt_string(config, "signal");
        if config.get("duration").is_none() && config.get("signal").is_none() {
            self.report(
                Diagnostic::error(E0011, node.span, "a wait step needs `duration` or `signal`")
                    .with_help("wait for a time with \"duration\": \"5s\", or for a named signal with \"signal\": \"approved\"")
                    .with_pointer(config.pointer.clone()),
            );
        }
        WaitStep { duration, signal }
    }

    fn reasoning(&mut self, config: &Fields<'_, '_>) -> ReasoningStep {
        let mut options = Vec::new();
        if let Some(member) = config.get("options") {
            let pointer = config.pointer_of("options");
            match member.value.as_array() {
                Some(items) => {
                    for (i, item) in items.iter().enumerate() {
                        let item_pointer = format!("{pointer}/{i}");
                        // A bare string is accepted as an option id.
                        if let Some(id) = item.as_str() {
                            options.push(DecisionOption {
                                id: Spanned::new(id.to_owned(), item.span),
                                description: None,
                                description_template: None,
                            });
                            continue;
                        }
                        let Some(fields) =
                            self.fields(item, &item_pointer, "an option", OPTION_FIELDS)
                        else {
                            continue;
                        };
                        let Some(id) = self.opt_string(&fields, "id") else {
                            if fields.get("id").is_none() {
                                self.report(
                                    Diagnostic::error(
                                        E0011,
                                        item.span,
                                        "option is missing its `id`",
                                    )
                                    .with_pointer(item_pointer),
                                );
                            }
                            continue;
                        };
                        let description = self.opt_string(&fields, "description").map(|d| d.value);
                        let description_template = self.text_template(&fields, "description");
                        options.push(DecisionOption {
                            id,
                            description,
                            description_template,
                        });
                    }
                }
                None => self.wrong_type(member, &pointer, "an array of options"),
            }
        }
        let mut data_inject = Vec::new();
        if let Some(member) = config.get("data_inject") {
            let pointer = config.pointer_of("data_inject");
            match member.value.as_object() {
                Some(members) => {
                    for m in members {
                        let child = super::child_pointer(&pointer, &m.key);
                        let value = self.data_inject_value(&m.value, &child);
                        data_inject
                            .push((Spanned::new(m.key.clone().into_owned(), m.key_span), value));
                    }
                }
                None => self.wrong_type(member, &pointer, "an object"),
            }
        }
        ReasoningStep {
            prompt_context: self.opt_string(config, "prompt_context"),
            prompt_template: self.text_template(config, "prompt_context"),
            options,
            data_inject,
            timeout: self.opt_duration(config, "timeout"),
            // An empty fallback means "no fallback", as in opcode.
            fallback: self
                .opt_string(config, "fallback")
                .filter(|f| !f.value.is_empty()),
            target_agent: self
                .opt_string(config, "target_agent")
                .filter(|t| !t.value.is_empty()),
        }
    }

    fn retry(&mut self, node: &Node<'_>, pointer: &str) -> Option<Box<Retry>> {
        let fields = self.fields(node, pointer, "`retry`", RETRY_FIELDS)?;
        let max = match self.opt_count(&fields, "max") {
            Some(max) => max,
            None if fields.get("max").is_none() => {
                self.report(
                    Diagnostic::error(
                        E0011,
                        node.span,
                        "`retry` needs `max`, the number of retries",
                    )
                    .with_pointer(pointer),
                );
                return None;
            }
            None => return None,
        };
        Some(Box::new(Retry {
            span: node.span,
            max,
            backoff: self
                .opt_enum(&fields, "backoff", Backoff::parse, Backoff::SPELLINGS)
                .map_or(Backoff::Constant, |b| b.value),
            delay: self.opt_duration(&fields, "delay"),
            max_delay: self.opt_duration(&fields, "max_delay"),
            jitter: self.opt_bool(&fields, "jitter").unwrap_or(false),
        }))
    }

    fn on_error(&mut self, node: &Node<'_>, pointer: &str) -> Option<Box<OnError>> {
        // `"on_error": "ignore"` means the strategy: the fix writes it so.
        if let Some(text) = node.as_str()
            && Strategy::parse(text).is_some()
        {
            let object = serde_json::json!({ "strategy": text });
            self.report(
                Diagnostic::error(
                    E0010,
                    node.span,
                    "`on_error` must be an object, found string",
                )
                .with_help(format!("write the strategy in an object: {object}"))
                .with_fix(Fix::replace(
                    format!("write `{object}`"),
                    node.span,
                    object.to_string(),
                    Some(PatchOp::Replace {
                        path: pointer.to_owned(),
                        value: object,
                    }),
                ))
                .with_pointer(pointer),
            );
            return None;
        }
        let fields = self.fields(node, pointer, "`on_error`", ON_ERROR_FIELDS)?;
        let strategy =
            match self.opt_enum(&fields, "strategy", Strategy::parse, Strategy::SPELLINGS) {
                Some(strategy) => strategy,
                None if fields.get("strategy").is_none() => {
                    // `{"fallback_step": "x"}` alone means the fallback strategy.
                    if fields.get("fallback_step").is_some() {
                        Spanned::new(Strategy::FallbackStep, node.span)
                    } else {
                        self.report(
                            Diagnostic::error(E0011, node.span, "`on_error` needs `strategy`")
                                .with_help(format!(
                                    "strategies are {}",
                                    Strategy::SPELLINGS.join(", ")
                                ))
                                .with_pointer(pointer),
                        );
                        return None;
                    }
                }
                None => return None,
            };
        Some(Box::new(OnError {
            span: node.span,
            strategy,
            fallback_step: self
                .opt_string(&fields, "fallback_step")
                .filter(|f| !f.value.is_empty()),
        }))
    }
}
