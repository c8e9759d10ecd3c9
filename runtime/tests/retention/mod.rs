//! Retention in the store contract (spec/store.md, "Retention"), on every
//! backend: which finished runs expire, and what pruning leaves.

use opcode_runtime::store::{
    Commit, DecisionChange, DecisionRow, EventStore, Expiry, Listing, NewEntry, Prune,
    PrunedFilter, StepRow, StepStatus, Transcript, WorkflowStatus,
};

use super::{at, block_on, create, entry, stores};

/// Creates run `id` of `template`, ended `status` at second `ended`.
async fn ended(
    store: &dyn EventStore,
    id: &str,
    template: &str,
    status: WorkflowStatus,
    ended: u32,
) {
    let mut commit = create(id);
    if let Some(new) = commit.create.as_mut() {
        new.template_name = Some(template.into());
        new.template_version = Some(1);
    }
    if let Some(update) = commit.update.as_mut() {
        update.status = status;
        update.completed_at = Some(at(ended));
        update.updated_at = at(ended);
    }
    store.commit(commit).await.unwrap();
}

fn expiry(ended_before: Option<u32>, keep_last: Option<u32>) -> Expiry {
    Expiry {
        ended_before: ended_before.map(at),
        keep_last,
        limit: 100,
    }
}

#[test]
fn finished_runs_expire_by_age_or_beyond_the_newest_of_their_template() {
    for (name, store, _dir) in stores() {
        block_on(async {
            ended(store.as_ref(), "a1", "a", WorkflowStatus::Completed, 10).await;
            ended(store.as_ref(), "a2", "a", WorkflowStatus::Failed, 20).await;
            ended(store.as_ref(), "a3", "a", WorkflowStatus::Cancelled, 30).await;
            ended(store.as_ref(), "b1", "b", WorkflowStatus::Completed, 15).await;
            // Not finished: never expire, whatever their age.
            store.commit(create("running")).await.unwrap();
            ended(store.as_ref(), "held", "a", WorkflowStatus::Suspended, 1).await;
            let expired = |e| store.expired(e);
            assert_eq!(
                expired(expiry(None, None)).await.unwrap(),
                Vec::<String>::new(),
                "{name}"
            );
            assert_eq!(
                expired(expiry(Some(20), None)).await.unwrap(),
                ["a1", "b1"],
                "{name}: ended before the cutoff, oldest first"
            );
            assert_eq!(
                expired(expiry(None, Some(1))).await.unwrap(),
                ["a1", "a2"],
                "{name}: all but the newest of each template"
            );
            assert_eq!(
                expired(expiry(Some(16), Some(2))).await.unwrap(),
                ["a1", "b1"],
                "{name}: either rule lets a run go"
            );
            let one = Expiry {
                limit: 1,
                ..expiry(None, Some(0))
            };
            assert_eq!(
                expired(one).await.unwrap(),
                ["a1"],
                "{name}: at most the limit"
            );
        });
    }
}

