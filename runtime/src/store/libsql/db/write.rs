//! The commit path: a batch of commits in one transaction, each refused
//! alone when it must be, written again with a savepoint per commit when a
//! failure may have left part of one.

use std::future::Future;

use libsql::Value;

use super::columns::{create_params, decision_params, get, step_params, update_params};
use super::{Db, ROWS_PER_INSERT, Table, backend, run, seq};
use crate::store::commit::{self, Write};
use crate::store::{
    Commit, DecisionChange, Fence, LeaseChange, StoreError, StoreResult, TimerChange, folded,
};

impl Db {
    /// Writes `commits` in one transaction and returns each one's result.
    /// A commit refused before it wrote anything (a stale sequence, an
    /// existing id) leaves the others be; any other failure rolls the batch
    /// back and writes it again with a savepoint per commit.
    pub fn write(&self, commits: &[Commit]) -> Vec<StoreResult<()>> {
        self.block(async {
            let outcome = match self.write_all(commits).await {
                Ok(results) => {
                    // Committed without savepoints: every source it wrote is stored.
                    let mut sources = self.sources.borrow_mut();
                    let written = std::mem::take(&mut sources.writing);
                    sources.stored.extend(written);
                    Ok(results)
                }
                Err(StoreError::Backend(_)) if commits.len() > 1 => {
                    self.sources.borrow_mut().writing.clear();
                    self.write_each(commits).await
                }
                outcome => outcome,
            };
            self.sources.borrow_mut().writing.clear();
            outcome.unwrap_or_else(|e| commits.iter().map(|_| Err(e.clone())).collect())
        })
    }

    /// The fast path: no savepoints. Fails (after rolling back) on the first
    /// error that may have left a partial write.
    async fn write_all(&self, commits: &[Commit]) -> StoreResult<Vec<StoreResult<()>>> {
        let w = &self.writes;
        run(&w.begin, Vec::new()).await?;
        let mut results = Vec::with_capacity(commits.len());
        for commit in commits {
            match self.apply(commit).await {
                Ok(()) => results.push(Ok(())),
                // A refusal is made before the commit writes anything.
                Err(
                    e @ (StoreError::Conflict { .. }
                    | StoreError::Exists(_)
                    | StoreError::Outdated(_)
                    | StoreError::NotFound(_)
                    | StoreError::Fenced(_)),
                ) => {
                    results.push(Err(e));
                }
                Err(e) => {
                    let _ = run(&w.rollback, Vec::new()).await;
                    return Err(e);
                }
            }
        }
        self.end().await?;
        Ok(results)
    }

    /// The careful path: a savepoint per commit.
    async fn write_each(&self, commits: &[Commit]) -> StoreResult<Vec<StoreResult<()>>> {
        let w = &self.writes;
        run(&w.begin, Vec::new()).await?;
        let mut results = Vec::with_capacity(commits.len());
        for commit in commits {
            let result = match run(&w.savepoint, Vec::new()).await {
                Ok(_) => self.apply(commit).await,
                Err(e) => Err(e),
            };
            let undone = match &result {
                Ok(()) => Ok(0),
                Err(_) => run(&w.rollback_to, Vec::new()).await,
            };
            match undone.and(run(&w.release, Vec::new()).await) {
                Ok(_) => results.push(result),
                Err(e) => results.push(Err(e)),
            }
        }
        self.end().await?;
        Ok(results)
    }

    /// Refuses `new` if its template has a version newer than its own.
    async fn check_latest(&self, name: &str, version: i64) -> StoreResult<()> {
        let latest = self
            .query_one(
                "SELECT max(version) FROM workflow_templates WHERE name = ?1",
                vec![name.into()],
                |row| get::<Option<i64>>(row, 0),
            )
            .await?
            .flatten();
        match latest {
            Some(latest) if latest > version => Err(StoreError::Outdated(name.to_owned())),
            _ => Ok(()),
        }
    }

