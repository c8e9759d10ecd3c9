//! Timers, decisions and the inbox in the store contract, on every backend.

use opcode_runtime::store::{
    Commit, DecisionChange, DecisionRow, DecisionStatus, TimerChange, TimerRow,
};

use super::{at, block_on, create, stores};

#[test]
fn timers_decisions_and_inbox() {
    for (name, store, _dir) in stores() {
        block_on(async {
            store.commit(create("w")).await.unwrap();
            store.commit(create("v")).await.unwrap();
            let timer = |id, s| {
                TimerChange::Set(TimerRow {
                    timer_id: id,
                    due_at: at(s),
                    purpose: "decision_timeout".into(),
                    step_id: Some("review".into()),
                })
            };
            let decision = DecisionRow {
                id: "review[0]".into(),
                step_id: "review".into(),
                prompt: "ok?".into(),
                options: "[]".into(),
                context: "{}".into(),
                created_at: at(1),
                ..DecisionRow::default()
            };
            let commit = Commit {
                workflow_id: "w".into(),
                after_seq: 2,
                timers: vec![timer(1, 30), timer(2, 20)],
                decisions: vec![DecisionChange::Ask(Box::new(decision))],
                ..Commit::default()
            };
            store.commit(commit).await.unwrap();
            let commit = Commit {
                workflow_id: "v".into(),
                after_seq: 2,
                timers: vec![timer(1, 10)],
                ..Commit::default()
            };
            store.commit(commit).await.unwrap();
            assert_eq!(
                store.next_timers(10).await.unwrap(),
                [("v".into(), at(10)), ("w".into(), at(20))],
                "{name}"
            );
            let pending = store
                .decisions(Some("w"), Some(DecisionStatus::Pending))
                .await
                .unwrap();
            assert_eq!(pending.len(), 1, "{name}");
            assert_eq!(pending[0].workflow_id, "w", "{name}");
            let settle = |status| DecisionChange::Settle {
                id: "review[0]".into(),
                status,
                resolution: Some("{\"choice\":\"yes\"}".into()),
                resolved_by: Some("me".into()),
                at: at(5),
            };
            let id = store
                .send("w", "{\"type\":\"resume\"}".into(), at(6))
                .await
                .unwrap();
            assert_eq!(store.inbox(None).await.unwrap().len(), 1, "{name}");
            let commit = Commit {
                workflow_id: "w".into(),
                after_seq: 2,
                timers: vec![TimerChange::Clear(2), TimerChange::Clear(1)],
                // The first settlement wins; the second finds nothing pending.
                decisions: vec![
                    settle(DecisionStatus::Resolved),
                    settle(DecisionStatus::Cancelled),
                ],
                inbox_taken: vec![id],
                ..Commit::default()
            };
            store.commit(commit).await.unwrap();
            assert_eq!(store.next_timers(10).await.unwrap().len(), 1, "{name}");
            let all = store.decisions(None, None).await.unwrap();
            assert_eq!(all[0].status.as_str(), "resolved", "{name}");
            assert_eq!(all[0].resolved_by.as_deref(), Some("me"), "{name}");
            assert!(
                store
                    .decisions(None, Some(DecisionStatus::Pending))
                    .await
                    .unwrap()
                    .is_empty()
            );
            assert!(store.inbox(Some("w")).await.unwrap().is_empty(), "{name}");
        });
    }
}
