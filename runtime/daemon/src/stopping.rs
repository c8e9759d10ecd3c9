//! The daemon's stop, in order: calls that wait on a run answer first
//! (R0134 names the run, which the next start carries on), and only once
//! their answers are out do the MCP sessions end. Cut off instead, a
//! waiting `opcode.run` got an HTTP 500 with no body and its caller lost
//! the run's id.

use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tokio_util::task::task_tracker::TaskTrackerToken;

/// Whether the daemon is stopping, and the MCP requests still being
/// answered. Clones share both.
#[derive(Clone, Default)]
pub struct Stopping {
    begun: CancellationToken,
    requests: TaskTracker,
}

impl std::fmt::Debug for Stopping {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stopping")
            .field("begun", &self.begun.is_cancelled())
            .field("requests", &self.requests.len())
            .finish()
    }
}

impl Stopping {
    /// Resolves once the stop has begun.
    pub async fn begun(&self) {
        self.begun.cancelled().await;
    }

    /// Counts a request being answered until what this returns is dropped.
    pub fn answering(&self) -> Answering {
        Answering(self.requests.token())
    }

    /// Begins the stop: waiting calls answer, and the requests being
    /// served are waited for, `within` at most.
    pub async fn begin(&self, within: Duration) {
        self.begun.cancel();
        self.requests.close();
        let _ = tokio::time::timeout(within, self.requests.wait()).await;
    }
}

/// A request counted as being answered while this lives.
#[derive(Debug)]
pub struct Answering(#[allow(dead_code, reason = "held for its drop")] TaskTrackerToken);

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn the_stop_waits_for_the_requests_it_makes_answer() {
        let stopping = Stopping::default();
        let request = {
            let stopping = stopping.clone();
            tokio::spawn(async move {
                let _answering = stopping.answering();
                stopping.begun().await;
                tokio::time::sleep(Duration::from_millis(30)).await;
                "answered"
            })
        };
        tokio::task::yield_now().await;
        let begun = tokio::time::Instant::now();
        stopping.begin(Duration::from_secs(5)).await;
        assert_eq!(begun.elapsed(), Duration::from_millis(30));
        assert_eq!(request.await.unwrap(), "answered");
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_that_never_answers_holds_the_stop_only_so_long() {
        let stopping = Stopping::default();
        let _answering = stopping.answering();
        let begun = tokio::time::Instant::now();
        stopping.begin(Duration::from_secs(2)).await;
        assert_eq!(begun.elapsed(), Duration::from_secs(2));
    }
}