    /// Refuses the commit unless `fence` (if any) still holds the lease of
    /// `id` and, with `from`, the log of `id` ends at `from`: one read
    /// makes both checks.
    async fn check_head(
        &self,
        id: &str,
        fence: Option<&Fence>,
        from: Option<u64>,
    ) -> StoreResult<()> {
        let head = self
            .query_one(
                concat!(
                    "SELECT lease_owner, lease_epoch, ",
                    last_seq_sql!(),
                    " FROM workflows WHERE id = ?1"
                ),
                vec![id.into()],
                |row| {
                    Ok((
                        get::<Option<String>>(row, 0)?,
                        get::<i64>(row, 1)? as u64,
                        get::<i64>(row, 2)? as u64,
                    ))
                },
            )
            .await?;
        let Some((owner, epoch, last_seq)) = head else {
            return Err(StoreError::NotFound(id.to_owned()));
        };
        if let Some(fence) = fence
            && (owner.as_deref() != Some(fence.owner.as_str()) || epoch != fence.epoch)
        {
            return Err(StoreError::Fenced(id.to_owned()));
        }
        match from {
            Some(expected) if expected != last_seq => Err(StoreError::Conflict {
                id: id.to_owned(),
                expected,
                actual: last_seq,
            }),
            _ => Ok(()),
        }
    }

    /// Runs `work` in a transaction of its own: committed if it succeeds,
    /// rolled back if not.
    pub(super) async fn in_transaction<T>(
        &self,
        work: impl Future<Output = StoreResult<T>>,
    ) -> StoreResult<T> {
        run(&self.writes.begin, Vec::new()).await?;
        match work.await {
            Ok(value) => {
                self.end().await?;
                Ok(value)
            }
            Err(e) => {
                let _ = run(&self.writes.rollback, Vec::new()).await;
                Err(e)
            }
        }
    }

    /// Commits the open transaction, or rolls it back if that fails.
    pub(super) async fn end(&self) -> StoreResult<()> {
        let w = &self.writes;
        if let Err(e) = run(&w.end, Vec::new()).await {
            let _ = run(&w.rollback, Vec::new()).await;
            return Err(e);
        }
        Ok(())
    }

    /// Makes the writes of `c` ([`commit::plan`]), in the open transaction.
    /// Refusals (`Conflict`, `Exists`, `NotFound`, `Outdated`, `Fenced`)
    /// come before anything but the content-addressed source row is written.
    /// An append that changes no derived state writes no `workflows` row:
    /// one read checks its sequence, and its fence with it (decision 0041;
    /// the plan puts the fence first).
    async fn apply(&self, c: &Commit) -> StoreResult<()> {
        let id = c.workflow_id.as_str();
        let writes = commit::plan(c)?;
        let bare = writes
            .iter()
            .any(|w| matches!(w, Write::Advance { update: None, .. }));
        let mut fence = None;
        for write in writes {
            match write {
                Write::Fence(held) if bare => fence = Some(held),
                write => self.make(id, write, fence).await?,
            }
        }
        Ok(())
    }