#[test]
fn pruning_deletes_a_finished_run_whole_and_leaves_a_tombstone() {
    for (name, store, _dir) in stores() {
        block_on(async {
            ended(store.as_ref(), "done", "t", WorkflowStatus::Completed, 10).await;
            let decision = DecisionRow {
                id: "review".into(),
                step_id: "review".into(),
                prompt: "ok?".into(),
                options: "[]".into(),
                context: "{}".into(),
                created_at: at(1),
                ..DecisionRow::default()
            };
            let more = Commit {
                workflow_id: "done".into(),
                after_seq: 2,
                entries: vec![entry(2)],
                steps: vec![StepRow {
                    step_id: "s".into(),
                    status: StepStatus::Completed,
                    ..StepRow::default()
                }],
                decisions: vec![DecisionChange::Ask(Box::new(decision))],
                ..Commit::default()
            };
            store.commit(more).await.unwrap();
            store.send("done", "{}".into(), at(11)).await.unwrap();
            store.commit(create("running")).await.unwrap();
            for run in ["done", "running"] {
                let kept = Transcript {
                    workflow_id: run.into(),
                    step: "fix".into(),
                    attempt: 1,
                    text: "{}\n".into(),
                };
                store.keep_transcript(kept).await.unwrap();
            }
            let runs = vec![
                Prune {
                    id: "done".into(),
                    export: Some("/exports/done.test.json".into()),
                },
                Prune {
                    id: "running".into(),
                    export: None,
                },
                Prune {
                    id: "never".into(),
                    export: None,
                },
            ];
            let deleted = store.prune(runs, at(50)).await.unwrap();
            assert_eq!(deleted, ["done"], "{name}: only what has ended goes");
            let transcript = |run| store.transcript(run, "fix", 1);
            assert_eq!(transcript("done").await.unwrap(), None, "{name}");
            assert!(transcript("running").await.unwrap().is_some(), "{name}");
            assert!(store.workflow("done").await.unwrap().is_none(), "{name}");
            assert!(
                store.entries("done", 0, false).await.unwrap().is_empty(),
                "{name}"
            );
            assert!(store.steps("done").await.unwrap().is_empty(), "{name}");
            assert!(
                store
                    .decisions(Some("done"), None)
                    .await
                    .unwrap()
                    .is_empty(),
                "{name}"
            );
            assert!(
                store.inbox(Some("done")).await.unwrap().is_empty(),
                "{name}"
            );
            assert!(store.workflow("running").await.unwrap().is_some(), "{name}");
            let filter = PrunedFilter {
                id: Some("done".into()),
                ..PrunedFilter::default()
            };
            let tombstones = store.pruned(filter.clone()).await.unwrap();
            assert_eq!(tombstones.len(), 1, "{name}");
            let tomb = &tombstones[0];
            assert_eq!(tomb.status, WorkflowStatus::Completed, "{name}");
            assert_eq!(tomb.template_name.as_deref(), Some("t"), "{name}");
            assert_eq!(
                tomb.completed_at.as_deref(),
                Some(at(10).as_str()),
                "{name}"
            );
            assert_eq!(tomb.pruned_at, at(50), "{name}");
            assert_eq!(
                tomb.export.as_deref(),
                Some("/exports/done.test.json"),
                "{name}"
            );
            assert_eq!(
                store.count(Listing::Pruned(filter)).await.unwrap(),
                1,
                "{name}"
            );
            let none = PrunedFilter {
                template_name: Some("other".into()),
                ..PrunedFilter::default()
            };
            assert!(store.pruned(none).await.unwrap().is_empty(), "{name}");
            assert!(
                store
                    .expired(expiry(None, Some(0)))
                    .await
                    .unwrap()
                    .is_empty(),
                "{name}"
            );
            assert_eq!(store.forget_pruned(at(50)).await.unwrap(), 0, "{name}");
            assert_eq!(store.forget_pruned(at(51)).await.unwrap(), 1, "{name}");
            let all = PrunedFilter::default();
            assert!(
                store.pruned(all).await.unwrap().is_empty(),
                "{name}: forgotten"
            );
        });
    }
}

#[test]
fn a_large_value_goes_with_the_last_run_that_refers_to_it() {
    let content = serde_json::Value::from("x".repeat(100_000));
    let big = serde_json::json!({"content": content}).to_string();
    for (name, store, _dir) in stores() {
        block_on(async {
            for (id, second) in [("one", 10), ("two", 20)] {
                ended(store.as_ref(), id, "t", WorkflowStatus::Completed, second).await;
                let more = Commit {
                    workflow_id: id.into(),
                    after_seq: 2,
                    entries: vec![NewEntry {
                        payload: big.clone(),
                        ..entry(2)
                    }],
                    ..Commit::default()
                };
                store.commit(more).await.unwrap();
            }
            // The large part is the string: the object around it is small.
            let hash = blob_hash(&content.to_string());
            let store = store.as_ref();
            let kept = || async { store.blob(&hash).await.unwrap().is_some() };
            // The in-memory store keeps values where they are.
            let outlines = name != "memory";
            assert_eq!(kept().await, outlines, "{name}");
            let prune = |id: &str| Prune {
                id: id.into(),
                export: None,
            };
            store.prune(vec![prune("one")], at(50)).await.unwrap();
            assert_eq!(kept().await, outlines, "{name}: run two still refers to it");
            let entries = store.entries("two", 0, false).await.unwrap();
            assert_eq!(entries[2].payload, big, "{name}");
            store.prune(vec![prune("two")], at(51)).await.unwrap();
            assert!(!kept().await, "{name}: nothing refers to it any more");
        });
    }
}

/// The key a large value is kept by.
fn blob_hash(text: &str) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(text.as_bytes());
    let hex = digest.iter().fold(String::new(), |mut hex, b| {
        use std::fmt::Write as _;
        let _ = write!(hex, "{b:02x}");
        hex
    });
    format!("sha256:{hex}")
}
