//! What delegated agents' calls leave, on every backend (spec/agents.md):
//! sessions' turns in the order they were taken, a re-run's turn replacing
//! its first, the oldest let go past the bound, each session its own; and
//! calls' transcripts, a call made again replacing its attempt's.

use opcode_runtime::store::{SessionTurn, Transcript};

use super::{block_on, stores};

fn turn(session: &str, run: &str, step: &str, text: &str) -> SessionTurn {
    SessionTurn {
        session: session.into(),
        workflow_id: run.into(),
        step: step.into(),
        turn: format!("{{\"summary\":\"{text}\"}}"),
    }
}

#[test]
fn turns_keep_their_order_a_rerun_replaces_its_turn_and_the_oldest_go() {
    for (name, store, _dir) in stores() {
        block_on(async {
            for (run, text) in [("r1", "one"), ("r2", "two"), ("r3", "three")] {
                store
                    .record_turn(turn("chat", run, "fix", text), 10)
                    .await
                    .unwrap();
            }
            store
                .record_turn(turn("other", "r1", "fix", "elsewhere"), 10)
                .await
                .unwrap();
            // The second run's step ran again: its turn is replaced, and newest.
            store
                .record_turn(turn("chat", "r2", "fix", "two again"), 10)
                .await
                .unwrap();
            let turns = store.session_turns("chat").await.unwrap();
            assert_eq!(
                turns,
                [
                    "{\"summary\":\"one\"}",
                    "{\"summary\":\"three\"}",
                    "{\"summary\":\"two again\"}"
                ],
                "{name}"
            );
            // Past the bound, the oldest go.
            store
                .record_turn(turn("chat", "r4", "fix", "four"), 2)
                .await
                .unwrap();
            let turns = store.session_turns("chat").await.unwrap();
            assert_eq!(
                turns,
                ["{\"summary\":\"two again\"}", "{\"summary\":\"four\"}"],
                "{name}"
            );
            assert_eq!(store.session_turns("other").await.unwrap().len(), 1);
            assert!(store.session_turns("none").await.unwrap().is_empty());
        });
    }
}

#[test]
fn a_transcript_is_kept_by_run_step_and_attempt() {
    for (name, store, _dir) in stores() {
        block_on(async {
            let kept = |attempt, text: &str| Transcript {
                workflow_id: "r1".into(),
                step: "fix[0]".into(),
                attempt,
                text: text.into(),
            };
            store.keep_transcript(kept(1, "first\n")).await.unwrap();
            store.keep_transcript(kept(2, "second\n")).await.unwrap();
            // The call of attempt 1 made again (after a crash).
            store.keep_transcript(kept(1, "again\n")).await.unwrap();
            let read = |attempt| store.transcript("r1", "fix[0]", attempt);
            assert_eq!(read(1).await.unwrap().as_deref(), Some("again\n"), "{name}");
            assert_eq!(
                read(2).await.unwrap().as_deref(),
                Some("second\n"),
                "{name}"
            );
            assert_eq!(read(3).await.unwrap(), None, "{name}");
            assert_eq!(store.transcript("r2", "fix[0]", 1).await.unwrap(), None);
        });
    }
}
