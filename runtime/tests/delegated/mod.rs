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

#[test]
fn one_writer_per_worktree_across_processes_by_lease() {
    use opcode_runtime::store::WorktreeLease;
    use std::time::Duration;
    for (name, store, _dir) in stores() {
        block_on(async {
            let lease = |owner: &str, holder: &str| WorktreeLease {
                worktree: "/srv/repo".into(),
                owner: owner.into(),
                holder: holder.into(),
            };
            let minute = Duration::from_mins(1);
            let took = store.take_worktree(lease("a:1:1", "r1/fix"), minute, None);
            assert_eq!(took.await.unwrap(), lease("a:1:1", "r1/fix"), "{name}");
            // Another process while the lease lives: refused, told who holds it.
            let refused = store.take_worktree(lease("b:2:2", "r2/fix"), minute, None);
            assert_eq!(refused.await.unwrap(), lease("a:1:1", "r1/fix"), "{name}");
            // Its holder found dead: taken over.
            let over = store.take_worktree(lease("b:2:2", "r2/fix"), minute, Some("a:1:1".into()));
            assert_eq!(over.await.unwrap(), lease("b:2:2", "r2/fix"), "{name}");
            // Let go of (the holder keeps none), then free for the next.
            store
                .keep_worktrees("b:2:2", Vec::new(), minute)
                .await
                .unwrap();
            let next = store.take_worktree(lease("c:3:3", "r3/fix"), Duration::ZERO, None);
            assert_eq!(next.await.unwrap(), lease("c:3:3", "r3/fix"), "{name}");
            // A lease not renewed lapses.
            tokio::time::sleep(Duration::from_millis(20)).await;
            let after = store.take_worktree(lease("d:4:4", "r4/fix"), minute, None);
            assert_eq!(after.await.unwrap(), lease("d:4:4", "r4/fix"), "{name}");
            // Kept by its owner, it holds.
            store
                .keep_worktrees("d:4:4", vec!["/srv/repo".into()], minute)
                .await
                .unwrap();
            let later = store.take_worktree(lease("e:5:5", "r5/fix"), minute, None);
            assert_eq!(later.await.unwrap().owner, "d:4:4", "{name}");
        });
    }
}
