//! The slots of concurrency keys (spec/flow-control.md, "Admission"),
//! checked against every store: a limit is never passed, however many ask
//! at once (on PostgreSQL, from three connections as three daemons would);
//! a slot comes free when its run ends; waiting runs are admitted lowest
//! priority number first, then oldest.

use std::sync::Arc;

use opcode_runtime::store::{
    Admission, Admitted, Commit, Debounced, EventStore, WorkflowStatus, WorkflowUpdate,
};

use crate::{at, block_on, create, stores};

mod rates;

/// Asking at second `n` with `priority`, a level a minute (aging).
fn ask(key: &str, id: &str, limit: u32, priority: u8, n: u32) -> Admission {
    Admission {
        key: key.into(),
        workflow_id: id.into(),
        limit,
        turn: u64::from(n) * 1000 + u64::from(priority) * 60_000,
        wait: true,
        at: at(n),
    }
}

async fn end(store: &Arc<dyn EventStore>, id: &str) {
    let commit = Commit {
        workflow_id: id.into(),
        update: Some(WorkflowUpdate {
            status: WorkflowStatus::Completed,
            updated_at: at(59),
            completed_at: Some(at(59)),
            ..WorkflowUpdate::default()
        }),
        ..Commit::default()
    };
    store.commit(commit).await.unwrap();
}

#[test]
fn a_limit_is_never_passed_and_a_freed_slot_goes_to_the_next_in_turn() {
    for (name, store, _dir) in stores() {
        block_on(async {
            for id in ["a", "b", "c", "d", "other"] {
                store.commit(create(id)).await.unwrap();
            }
            assert_eq!(
                store.admit(ask("k", "a", 1, 5, 1)).await.unwrap(),
                Admitted::Holds,
                "{name}"
            );
            let b = store.admit(ask("k", "b", 1, 5, 2)).await.unwrap();
            assert_eq!(
                b,
                Admitted::Waits {
                    position: 0,
                    holders: vec!["a".into()]
                },
                "{name}"
            );
            // Later, but more urgent: it goes before b.
            let c = store.admit(ask("k", "c", 1, 1, 3)).await.unwrap();
            assert_eq!(
                c,
                Admitted::Waits {
                    position: 0,
                    holders: vec!["a".into()]
                },
                "{name}"
            );
            let b = store.admit(ask("k", "b", 1, 5, 2)).await.unwrap();
            assert!(
                matches!(b, Admitted::Waits { position: 1, .. }),
                "{name}: asked again: {b:?}"
            );
            // Another key has slots of its own.
            assert_eq!(
                store.admit(ask("j", "other", 1, 5, 4)).await.unwrap(),
                Admitted::Holds,
                "{name}"
            );
            let refused = store
                .admit(Admission {
                    wait: false,
                    ..ask("k", "d", 1, 5, 5)
                })
                .await
                .unwrap();
            assert_eq!(
                refused,
                Admitted::Refused {
                    holders: vec!["a".into()]
                },
                "{name}"
            );
            assert_eq!(store.waiting().await.unwrap(), [("k".into(), 2)], "{name}");
            assert!(
                store.promote("k").await.unwrap().is_empty(),
                "{name}: a still holds it"
            );
            end(&store, "a").await;
            assert_eq!(store.promote("k").await.unwrap(), ["c"], "{name}");
            told_once(&store, "c", name).await;
            assert!(
                store.promote("k").await.unwrap().is_empty(),
                "{name}: given once"
            );
            assert_eq!(
                store.admit(ask("k", "c", 1, 1, 3)).await.unwrap(),
                Admitted::Holds,
                "{name}"
            );
            end(&store, "c").await;
            assert_eq!(store.promote("k").await.unwrap(), ["b"], "{name}");
            assert!(store.waiting().await.unwrap().is_empty(), "{name}");
        });
    }
}

/// Run `id` was told of its slot with the promotion: its admission is in
/// its inbox, once (a process that promotes and dies before telling can
/// leave no slot held by a run that does not know).
async fn told_once(store: &Arc<dyn EventStore>, id: &str, name: &str) {
    let mail = store.inbox(Some(id)).await.unwrap();
    assert_eq!(mail.len(), 1, "{name}: {mail:?}");
    let event: opcode_vm::event::Event = serde_json::from_str(&mail[0].event).unwrap();
    assert_eq!(
        event,
        opcode_vm::event::Event::Admitted { refused: None },
        "{name}"
    );
}

/// A store's name, the stores of the processes sharing it, its temp dir.
pub(crate) type Sharers = (
    &'static str,
    Vec<Arc<dyn EventStore>>,
    Option<tempfile::TempDir>,
);

