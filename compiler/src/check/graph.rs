//! Dependencies: `depends_on`, fallbacks, cycles, and what is guaranteed to
//! have finished before a step starts.
//!
//! The top-level steps form a DAG through `depends_on`. Every nested list
//! (a branch, a loop body, a parallel branch) runs in source order, so each
//! nested step depends on the one before it; its own `depends_on` may only
//! name earlier siblings. A step named as another step's `fallback_step` is
//! taken out of the schedule: it runs only in place of the failed step.
//!
//! A reference `steps.X` from step S is valid only when X is guaranteed to
//! have finished when S starts: X is a transitive dependency of S (or an
//! earlier sibling in a nested list), or of any step enclosing S, or X sits
//! inside a finished `parallel`/`all` step in that set.

use std::collections::{HashMap, VecDeque};

use opcode_vm::policy::{ParallelMode, Strategy};
use petgraph::algo::kosaraju_scc;
use petgraph::graph::{DiGraph, NodeIndex};

use super::model::{BlockRole, Model, StepIdx};
use crate::ast::StepKind;
use crate::diagnostics::codes::{
    E0021, E0022, E0023, E0024, E0025, E0043, E0044, E0050, W0007, W0009,
};
use crate::diagnostics::{Diagnostic, Diagnostics, Fix, did_you_mean};
use crate::source::Span;

/// The validated dependency structure.
#[derive(Debug)]
pub struct Graph {
    /// Direct dependencies of each step, within its block (explicit and, in
    /// nested lists, the previous step).
    pub deps: Vec<Vec<StepIdx>>,
    /// For a fallback-only step, the step it stands in for.
    pub fallback_of: Vec<Option<StepIdx>>,
    /// For a step with `fallback_step`, the fallback.
    pub fallback: Vec<Option<StepIdx>>,
}

impl Graph {
    /// Does this step run only as another step's fallback?
    pub fn is_fallback_only(&self, step: StepIdx) -> bool {
        self.fallback_of[step].is_some()
    }
}

/// A fix removing entry `i` of a `depends_on` written in `src`: with the
/// comma that separates it; a lone string (`"depends_on": "a"`) becomes `[]`.
fn remove_entry(deps: &[crate::ast::Spanned<String>], i: usize, src: &str) -> Fix {
    let this = deps[i].span;
    let in_array = src
        .get(..this.start as usize)
        .is_some_and(|before| before.trim_end().ends_with(['[', ',']));
    let spans: Vec<Span> = deps.iter().map(|d| d.span).collect();
    let (span, replacement) = match crate::diagnostics::item_removal(&spans, i) {
        Some(span) => (span, ""),
        None if in_array => (this, ""),
        None => (this, "[]"),
    };
    Fix::replace("remove this entry", span, replacement, None)
}

