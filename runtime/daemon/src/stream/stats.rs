//! What this daemon's stream triggers did: counters and gauges for
//! `/metrics` (what KEDA reads) and, for the panel, each trigger's state
//! and its last dead letters (spec/triggers-stream.md, "Metrics").

use std::collections::BTreeMap;
use std::sync::Mutex;

use prometheus::{IntCounterVec, IntGaugeVec, Opts};

use crate::metrics::Metrics;

/// The dead letters read back for the panel, per trigger.
pub const KEPT: usize = 20;

/// One dead letter, as the panel lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetter {
    /// Its position in the dead-letter topic.
    pub at: String,
    /// Its position in the topic it came from.
    pub position: String,
    /// Why, as a code (R0137, R0108).
    pub code: String,
    /// Why, in words.
    pub error: String,
}

/// One trigger's state.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Seen {
    /// The broker and topic it reads.
    pub broker: String,
    /// The topic.
    pub topic: String,
    /// Messages by outcome: started, duplicate, dead_letter, failed.
    pub outcomes: BTreeMap<&'static str, u64>,
    /// Messages the group has not been given yet.
    pub lag: Option<u64>,
    /// Given, not acknowledged.
    pub pending: u64,
    /// Whether back-pressure stops reading now.
    pub paused: bool,
    /// The last problem reaching the broker, if the last try failed.
    pub error: Option<String>,
    /// The last dead letters of its topic (whichever daemon wrote them),
    /// newest first.
    pub dead: Vec<DeadLetter>,
}

/// The stream triggers' metrics and state.
pub struct Streams {
    messages: IntCounterVec,
    dead_letters: IntCounterVec,
    lag: IntGaugeVec,
    pending: IntGaugeVec,
    paused: IntGaugeVec,
    state: Mutex<BTreeMap<String, Seen>>,
}

impl std::fmt::Debug for Streams {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Streams").finish_non_exhaustive()
    }
}

fn vec_of<T>(made: Result<T, prometheus::Error>) -> T {
    made.unwrap_or_else(|e| unreachable!("{e}"))
}

impl Streams {
    /// Fresh state, its metrics registered with `metrics`.
    pub fn new(metrics: &Metrics) -> Streams {
        let counter = |name: &str, help: &str, labels: &[&str]| {
            vec_of(IntCounterVec::new(Opts::new(name, help), labels))
        };
        let gauge = |name: &str, help: &str, labels: &[&str]| {
            vec_of(IntGaugeVec::new(Opts::new(name, help), labels))
        };
        let streams = Streams {
            messages: counter(
                "opcode_stream_messages_total",
                "Stream trigger messages, by template and outcome (started, duplicate, dead_letter, failed).",
                &["template", "outcome"],
            ),
            dead_letters: counter(
                "opcode_stream_dead_letters_total",
                "Stream trigger messages sent to the dead-letter topic, by template and code.",
                &["template", "code"],
            ),
            lag: gauge(
                "opcode_stream_lag",
                "Messages of a trigger's topic not yet given to its consumer group.",
                &["template", "topic"],
            ),
            pending: gauge(
                "opcode_stream_pending",
                "Messages of a trigger's topic given to a member and not acknowledged.",
                &["template", "topic"],
            ),
            paused: gauge(
                "opcode_stream_paused",
                "1 while a trigger reads nothing: its template has max_backlog runs not ended.",
                &["template"],
            ),
            state: Mutex::new(BTreeMap::new()),
        };
        metrics.register(Box::new(streams.messages.clone()));
        metrics.register(Box::new(streams.dead_letters.clone()));
        metrics.register(Box::new(streams.lag.clone()));
        metrics.register(Box::new(streams.pending.clone()));
        metrics.register(Box::new(streams.paused.clone()));
        streams
    }

    fn with<R>(&self, template: &str, f: impl FnOnce(&mut Seen) -> R) -> R {
        let mut state = self
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        f(state.entry(template.to_owned()).or_default())
    }

    /// A trigger of `template` reads `topic` of `broker` now.
    pub fn reading(&self, template: &str, broker: &str, topic: &str) {
        self.with(template, |seen| {
            broker.clone_into(&mut seen.broker);
            topic.clone_into(&mut seen.topic);
        });
    }

    /// A trigger stopped: its state and gauges go.
    pub fn stopped(&self, template: &str) {
        let mut state = self
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(seen) = state.remove(template) {
            let _ = self.lag.remove_label_values(&[template, &seen.topic]);
            let _ = self.pending.remove_label_values(&[template, &seen.topic]);
            let _ = self.paused.remove_label_values(&[template]);
        }
    }

    /// A message of `template` came to `outcome`.
    pub fn message(&self, template: &str, outcome: &'static str) {
        self.messages.with_label_values(&[template, outcome]).inc();
        self.with(template, |seen| {
            *seen.outcomes.entry(outcome).or_default() += 1;
        });
    }

    /// A message of `template` was dead-lettered with `code`.
    pub fn dead_letter(&self, template: &str, code: &str) {
        self.dead_letters.with_label_values(&[template, code]).inc();
        self.message(template, "dead_letter");
    }

    /// The last dead letters of `template`'s topic, as read back from it.
    pub fn dead_letters(&self, template: &str, letters: Vec<DeadLetter>) {
        self.with(template, |seen| seen.dead = letters);
    }

    /// The topic's backlog for the trigger's group.
    pub fn backlog(&self, template: &str, lag: Option<u64>, pending: u64) {
        let topic = self.with(template, |seen| {
            seen.lag = lag;
            seen.pending = pending;
            seen.topic.clone()
        });
        if let Some(lag) = lag {
            self.lag
                .with_label_values(&[template, &topic])
                .set(i64::try_from(lag).unwrap_or(i64::MAX));
        }
        self.pending
            .with_label_values(&[template, &topic])
            .set(i64::try_from(pending).unwrap_or(i64::MAX));
    }

    /// Whether back-pressure stops `template`'s trigger now.
    pub fn paused(&self, template: &str, paused: bool) {
        self.paused
            .with_label_values(&[template])
            .set(i64::from(paused));
        self.with(template, |seen| seen.paused = paused);
    }

    /// The last problem reaching the broker (`None`: the last try worked).
    pub fn error(&self, template: &str, error: Option<String>) {
        self.with(template, |seen| seen.error = error);
    }

    /// Every trigger's state, by template.
    pub fn seen(&self) -> BTreeMap<String, Seen> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }
}