/// Each store as the processes that would share it: memory and libSQL
/// alone, PostgreSQL as three stores on one database (three daemons).
pub(crate) fn sharers() -> Vec<Sharers> {
    #[cfg_attr(not(feature = "postgres"), allow(unused_mut))]
    let mut sets: Vec<_> = stores()
        .into_iter()
        .filter(|(name, _, _)| *name != "postgres")
        .map(|(name, store, dir)| (name, vec![store], dir))
        .collect();
    #[cfg(feature = "postgres")]
    if let Some(url) = crate::pg::fresh_database() {
        let three = block_on(async {
            let mut three: Vec<Arc<dyn EventStore>> = Vec::new();
            for _ in 0..3 {
                let store = opcode_runtime::store::postgres::PostgresStore::connect(&url);
                three.push(Arc::new(store.await.unwrap()));
            }
            three
        });
        sets.push(("postgres", three, None));
    }
    sets
}

#[test]
fn many_asking_at_once_get_no_more_slots_than_the_limit() {
    for (name, askers, _dir) in sharers() {
        block_on(async {
            let ids: Vec<String> = (0..30).map(|i| format!("r{i:02}")).collect();
            for id in &ids {
                askers[0].commit(create(id)).await.unwrap();
            }
            let asking = ids.iter().enumerate().map(|(i, id)| {
                let asker = askers[i % askers.len()].clone();
                let admission = ask("deploy:prod", id, 2, 5, i as u32);
                async move { asker.admit(admission).await.unwrap() }
            });
            let answers = futures::future::join_all(asking).await;
            let holding = answers.iter().filter(|a| **a == Admitted::Holds).count();
            assert_eq!(holding, 2, "{name}: {answers:?}");
        });
    }
}

fn delivery(key: &str, inputs: &str, now_ms: u64, keep_last: bool) -> Debounced {
    Debounced {
        template: "build".into(),
        key: key.into(),
        inputs: inputs.into(),
        now_ms,
        period_ms: 1_000,
        max_wait_ms: 2_500,
        keep_last,
    }
}

#[test]
fn debounced_deliveries_gather_into_one_pending_start_per_key() {
    for (name, store, _dir) in stores() {
        block_on(async {
            let first = store
                .debounce(delivery("main", "1", 10_000, true))
                .await
                .unwrap();
            assert_eq!((first.due_ms, first.deliveries), (11_000, 1), "{name}");
            let second = store
                .debounce(delivery("main", "2", 10_600, true))
                .await
                .unwrap();
            assert_eq!(
                (second.due_ms, second.inputs.as_str()),
                (11_600, "2"),
                "{name}: keep last"
            );
            // Pushed no further than max_wait after the first delivery.
            let third = store
                .debounce(delivery("main", "3", 12_000, true))
                .await
                .unwrap();
            assert_eq!((third.due_ms, third.deliveries), (12_500, 3), "{name}");
            let kept = store
                .debounce(delivery("dev", "a", 10_000, false))
                .await
                .unwrap();
            let kept = store
                .debounce(delivery("dev", "b", 10_100, false))
                .await
                .unwrap()
                .inputs
                == kept.inputs;
            assert!(kept, "{name}: keep first");
            assert!(
                store.due_starts(11_000, 10).await.unwrap().is_empty(),
                "{name}"
            );
            let due = store.due_starts(12_500, 10).await.unwrap();
            let keys: Vec<&str> = due.iter().map(|p| p.key.as_str()).collect();
            assert_eq!(keys, ["dev", "main"], "{name}: earliest first");
            // A delivery after the start was taken opens a new one, which
            // forgetting the old one leaves.
            let newer = store.debounce(Debounced {
                now_ms: 20_000,
                ..delivery("dev", "c", 0, false)
            });
            let newer = newer.await.unwrap();
            assert_eq!(
                newer.deliveries, 3,
                "{name}: not forgotten yet, it gathers on"
            );
            store.forget_start(&due[1]).await.unwrap();
            store.forget_start(&due[0]).await.unwrap();
            assert!(
                store.due_starts(u64::MAX / 2, 10).await.unwrap().is_empty(),
                "{name}"
            );
            let reopened = store
                .debounce(delivery("dev", "d", 30_000, false))
                .await
                .unwrap();
            assert_eq!(
                (reopened.deliveries, reopened.inputs.as_str()),
                (1, "d"),
                "{name}"
            );
        });
    }
}

#[test]
fn a_waiting_run_rises_a_level_each_aging_step() {
    for (name, store, _dir) in stores() {
        block_on(async {
            for id in ["holder", "batch", "urgent-early", "urgent-late"] {
                store.commit(create(id)).await.unwrap();
            }
            assert_eq!(
                store.admit(ask("k", "holder", 1, 5, 0)).await.unwrap(),
                Admitted::Holds
            );
            // Priority 9 at 0 s; urgent ones (0) at 8 and 10 minutes (a level a minute).
            store.admit(ask("k", "batch", 1, 9, 0)).await.unwrap();
            store
                .admit(ask("k", "urgent-early", 1, 0, 480))
                .await
                .unwrap();
            store
                .admit(ask("k", "urgent-late", 1, 0, 600))
                .await
                .unwrap();
            let mut order = Vec::new();
            let mut last = "holder".to_owned();
            for _ in 0..3 {
                end(&store, &last).await;
                last = store.promote("k").await.unwrap().remove(0);
                order.push(last.clone());
            }
            assert_eq!(order, ["urgent-early", "batch", "urgent-late"], "{name}");
        });
    }
}