/// Validates `depends_on` and `fallback_step`, and detects cycles.
pub fn build(model: &Model<'_>, src: &str, sink: &mut Diagnostics) -> Graph {
    let n = model.steps.len();
    let mut graph = Graph {
        deps: vec![Vec::new(); n],
        fallback_of: vec![None; n],
        fallback: vec![None; n],
    };
    resolve_fallbacks(model, &mut graph, sink);
    for block in &model.blocks {
        let mut previous: Option<StepIdx> = None;
        for &s in &block.steps {
            let info = &model.steps[s];
            let mut seen: Vec<StepIdx> = Vec::new();
            for (entry, dep) in info.step.depends_on.iter().enumerate() {
                let pointer = || format!("{}/depends_on", info.step.pointer);
                let Some(&target) = model.by_id.get(dep.value.as_str()) else {
                    let siblings: Vec<&str> = block
                        .steps
                        .iter()
                        .map(|&t| model.steps[t].step.id.value.as_str())
                        .filter(|id| *id != info.step.id.value)
                        .collect();
                    let mut d = Diagnostic::error(
                        E0021,
                        dep.span,
                        format!("`depends_on` names unknown step `{}`", dep.value),
                    )
                    .with_pointer(pointer());
                    if let Some(close) = did_you_mean(&dep.value, &siblings) {
                        d = d
                            .with_help(format!("did you mean `{close}`?"))
                            .with_fix(Fix::replace(
                                format!("replace with `{close}`"),
                                dep.span,
                                format!("\"{close}\""),
                                None,
                            ));
                    }
                    sink.push(d);
                    continue;
                };
                if target == s {
                    sink.push(
                        Diagnostic::error(
                            E0022,
                            dep.span,
                            format!("step `{}` depends on itself", dep.value),
                        )
                        .with_help("remove this entry")
                        .with_fix(remove_entry(&info.step.depends_on, entry, src))
                        .with_pointer(pointer()),
                    );
                    continue;
                }
                if seen.contains(&target) {
                    sink.push(
                        Diagnostic::warning(
                            W0007,
                            dep.span,
                            format!("`{}` is listed twice in `depends_on`", dep.value),
                        )
                        .with_fix(remove_entry(&info.step.depends_on, entry, src))
                        .with_pointer(pointer()),
                    );
                    continue;
                }
                if model.steps[target].block != info.block {
                    let mut d = Diagnostic::error(
                        E0023,
                        dep.span,
                        format!(
                            "`{}` is not in the same list of steps as `{}`",
                            dep.value, info.step.id.value
                        ),
                    )
                    .with_secondary(model.steps[target].step.id.span, "defined here")
                    .with_pointer(pointer());
                    d = if model.is_inside(s, target) {
                        d.with_help("a step cannot depend on a step that contains it")
                    } else {
                        d.with_help(
                            "`depends_on` names steps of the same list; a nested step already runs after everything its enclosing step depends on",
                        )
                    };
                    sink.push(d);
                    continue;
                }
                if let Some(owner) = graph.fallback_of[target] {
                    sink.push(
                        Diagnostic::error(
                            E0025,
                            dep.span,
                            format!(
                                "`{}` only runs as the fallback of `{}`",
                                dep.value, model.steps[owner].step.id.value
                            ),
                        )
                        .with_help(format!(
                            "depend on `{}` instead: its output is the fallback's when it fails",
                            model.steps[owner].step.id.value
                        ))
                        .with_pointer(pointer()),
                    );
                    continue;
                }
                seen.push(target);
                graph.deps[s].push(target);
            }
            if block.sequential() && !graph.is_fallback_only(s) {
                if let Some(p) = previous
                    && !graph.deps[s].contains(&p)
                {
                    graph.deps[s].push(p);
                }
                previous = Some(s);
            }
        }
    }
    report_cycles(model, &graph, sink);
    graph
}

fn resolve_fallbacks(model: &Model<'_>, graph: &mut Graph, sink: &mut Diagnostics) {
    for (s, info) in model.steps.iter().enumerate() {
        let Some(on_error) = &info.step.on_error else {
            continue;
        };
        if on_error.strategy.value != Strategy::FallbackStep {
            continue;
        }
        let pointer = format!("{}/on_error", info.step.pointer);
        let Some(name) = &on_error.fallback_step else {
            sink.push(
                Diagnostic::error(
                    E0044,
                    on_error.strategy.span,
                    "strategy `fallback_step` needs `fallback_step`",
                )
                .with_help("name the step to run instead, or choose another strategy")
                .with_pointer(pointer),
            );
            continue;
        };
        let target = model.by_id.get(name.value.as_str()).copied();
        let Some(target) = target.filter(|t| model.steps[*t].block == info.block && *t != s) else {
            let message = if target == Some(s) {
                "a step cannot be its own fallback".to_owned()
            } else if target.is_some() {
                format!(
                    "fallback step `{}` must be in the same list of steps",
                    name.value
                )
            } else {
                format!("fallback step `{}` does not exist", name.value)
            };
            let mut d = Diagnostic::error(E0043, name.span, message)
                .with_pointer(format!("{pointer}/fallback_step"));
            let siblings: Vec<&str> = model
                .steps
                .iter()
                .enumerate()
                .filter(|&(t, other)| other.block == info.block && t != s)
                .map(|(_, other)| other.step.id.value.as_str())
                .collect();
            if let Some(close) = target
                .is_none()
                .then(|| did_you_mean(&name.value, &siblings))
                .flatten()
            {
                d = d
                    .with_help(format!("did you mean `{close}`?"))
                    .with_fix(Fix::replace(
                        format!("replace with `{close}`"),
                        name.span,
                        format!("\"{close}\""),
                        None,
                    ));
            }
            sink.push(d);
            continue;
        };
        if let Some(previous) = graph.fallback_of[target] {
            sink.push(
                Diagnostic::error(
                    E0050,
                    name.span,
                    format!(
                        "`{}` is already the fallback of `{}`",
                        name.value, model.steps[previous].step.id.value
                    ),
                )
                .with_help("give each step its own fallback step")
                .with_pointer(format!("{pointer}/fallback_step")),
            );
            continue;
        }
        graph.fallback_of[target] = Some(s);
        graph.fallback[s] = Some(target);
        let fallback_step = model.steps[target].step;
        if let Some(first) = fallback_step.depends_on.first() {
            sink.push(
                Diagnostic::warning(
                    W0009,
                    first.span,
                    format!(
                        "`{}` runs as a fallback, so its `depends_on` is ignored",
                        name.value
                    ),
                )
                .with_help(format!(
                    "it runs when `{}` fails, after `{}`'s own dependencies",
                    info.step.id.value, info.step.id.value
                ))
                .with_pointer(format!("{}/depends_on", fallback_step.pointer)),
            );
        }
    }
}

