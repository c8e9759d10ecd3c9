//! Commits sent together, on every backend: each gets its own answer, and
//! a refused one leaves the others intact.

use opcode_runtime::store::{
    Commit, Fence, NewEntry, StepRow, StepStatus, StoreError, TemplateDraft,
};

use super::{at, block_on, create, entry, stores};

#[test]
fn a_failed_commit_in_a_batch_leaves_the_others_intact() {
    for (name, store, _dir) in stores() {
        block_on(async {
            store.commit(create("a")).await.unwrap();
            store.commit(create("b")).await.unwrap();
            let good = Commit {
                workflow_id: "a".into(),
                after_seq: 2,
                entries: vec![entry(2)],
                ..Commit::default()
            };
            let stale = Commit {
                workflow_id: "b".into(),
                after_seq: 0,
                entries: vec![entry(2)],
                steps: vec![StepRow {
                    step_id: "x".into(),
                    status: StepStatus::Running,
                    ..StepRow::default()
                }],
                ..Commit::default()
            };
            // Sent together, so the libSQL store writes them in one transaction.
            let (a, b) = tokio::join!(store.commit(good), store.commit(stale));
            assert!(a.is_ok(), "{name}");
            assert!(matches!(b, Err(StoreError::Conflict { .. })), "{name}");
            assert_eq!(
                store.workflow("a").await.unwrap().unwrap().last_seq,
                3,
                "{name}"
            );
            assert_eq!(
                store.workflow("b").await.unwrap().unwrap().last_seq,
                2,
                "{name}"
            );
            assert!(store.steps("b").await.unwrap().is_empty(), "{name}");
        });
    }
}

/// Many commits at once, refusals of every kind among them: each gets its
/// own answer (a store that writes them as one group must not let one
/// refusal take the others down, nor one's answer reach another).
#[test]
fn commits_sent_together_each_get_their_own_answer() {
    for (name, store, _dir) in stores() {
        block_on(async {
            // All landing: a group written whole.
            let created =
                futures::future::join_all((0..40).map(|i| store.commit(create(&format!("w{i}")))));
            assert!(created.await.iter().all(Result::is_ok), "{name}");
            // Template `t` at version 2: a run made from version 1 taken for
            // the latest is refused as outdated.
            let draft = TemplateDraft {
                name: "t".into(),
                definition: "{}".into(),
                triggers: "{}".into(),
                at: at(0),
                ..TemplateDraft::default()
            };
            store.define_template(draft.clone()).await.unwrap();
            store.define_template(draft).await.unwrap();
            let outdated = |id: &str| {
                let mut commit = create(id);
                if let Some(new) = commit.create.as_mut() {
                    new.template_name = Some("t".into());
                    new.template_version = Some(1);
                    new.template_latest = true;
                }
                commit
            };
            let advance = |i: u32, after_seq: u64| Commit {
                workflow_id: format!("w{i}"),
                after_seq,
                entries: vec![entry(2)],
                ..Commit::default()
            };
            let mut commits = Vec::new();
            let mut expected = Vec::new();
            for i in 0..40 {
                let (commit, answer) = match i % 10 {
                    3 => (advance(i, 0), "conflict"),
                    5 => (create(&format!("w{i}")), "exists"),
                    7 => (advance(i + 1000, 2), "not_found"),
                    9 => (
                        Commit {
                            after_seq: 7,
                            ..create(&format!("n{i}"))
                        },
                        "bad_create",
                    ),
                    1 if i > 1 => (outdated(&format!("o{i}")), "outdated"),
                    _ => (advance(i, 2), "ok"),
                };
                commits.push(commit);
                expected.push(answer);
            }
            commits.push(Commit {
                fence: Some(Fence {
                    owner: "someone else".into(),
                    epoch: 1,
                }),
                ..advance(0, 2)
            });
            expected.push("fenced");
            // A second commit of one run, after the first: both land.
            commits.push(advance(1, 3));
            expected.push("ok");
            let answers = futures::future::join_all(commits.into_iter().map(|c| store.commit(c)));
            for (i, (answer, want)) in answers.await.into_iter().zip(expected).enumerate() {
                let got = match answer {
                    Ok(()) => "ok",
                    Err(StoreError::Conflict {
                        expected: 0,
                        actual: 2,
                        ..
                    }) => "conflict",
                    Err(StoreError::Conflict {
                        expected: 7,
                        actual: 0,
                        ..
                    }) => "bad_create",
                    Err(StoreError::Exists(_)) => "exists",
                    Err(StoreError::Outdated(_)) => "outdated",
                    Err(StoreError::NotFound(_)) => "not_found",
                    Err(StoreError::Fenced(_)) => "fenced",
                    Err(e) => panic!("{name}: commit {i}: {e}"),
                };
                assert_eq!(got, want, "{name}: commit {i}");
            }
            for i in (1..40).step_by(10).skip(1) {
                let id = format!("o{i}");
                assert!(store.workflow(&id).await.unwrap().is_none(), "{name}: {id}");
            }
            for i in 0..40 {
                let row = store.workflow(&format!("w{i}")).await.unwrap().unwrap();
                let want = match i {
                    1 => 4,
                    _ if matches!(i % 10, 3 | 5 | 7 | 9) || i % 10 == 1 => 2,
                    _ => 3,
                };
                assert_eq!(row.last_seq, want, "{name}: w{i}");
            }
        });
    }
}

