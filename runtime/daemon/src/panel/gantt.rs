//! A run's timeline: each step's attempts, retry waits and suspensions
//! as bars on one time axis, drawn from its event log as inline SVG (no
//! script needed; the live refresh redraws it).

use std::collections::HashMap;

use maud::{Markup, html};
use opcode_runtime::store::{EventName, LogEntry};
use opcode_runtime::time::parse_ms;
use serde_json::Value;

use super::clock::duration;

/// Steps the chart draws at most (it says how many it left out).
const ROWS: usize = 150;
/// The drawing's width, its label column and a row's height (SVG units).
const WIDTH: f64 = 900.0;
const LABELS: f64 = 190.0;
const ROW: f64 = 22.0;
const AXIS: f64 = 24.0;

/// What a bar stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// An attempt still running.
    Running,
    /// An attempt that ended as the step did.
    Completed,
    Failed,
    /// An attempt that failed and is retried.
    Retried,
    /// A failure `on_error: ignore` let through.
    Ignored,
    /// The wait between two attempts.
    Backoff,
    /// A decision or a signal held the step.
    Suspended,
    /// Skipped or cancelled without running.
    Skipped,
}

impl Kind {
    fn class(self) -> &'static str {
        match self {
            Kind::Running => "running",
            Kind::Completed => "completed",
            Kind::Failed => "failed",
            Kind::Retried => "retried",
            Kind::Ignored => "ignored",
            Kind::Backoff => "backoff",
            Kind::Suspended => "suspended",
            Kind::Skipped => "skipped",
        }
    }

    fn words(self) -> &'static str {
        match self {
            Kind::Running => "running",
            Kind::Completed => "completed",
            Kind::Failed => "failed",
            Kind::Retried => "failed, retried",
            Kind::Ignored => "failed, ignored",
            Kind::Backoff => "waiting to retry",
            Kind::Suspended => "suspended on a decision or signal",
            Kind::Skipped => "skipped",
        }
    }
}

/// One bar: from `start` to `end` (ms since the epoch; open while `None`).
#[derive(Debug, Clone)]
struct Bar {
    start: u64,
    end: Option<u64>,
    kind: Kind,
    attempt: u64,
}

/// The bars of each step, in the order the steps first appear.
#[derive(Debug, Default)]
struct Timeline {
    order: Vec<String>,
    bars: HashMap<String, Vec<Bar>>,
    first: Option<u64>,
    last: u64,
}

impl Timeline {
    fn of(entries: &[LogEntry]) -> Timeline {
        let mut t = Timeline::default();
        for entry in entries {
            let Some(at) = parse_ms(&entry.at) else {
                continue;
            };
            t.first.get_or_insert(at);
            t.last = t.last.max(at);
            let Some(step) = &entry.step_id else {
                continue;
            };
            let payload = || serde_json::from_str::<Value>(&entry.payload).unwrap_or_default();
            match entry.name() {
                Some(EventName::StepStarted) => {
                    let attempt = payload()["attempt"].as_u64().unwrap_or(1);
                    t.close(step, at, None);
                    t.open(step, at, Kind::Running, attempt);
                }
                Some(EventName::StepSuspended) => {
                    let attempt = t.attempt(step);
                    t.close(step, at, None);
                    t.open(step, at, Kind::Suspended, attempt);
                }
                Some(EventName::StepRetrying) => {
                    let attempt = t.attempt(step);
                    t.close(step, at, Some(Kind::Retried));
                    t.open(step, at, Kind::Backoff, attempt);
                }
                Some(EventName::StepCompleted) => t.end(step, at, Kind::Completed),
                Some(EventName::StepFailed) => t.end(step, at, Kind::Failed),
                Some(EventName::StepIgnored) => t.end(step, at, Kind::Ignored),
                Some(EventName::StepSkipped) => t.end(step, at, Kind::Skipped),
                _ => {}
            }
        }
        t
    }

    fn row(&mut self, step: &str) -> &mut Vec<Bar> {
        if !self.bars.contains_key(step) {
            self.order.push(step.to_owned());
        }
        self.bars.entry(step.to_owned()).or_default()
    }

    fn attempt(&mut self, step: &str) -> u64 {
        self.row(step).last().map_or(1, |b| b.attempt)
    }

    fn open(&mut self, step: &str, at: u64, kind: Kind, attempt: u64) {
        self.row(step).push(Bar {
            start: at,
            end: None,
            kind,
            attempt,
        });
    }

    /// Ends the step's open bar at `at`, as `kind` if it was an attempt.
    fn close(&mut self, step: &str, at: u64, kind: Option<Kind>) {
        if let Some(bar) = self.row(step).last_mut().filter(|b| b.end.is_none()) {
            bar.end = Some(at);
            if let (Some(kind), Kind::Running) = (kind, bar.kind) {
                bar.kind = kind;
            }
        }
    }

    /// The step ended as `kind`: its open bar closes (a suspension ends,
    /// an attempt takes the outcome); a step that never ran gets a mark.
    fn end(&mut self, step: &str, at: u64, kind: Kind) {
        let row = self.row(step);
        match row.last_mut() {
            Some(bar) if bar.end.is_none() => {
                bar.end = Some(at);
                if bar.kind == Kind::Running {
                    bar.kind = kind;
                }
            }
            Some(_) => {}
            None => row.push(Bar {
                start: at,
                end: Some(at),
                kind,
                attempt: 0,
            }),
        }
    }
}