    /// Makes one write of a commit to workflow `id`; `fence` is the
    /// commit's, when left for a bare advance to check.
    async fn make(&self, id: &str, write: Write<'_>, fence: Option<&Fence>) -> StoreResult<()> {
        let w = &self.writes;
        match write {
            Write::RequireLatest { template, version } => {
                self.check_latest(template, version).await?;
            }
            Write::Fence(fence) => self.check_head(id, Some(fence), None).await?,
            Write::Create {
                new,
                update,
                last_seq,
                lease,
            } => {
                if !self.sources.borrow().stored.contains(&new.source.hash) {
                    let source = &new.source;
                    let params = vec![
                        source.hash.as_str().into(),
                        source.definition.as_str().into(),
                        source.program.clone().into(),
                    ];
                    run(&w.add_source, params).await?;
                    self.sources.borrow_mut().writing.push(source.hash.clone());
                }
                // The row is written whole: its state, sequence and lease too.
                let created = run(&w.create, create_params(new, update, last_seq, lease)).await?;
                if created == 0 {
                    return Err(StoreError::Exists(new.id.clone()));
                }
                if let Some(agent) = &new.agent_id {
                    let seen = vec![agent.as_str().into(), new.created_at.as_str().into()];
                    run(&w.see_agent, seen).await?;
                }
            }
            Write::Advance { from, to, update } => {
                // Without an update the row is not written: the log's end
                // is checked instead.
                let Some(update) = update else {
                    return self.check_head(id, fence, Some(from)).await;
                };
                let mut params = vec![id.into(), seq(from), seq(to)];
                params.extend(update_params(id, update).into_iter().skip(1));
                if run(&w.advance_and_update, params).await? == 0 {
                    return Err(self.conflict(id, from).await);
                }
            }
            Write::Update(u) => {
                if run(&w.update_workflow, update_params(id, u)).await? == 0 {
                    return Err(StoreError::NotFound(id.to_owned()));
                }
            }
            Write::PutBlobs(blobs) => {
                for b in blobs {
                    run(
                        &w.add_blob,
                        vec![b.hash.as_str().into(), b.text.as_str().into()],
                    )
                    .await?;
                }
            }
            Write::Append { first_seq, entries } => {
                let rows = folded::rows(first_seq, entries);
                for rows in rows.chunks(ROWS_PER_INSERT) {
                    let mut params = Vec::with_capacity(rows.len() * 8);
                    for r in rows {
                        params.extend([
                            id.into(),
                            seq(r.seq),
                            r.at.into(),
                            r.kind.as_str().into(),
                            r.event_type.into(),
                            r.step_id.into(),
                            i64::from(r.version).into(),
                            r.payload.as_ref().into(),
                        ]);
                    }
                    self.run_rows(Table::Events, rows.len(), params).await?;
                }
            }
            Write::PutSteps(steps) => {
                for steps in steps.chunks(ROWS_PER_INSERT) {
                    let params = steps.iter().flat_map(|s| step_params(id, s)).collect();
                    self.run_rows(Table::Steps, steps.len(), params).await?;
                }
            }
            Write::Timer(TimerChange::Set(t)) => {
                let params = vec![
                    id.into(),
                    seq(t.timer_id),
                    t.due_at.as_str().into(),
                    t.purpose.as_str().into(),
                    t.step_id.clone().into(),
                ];
                run(&w.set_timer, params).await?;
            }
            Write::Timer(TimerChange::Clear(timer)) => {
                run(&w.clear_timer, vec![id.into(), seq(*timer)]).await?;
            }
            Write::Decision(DecisionChange::Ask(d)) => {
                run(&w.ask, decision_params(id, d)).await?;
            }
            Write::Decision(DecisionChange::Settle {
                id: decision,
                status,
                resolution,
                resolved_by,
                at,
            }) => {
                let params = vec![
                    id.into(),
                    decision.as_str().into(),
                    status.as_str().into(),
                    resolution.clone().into(),
                    resolved_by.clone().into(),
                    at.as_str().into(),
                ];
                run(&w.settle, params).await?;
            }
            Write::TakeInbox(message) => {
                run(&w.take_inbox, vec![message.into()]).await?;
            }
            Write::Lease(LeaseChange::Take { owner, ttl }) => {
                let until = crate::time::from_now(*ttl);
                let params = vec![id.into(), owner.as_str().into(), until.into()];
                run(&w.take_lease, params).await?;
            }
            Write::Lease(LeaseChange::Release { owner }) => {
                run(&w.release_lease, vec![id.into(), owner.as_str().into()]).await?;
            }
        }
        Ok(())
    }

    /// Inserts `rows` rows into `table` with one statement, prepared once
    /// per row count.
    async fn run_rows(&self, table: Table, rows: usize, params: Vec<Value>) -> StoreResult<usize> {
        let cached = self.batches.borrow_mut().remove(&(table, rows));
        let stmt = if let Some(stmt) = cached {
            stmt
        } else {
            let sql = table.insert_sql(rows);
            self.conn.prepare(&sql).await.map_err(backend)?
        };
        let result = run(&stmt, params).await;
        self.batches.borrow_mut().insert((table, rows), stmt);
        result
    }

    async fn conflict(&self, id: &str, expected: u64) -> StoreError {
        let actual = self
            .query_one(
                concat!("SELECT ", last_seq_sql!(), " FROM workflows WHERE id = ?1"),
                vec![id.into()],
                |row| get::<i64>(row, 0),
            )
            .await;
        match actual {
            Ok(Some(last_seq)) => StoreError::Conflict {
                id: id.to_owned(),
                expected,
                actual: last_seq as u64,
            },
            Ok(None) => StoreError::NotFound(id.to_owned()),
            Err(e) => e,
        }
    }
}
