//! Pages of `opcode.query` listings in the store contract, on every
//! backend: filtered and paged in the store, with their totals.

use opcode_runtime::store::{
    Commit, DecisionChange, DecisionFilter, DecisionRow, DecisionStatus, Listing,
};

use super::{at, block_on, create, stores};

fn asked(id: &str, second: u32, agent: Option<&str>) -> DecisionChange {
    DecisionChange::Ask(Box::new(DecisionRow {
        id: id.into(),
        step_id: id.into(),
        prompt: "ok?".into(),
        options: "[]".into(),
        context: "{}".into(),
        target_agent: agent.map(str::to_owned),
        created_at: at(second),
        ..DecisionRow::default()
    }))
}

#[test]
fn decisions_are_paged_and_counted_by_status_run_and_agent() {
    for (name, store, _dir) in stores() {
        block_on(async {
            store.commit(create("w")).await.unwrap();
            let commit = Commit {
                workflow_id: "w".into(),
                after_seq: 2,
                decisions: vec![
                    asked("d1", 1, None),
                    asked("d2", 2, Some("ann")),
                    asked("d3", 3, Some("bob")),
                    asked("d4", 4, None),
                ],
                ..Commit::default()
            };
            store.commit(commit).await.unwrap();
            let settle = Commit {
                workflow_id: "w".into(),
                after_seq: 2,
                decisions: vec![DecisionChange::Settle {
                    id: "d4".into(),
                    status: DecisionStatus::Resolved,
                    resolution: Some("{}".into()),
                    resolved_by: None,
                    at: at(5),
                }],
                ..Commit::default()
            };
            store.commit(settle).await.unwrap();
            let ids = |filter: DecisionFilter| {
                let store = &store;
                async move {
                    let rows = store.decision_page(filter.clone()).await.unwrap();
                    let total = store.count(Listing::Decisions(filter)).await.unwrap();
                    (rows.into_iter().map(|d| d.id).collect::<Vec<_>>(), total)
                }
            };
            let pending = DecisionFilter {
                status: Some(DecisionStatus::Pending),
                ..DecisionFilter::default()
            };
            assert_eq!(
                ids(pending.clone()).await,
                (vec!["d1".into(), "d2".into(), "d3".into()], 3),
                "{name}"
            );
            let page = DecisionFilter {
                limit: Some(1),
                offset: 1,
                ..pending.clone()
            };
            assert_eq!(
                ids(page).await,
                (vec!["d2".to_owned()], 3),
                "{name}: the total ignores the page"
            );
            let for_ann = DecisionFilter {
                agent_id: Some("ann".into()),
                ..pending
            };
            assert_eq!(
                ids(for_ann).await,
                (vec!["d1".into(), "d2".into()], 2),
                "{name}: hers and anyone's"
            );
            let all = DecisionFilter {
                workflow_id: Some("w".into()),
                ..DecisionFilter::default()
            };
            assert_eq!(ids(all).await.1, 4, "{name}");
        });
    }
}