/// The chart of `entries` (a run's log, in order). Bars still open reach
/// `now_ms` while the run goes (`live`), else the log's last entry.
pub fn chart(entries: &[LogEntry], live: bool, now_ms: u64) -> Markup {
    let timeline = Timeline::of(entries);
    let Some(first) = timeline.first else {
        return html! { p.empty { "Nothing has happened yet." } };
    };
    if timeline.order.is_empty() {
        return html! { p.empty { "No step has started yet." } };
    }
    let end = if live {
        now_ms.max(timeline.last)
    } else {
        timeline.last
    };
    let span = end.saturating_sub(first).max(1) as f64;
    let x = |at: u64| LABELS + (at.saturating_sub(first) as f64 / span) * (WIDTH - LABELS - 10.0);
    let shown = &timeline.order[..timeline.order.len().min(ROWS)];
    let height = AXIS + ROW * shown.len() as f64 + 6.0;
    let ticks: Vec<(f64, String)> = (0..=4)
        .map(|i| {
            let at = first + (span as u64) * i / 4;
            (x(at), format!("+{}", duration(at - first)))
        })
        .collect();
    html! {
        figure.gantt {
            svg xmlns="http://www.w3.org/2000/svg" viewBox={"0 0 " (WIDTH) " " (height)} role="img"
                aria-label={"Timeline of " (shown.len()) " steps over " (duration(end - first))} {
                @for (i, (tx, label)) in ticks.iter().enumerate() {
                    @let anchor = match i { 0 => "start", 4 => "end", _ => "middle" };
                    line.tick x1=(tx) y1=(AXIS - 6.0) x2=(tx) y2=(height) {}
                    text.tick x=(tx) y="12" text-anchor=(anchor) { (label) }
                }
                @for (i, step) in shown.iter().enumerate() {
                    @let y = AXIS + ROW * i as f64;
                    g.step data-step=(step) {
                        text.label x=(LABELS - 8.0) y=(y + 15.0) text-anchor="end" { (step) }
                        @for bar in &timeline.bars[step] {
                            @let stop = bar.end.unwrap_or(end);
                            @let (x0, x1) = (x(bar.start), x(stop));
                            rect class={"bar " (bar.kind.class())} data-attempt=(bar.attempt) x=(x0) y=(y + 4.0)
                                width=((x1 - x0).max(3.0)) height=(ROW - 8.0) rx="2" {
                                title { (step) @if bar.attempt > 0 { " attempt " (bar.attempt) } ": " (bar.kind.words())
                                    @if bar.end.is_none() { " (still going)" } ", " (duration(stop - bar.start)) }
                            }
                        }
                    }
                }
            }
            figcaption {
                @for kind in [Kind::Completed, Kind::Running, Kind::Retried, Kind::Backoff, Kind::Suspended, Kind::Failed] {
                    span class={"key " (kind.class())} { (kind.words()) }
                }
                @if timeline.order.len() > ROWS { " " span.muted { (timeline.order.len() - ROWS) " more steps not drawn" } }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use opcode_runtime::store::EntryKind;

    fn entry(seq: u64, second: u32, event: &str, step: Option<&str>, payload: &str) -> LogEntry {
        LogEntry {
            seq,
            at: format!("2026-12-03T10:00:{second:02}.000Z"),
            kind: EntryKind::Record,
            event_type: event.to_owned(),
            step_id: step.map(str::to_owned),
            version: 1,
            payload: payload.to_owned(),
        }
    }

    #[test]
    fn attempts_backoffs_and_suspensions_become_bars() {
        let log = [
            entry(1, 0, "workflow_started", None, "{}"),
            entry(2, 1, "step_started", Some("fetch"), r#"{"attempt":1}"#),
            entry(3, 2, "step_retrying", Some("fetch"), r#"{"attempt":2}"#),
            entry(4, 4, "step_started", Some("fetch"), r#"{"attempt":2}"#),
            entry(5, 5, "step_completed", Some("fetch"), "{}"),
            entry(6, 5, "step_started", Some("review"), r#"{"attempt":1}"#),
            entry(7, 6, "step_suspended", Some("review"), "{}"),
            entry(8, 9, "step_completed", Some("review"), "{}"),
            entry(
                9,
                9,
                "step_skipped",
                Some("notify"),
                r#"{"reason":"guard"}"#,
            ),
        ];
        let t = Timeline::of(&log);
        assert_eq!(t.order, ["fetch", "review", "notify"]);
        let kinds = |step: &str| t.bars[step].iter().map(|b| b.kind).collect::<Vec<_>>();
        assert_eq!(
            kinds("fetch"),
            [Kind::Retried, Kind::Backoff, Kind::Completed]
        );
        assert_eq!(kinds("review"), [Kind::Running, Kind::Suspended]);
        assert_eq!(kinds("notify"), [Kind::Skipped]);
        assert!(t.bars.values().flatten().all(|b| b.end.is_some()));
        let svg = chart(&log, false, 0).into_string();
        assert_eq!(svg.matches("<rect").count(), 6, "{svg}");
        assert!(svg.contains("fetch attempt 2: completed, 1.0 s"), "{svg}");
    }

    #[test]
    fn a_running_attempt_reaches_now_while_the_run_goes() {
        let log = [entry(
            1,
            0,
            "step_started",
            Some("slow"),
            r#"{"attempt":1}"#,
        )];
        let now = parse_ms("2026-12-03T10:00:30.000Z").unwrap();
        let svg = chart(&log, true, now).into_string();
        assert!(svg.contains("(still going), 30.0 s"), "{svg}");
        assert!(svg.contains("+30.0 s"), "{svg}");
    }
}