fn report_cycles(model: &Model<'_>, graph: &Graph, sink: &mut Diagnostics) {
    let mut g: DiGraph<(), ()> = DiGraph::with_capacity(graph.deps.len(), graph.deps.len());
    for _ in &graph.deps {
        g.add_node(());
    }
    for (s, deps) in graph.deps.iter().enumerate() {
        for &d in deps {
            g.add_edge(NodeIndex::new(d), NodeIndex::new(s), ());
        }
    }
    // Kosaraju's walk keeps its own stack: a chain of any length cannot
    // overflow the thread's (Tarjan's recurses once a step).
    for component in kosaraju_scc(&g) {
        if component.len() < 2 {
            continue;
        }
        let members: Vec<StepIdx> = component.iter().map(|n| n.index()).collect();
        let cycle = shortest_cycle(&g, &members);
        let names: Vec<&str> = cycle
            .iter()
            .map(|&s| model.steps[s].step.id.value.as_str())
            .collect();
        let first = cycle[0];
        let info = &model.steps[first];
        // Point at the `depends_on` entry that closes the cycle.
        let closing = cycle[cycle.len() - 1];
        let closing_id = &model.steps[closing].step.id.value;
        let span = info
            .step
            .depends_on
            .iter()
            .find(|d| &d.value == closing_id)
            .map_or(info.step.id.span, |d| d.span);
        // A long cycle is named by its first steps and its last: the
        // whole of it would be one line per step, each labelled.
        let mut path: Vec<&str> = if names.len() > CYCLE_SHOWN {
            let mut shown = names[..CYCLE_SHOWN - 1].to_vec();
            shown.push("…");
            shown.push(names[names.len() - 1]);
            shown
        } else {
            names.clone()
        };
        path.push(names[0]);
        let size = if names.len() > CYCLE_SHOWN {
            format!(" of {} steps", names.len())
        } else {
            String::new()
        };
        let nested = model.blocks[info.block].role != BlockRole::Root;
        let mut d = Diagnostic::error(
            E0024,
            span,
            format!("dependency cycle{size}: {}", path.join(" → ")),
        )
        .with_pointer(format!("{}/depends_on", info.step.pointer));
        for window in cycle.windows(2).take(CYCLE_SHOWN - 1) {
            let (from, to) = (window[0], window[1]);
            if let Some(dep) = model.steps[to]
                .step
                .depends_on
                .iter()
                .find(|dep| dep.value == model.steps[from].step.id.value)
            {
                d = d.with_secondary(
                    dep.span,
                    format!(
                        "`{}` waits for `{}`",
                        model.steps[to].step.id.value, model.steps[from].step.id.value
                    ),
                );
            }
        }
        d = if nested {
            d.with_help("steps in a branch or body run in order: `depends_on` may only name earlier steps of the same list")
        } else {
            d.with_help("remove one of these dependencies")
        };
        sink.push(d);
    }
}

/// Steps of a cycle a diagnostic names and labels.
const CYCLE_SHOWN: usize = 8;

/// The shortest cycle through the smallest step of a strongly connected
/// `component`, in edge order (breadth-first search back to the start).
fn shortest_cycle(g: &DiGraph<(), ()>, component: &[StepIdx]) -> Vec<StepIdx> {
    let start = component.iter().copied().min().unwrap_or_default();
    let members: std::collections::HashSet<StepIdx> = component.iter().copied().collect();
    let mut parent: HashMap<StepIdx, StepIdx> = HashMap::new();
    let mut queue = VecDeque::from([start]);
    while let Some(current) = queue.pop_front() {
        let mut next: Vec<StepIdx> = g
            .neighbors(NodeIndex::new(current))
            .map(NodeIndex::index)
            .filter(|n| members.contains(n))
            .collect();
        next.sort_unstable();
        for n in next {
            if n == start {
                let mut cycle = vec![current];
                let mut at = current;
                while let Some(&p) = parent.get(&at) {
                    cycle.push(p);
                    at = p;
                }
                cycle.reverse();
                return cycle;
            }
            if n != start && !parent.contains_key(&n) {
                parent.insert(n, current);
                queue.push_back(n);
            }
        }
    }
    component.to_vec()
}