/// A commit is all or nothing whichever of its writes the database
/// refuses, on a store's first commits as on later ones (a PostgreSQL
/// statement prepared late once ran after `COMMIT`): here a text the
/// database may refuse (a NUL) in an entry, then in a step row.
#[test]
fn a_commit_a_write_of_which_fails_leaves_nothing() {
    for (name, store, _dir) in stores() {
        block_on(async {
            store.commit(create("w")).await.unwrap();
            let poisoned = [
                Commit {
                    workflow_id: "w".into(),
                    after_seq: 2,
                    entries: vec![NewEntry {
                        payload: "{\"text\":\"a\u{0}b\"}".into(),
                        ..entry(2)
                    }],
                    ..Commit::default()
                },
                Commit {
                    workflow_id: "w".into(),
                    after_seq: 2,
                    entries: vec![entry(2)],
                    steps: vec![StepRow {
                        step_id: "s".into(),
                        status: StepStatus::Completed,
                        output: Some("a\u{0}b".into()),
                        ..StepRow::default()
                    }],
                    ..Commit::default()
                },
            ];
            for commit in poisoned {
                let before = store.workflow("w").await.unwrap().unwrap().last_seq;
                let written = store.commit(commit).await;
                let row = store.workflow("w").await.unwrap().unwrap();
                let entries = store.entries("w", 0, false).await.unwrap();
                if written.is_ok() {
                    assert_eq!(entries.len() as u64, row.last_seq, "{name}");
                } else {
                    assert_eq!(row.last_seq, before, "{name}: the sequence moved");
                    assert_eq!(entries.len() as u64, before, "{name}: entries kept");
                    assert!(store.steps("w").await.unwrap().is_empty(), "{name}");
                }
            }
        });
    }
}

/// The same class as a run's second commit after its first: a long chain
/// of each of several runs' commits, all sent at once and interleaved,
/// lands whole and in order on every backend (decision 0054), however the
/// store groups them.
#[test]
fn chains_of_commits_sent_at_once_land_in_the_order_sent() {
    const RUNS: usize = 6;
    const CHAIN: u64 = 25;
    for (name, store, _dir) in stores() {
        block_on(async {
            for r in 0..RUNS {
                store.commit(create(&format!("chain{r}"))).await.unwrap();
            }
            let mut sent = Vec::new();
            for n in 0..CHAIN {
                for r in 0..RUNS {
                    sent.push(store.commit(Commit {
                        workflow_id: format!("chain{r}"),
                        after_seq: 2 + n,
                        entries: vec![NewEntry {
                            payload: format!("{{\"n\":{n}}}"),
                            ..entry(3)
                        }],
                        ..Commit::default()
                    }));
                }
            }
            let answers = futures::future::join_all(sent).await;
            assert!(answers.iter().all(Result::is_ok), "{name}: {answers:?}");
            for r in 0..RUNS {
                let id = format!("chain{r}");
                let row = store.workflow(&id).await.unwrap().unwrap();
                assert_eq!(row.last_seq, 2 + CHAIN, "{name}: {id}");
                let payloads: Vec<String> = store
                    .entries(&id, 2, false)
                    .await
                    .unwrap()
                    .into_iter()
                    .map(|e| e.payload)
                    .collect();
                let expected: Vec<String> = (0..CHAIN).map(|n| format!("{{\"n\":{n}}}")).collect();
                assert_eq!(payloads, expected, "{name}: {id}");
            }
        });
    }
}
