//! The small enums a workflow author chooses from, shared by the AST and the
//! Program's step table: retry backoff, error strategy, timeout behaviour and
//! the modes of loops and parallel steps. Their serde names are the JSON
//! spellings of the workflow language.

use std::fmt;

use serde::{Deserialize, Serialize};

macro_rules! spelled_enum {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident = $text:literal,)* }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
        pub enum $name {
            $($(#[$vmeta])* #[serde(rename = $text)] $variant,)*
        }

        impl $name {
            /// Every spelling, in declaration order.
            pub const SPELLINGS: &'static [&'static str] = &[$($text),*];

            /// Parses the JSON spelling.
            pub fn parse(text: &str) -> Option<$name> {
                match text {
                    $($text => Some($name::$variant),)*
                    _ => None,
                }
            }

            /// The JSON spelling.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)*
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

spelled_enum! {
    /// How the delay between retries grows.
    Backoff {
        /// Retry at once.
        None = "none",
        /// `delay` every time.
        Constant = "constant",
        /// `delay × (k+1)` before retry k (0-based).
        Linear = "linear",
        /// `delay × 2^k` before retry k (0-based).
        Exponential = "exponential",
    }
}

spelled_enum! {
    /// What happens when a step fails after its retries.
    Strategy {
        /// The step completes with a null output; the workflow continues.
        Ignore = "ignore",
        /// The workflow fails (the default).
        FailWorkflow = "fail_workflow",
        /// The named fallback step runs in place of the failed one.
        FallbackStep = "fallback_step",
        /// Retry with the step's policy, or a default one.
        Retry = "retry",
    }
}

spelled_enum! {
    /// What the workflow timeout does.
    OnTimeout {
        /// Fail the workflow (the default).
        Fail = "fail",
        /// Suspend it; resuming grants a fresh timeout.
        Suspend = "suspend",
        /// Cancel it.
        Cancel = "cancel",
    }
}

spelled_enum! {
    /// What a run does when its concurrency key has `limit` runs holding
    /// a slot (spec/flow-control.md).
    OnLimit {
        /// Wait its turn (the default).
        Queue = "queue",
        /// Take the slot of the oldest holder, which is cancelled.
        CancelRunning = "cancel_running",
        /// Fail at once (R0135).
        RefuseNewest = "refuse_newest",
    }
}

spelled_enum! {
    /// How a loop decides to run another iteration.
    LoopMode {
        /// Once per item of the `over` list.
        ForEach = "for_each",
        /// While `condition` holds, checked before each iteration.
        While = "while",
        /// Until `condition` holds, checked after each iteration.
        Until = "until",
    }
}

spelled_enum! {
    /// When a parallel step is finished.
    ParallelMode {
        /// When every branch finished.
        All = "all",
        /// When the first branch succeeded; the others are cancelled.
        Race = "race",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spellings_round_trip() {
        for s in Strategy::SPELLINGS {
            assert_eq!(Strategy::parse(s).map(Strategy::as_str), Some(*s));
        }
        assert_eq!(Backoff::parse("exponential"), Some(Backoff::Exponential));
        assert_eq!(LoopMode::parse("foreach"), None);
        assert_eq!(
            serde_json::to_string(&OnTimeout::Suspend).unwrap(),
            "\"suspend\""
        );
    }
}