/// The steps guaranteed to have finished when each step starts.
///
/// `before(s)` = `before(parent)` ∪ for each dependency `d`: `before(d)` ∪
/// `{d}` ∪ the contents of `d` if it is a `parallel`/`all` step. Sets are
/// bitsets, computed on demand (only for steps whose references are
/// checked) without recursion, in dependency order.
pub struct Guarantees<'m, 'a> {
    model: &'m Model<'a>,
    graph: &'m Graph,
    memo: Vec<Option<BitSet>>,
}

/// A fixed-size set of step indices.
#[derive(Debug, Clone)]
struct BitSet(Vec<u64>);

impl BitSet {
    fn new(n: usize) -> BitSet {
        BitSet(vec![0; n.div_ceil(64)])
    }

    fn insert(&mut self, i: usize) -> bool {
        let (word, bit) = (i / 64, 1u64 << (i % 64));
        let fresh = self.0[word] & bit == 0;
        self.0[word] |= bit;
        fresh
    }

    fn contains(&self, i: usize) -> bool {
        self.0
            .get(i / 64)
            .is_some_and(|w| w & (1u64 << (i % 64)) != 0)
    }

    fn union(&mut self, other: &BitSet) {
        for (a, b) in self.0.iter_mut().zip(&other.0) {
            *a |= b;
        }
    }
}

impl<'m, 'a> Guarantees<'m, 'a> {
    /// Prepares the computation (done lazily per step).
    pub fn new(model: &'m Model<'a>, graph: &'m Graph) -> Guarantees<'m, 'a> {
        Guarantees {
            model,
            graph,
            memo: vec![None; model.steps.len()],
        }
    }

    /// Is `target` guaranteed finished when `step` starts?
    pub fn finished_before(&mut self, step: StepIdx, target: StepIdx) -> bool {
        self.ensure(step);
        self.memo[step]
            .as_ref()
            .is_some_and(|set| set.contains(target))
    }

    /// The sets `step`'s set is built from.
    fn prerequisites(&self, step: StepIdx) -> Vec<StepIdx> {
        if let Some(owner) = self.graph.fallback_of[step] {
            return vec![owner];
        }
        let mut out = self.graph.deps[step].clone();
        out.extend(self.model.steps[step].parent);
        out
    }

    /// Computes `step`'s set and every set it needs, deepest first.
    fn ensure(&mut self, step: StepIdx) {
        if self.memo[step].is_some() {
            return;
        }
        let mut on_stack = BitSet::new(self.model.steps.len());
        on_stack.insert(step);
        let mut stack = vec![(step, false)];
        while let Some((s, expanded)) = stack.pop() {
            if self.memo[s].is_some() {
                continue;
            }
            if expanded {
                let set = self.compute(s);
                self.memo[s] = Some(set);
                continue;
            }
            stack.push((s, true));
            for p in self.prerequisites(s) {
                // A step already on the stack is part of a cycle (reported
                // elsewhere): it contributes nothing.
                if self.memo[p].is_none() && on_stack.insert(p) {
                    stack.push((p, false));
                }
            }
        }
    }

    fn compute(&self, step: StepIdx) -> BitSet {
        let n = self.model.steps.len();
        // A fallback runs in place of the step it stands in for.
        if let Some(owner) = self.graph.fallback_of[step] {
            return self.memo[owner].clone().unwrap_or_else(|| BitSet::new(n));
        }
        let mut set = self.model.steps[step]
            .parent
            .and_then(|p| self.memo[p].clone())
            .unwrap_or_else(|| BitSet::new(n));
        for &d in &self.graph.deps[step] {
            if let Some(before_d) = &self.memo[d] {
                set.union(before_d);
            }
            if set.insert(d) {
                self.add_finished_children(d, &mut set);
            }
        }
        set
    }

    /// Marks the steps certainly finished inside a finished step: the
    /// contents of a `parallel` step in `all` mode.
    fn add_finished_children(&self, step: StepIdx, set: &mut BitSet) {
        let StepKind::Parallel(p) = &self.model.steps[step].step.kind else {
            return;
        };
        if p.mode.value != ParallelMode::All {
            return;
        }
        for &block in &self.model.steps[step].children {
            for &inner in &self.model.blocks[block].steps {
                if !self.graph.is_fallback_only(inner) && set.insert(inner) {
                    self.add_finished_children(inner, set);
                }
            }
        }
    }
}
