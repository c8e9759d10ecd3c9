//! Group commit on PostgreSQL: commits that arrive while the lanes are
//! busy are written together, in one transaction, and every statement of
//! a transaction — `BEGIN`, each commit's checks and changes, `COMMIT`,
//! then the commits' notices — is sent at once: one round trip for the
//! whole group (a second only on a connection that has not prepared them
//! yet).
//!
//! A group is all or nothing: when any of its commits is refused (or any
//! statement fails), nothing of it is kept, and each commit is written
//! again alone, so that each gets its own answer. Refusals are rare (a
//! takeover, a race with another writer), so a group almost always lands
//! whole.

use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};

use deadpool_postgres::{Object, Pool};
use futures::future::join_all;
use tokio::sync::{Notify, Semaphore, mpsc, oneshot};
use tokio_postgres::types::ToSql;

use super::commit::{self, Statement};
use super::{CHANNEL, backend, pool_error};
use crate::store::{Commit, StoreError, StoreResult};

/// At most this many transactions are in flight at once.
const LANES: usize = 4;

/// At most this many commits share one transaction.
const MAX_GROUP: usize = 256;

/// A commit waiting for its turn, and where its answer goes.
type Job = (Commit, oneshot::Sender<StoreResult<()>>);

/// The queue of commits to write; written by a task of its own, so a
/// caller that gives up never leaves a transaction halfway.
pub(super) struct Committer {
    queue: mpsc::UnboundedSender<Job>,
}

impl Committer {
    /// Starts the task that writes on connections from `pool`; it ends
    /// when the committer is dropped, after the commits queued.
    pub fn start(pool: &Pool) -> Committer {
        let (queue, jobs) = mpsc::unbounded_channel();
        tokio::spawn(serve(pool.clone(), jobs));
        Committer { queue }
    }

    /// Writes `commit`, all or nothing.
    pub async fn commit(&self, commit: Commit) -> StoreResult<()> {
        let (reply, answer) = oneshot::channel();
        let commit = crate::store::blobs::outlined(commit);
        self.queue
            .send((commit, reply))
            .map_err(|_| StoreError::Closed)?;
        answer.await.map_err(|_| StoreError::Closed)?
    }
}

/// Takes every commit queued when a lane frees up, and writes them as one
/// group on that lane; but a commit of a run whose earlier commit a lane
/// is still writing waits for that lane (with every later commit of its
/// run), so a run's commits land in the order they were sent (decision
/// 0054).
async fn serve(pool: Pool, mut jobs: mpsc::UnboundedReceiver<Job>) {
    let lanes = Arc::new(Semaphore::new(LANES));
    let in_flight: Arc<Mutex<HashSet<String>>> = Arc::default();
    let written = Arc::new(Notify::new());
    let mut waiting: VecDeque<Job> = VecDeque::new();
    let mut open = true;
    loop {
        if waiting.is_empty() {
            match jobs.recv().await {
                Some(job) => waiting.push_back(job),
                None => return,
            }
        }
        let Ok(lane) = lanes.clone().acquire_owned().await else {
            return;
        };
        while open {
            match jobs.try_recv() {
                Ok(job) => waiting.push_back(job),
                Err(mpsc::error::TryRecvError::Empty) => break,
                Err(mpsc::error::TryRecvError::Disconnected) => open = false,
            }
        }
        let group = {
            let mut busy = in_flight.lock().unwrap_or_else(PoisonError::into_inner);
            let group = take_group(&mut waiting, |(c, _)| &c.workflow_id, &busy, MAX_GROUP);
            busy.extend(group.iter().map(|(c, _)| c.workflow_id.clone()));
            group
        };
        if group.is_empty() {
            // Every waiting commit follows one being written: wait for a
            // lane to finish, or for a commit of another run.
            drop(lane);
            tokio::select! {
                () = written.notified() => {}
                job = jobs.recv(), if open => match job {
                    Some(job) => waiting.push_back(job),
                    None => open = false,
                },
            }
            continue;
        }
        let (pool, in_flight, written) = (pool.clone(), in_flight.clone(), written.clone());
        tokio::spawn(async move {
            let ids: Vec<String> = group.iter().map(|(c, _)| c.workflow_id.clone()).collect();
            write_group(&pool, group).await;
            let mut busy = in_flight.lock().unwrap_or_else(PoisonError::into_inner);
            for id in &ids {
                busy.remove(id);
            }
            drop(busy);
            drop(lane);
            written.notify_one();
        });
    }
}

/// The next group from `waiting`, in order, at most `most`: each item
/// whose run (`run_of`) is not `busy` and has no earlier item left
/// waiting. What is not taken stays waiting, in order.
fn take_group<T>(
    waiting: &mut VecDeque<T>,
    run_of: impl Fn(&T) -> &String,
    busy: &HashSet<String>,
    most: usize,
) -> Vec<T> {
    let mut group = Vec::new();
    let mut left = VecDeque::new();
    let mut held: HashSet<String> = HashSet::new();
    for item in waiting.drain(..) {
        let run = run_of(&item);
        if group.len() < most && !busy.contains(run) && !held.contains(run) {
            group.push(item);
        } else {
            held.insert(run.clone());
            left.push_back(item);
        }
    }
    *waiting = left;
    group
}

/// Writes `group` together, or each alone when that fails, and answers.
/// A commit its plan refuses is answered at once, and the others go on.
/// The group's commits are written in the order of their workflows' ids
/// (bytes), so that its rows of `workflows` are locked in the order every
/// writer locks them (lease renewals too): two transactions never each
/// hold a row the other waits for (decision 0052).
async fn write_group(pool: &Pool, mut jobs: Vec<Job>) {
    jobs.sort_by(|(a, _), (b, _)| a.workflow_id.cmp(&b.workflow_id));
    let mut group = Vec::with_capacity(jobs.len());
    for (c, reply) in jobs {
        match crate::store::commit::plan(&c) {
            Ok(_) => group.push((c, reply)),
            Err(e) => {
                let _ = reply.send(Err(e));
            }
        }
    }
    if group.is_empty() {
        return;
    }
    let client = match pool.get().await {
        Ok(client) => client,
        Err(e) => {
            let e = pool_error(e);
            for (_, reply) in group {
                let _ = reply.send(Err(e.clone()));
            }
            return;
        }
    };
    if group.len() > 1 {
        let commits: Vec<&Commit> = group.iter().map(|(c, _)| c).collect();
        match write(&client, &commits).await {
            Ok(()) => {
                for (_, reply) in group {
                    let _ = reply.send(Ok(()));
                }
                return;
            }
            // The server answered: write each alone to learn whose it is.
            Err(Failed::Statement(_)) => {}
            Err(Failed::Other(e)) => {
                for (_, reply) in group {
                    let _ = reply.send(Err(e.clone()));
                }
                return;
            }
        }
    }
    for (c, reply) in group {
        let result = write(&client, &[&c]).await.map_err(|failed| match failed {
            Failed::Statement(e) => commit::refusal(&e, &c).unwrap_or_else(|| backend(e)),
            Failed::Other(e) => e,
        });
        let _ = reply.send(result);
    }
}

/// Why a transaction did not land.
enum Failed {
    /// The server refused a statement (a raised refusal among them): the
    /// transaction rolled back.
    Statement(tokio_postgres::Error),
    /// Anything else: the plan, the connection, `BEGIN` or `COMMIT`.
    Other(StoreError),
}

/// Writes `commits` in one transaction, every statement sent at once.
async fn write(client: &Object, commits: &[&Commit]) -> Result<(), Failed> {
    let mut statements: Vec<Statement<'_>> = Vec::new();
    for c in commits {
        statements.extend(commit::statements(c).map_err(Failed::Other)?);
    }
    let notices: Vec<String> = commits.iter().map(|c| commit::notice(c)).collect();
    // Prepared before `BEGIN` is sent: a statement still being prepared
    // would be executed after `COMMIT` (costs a round trip only on a
    // connection that has not seen it).
    let (prepared, announce) = futures::join!(
        join_all(statements.iter().map(|s| client.prepare_cached(s.sql))),
        client.prepare_cached(commit::ANNOUNCE)
    );
    let prepared = prepared
        .into_iter()
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| Failed::Other(backend(e)))?;
    let announce = announce.map_err(|e| Failed::Other(backend(e)))?;
    let params: Vec<_> = statements.iter().map(Statement::params).collect();
    let executed = prepared
        .iter()
        .zip(&params)
        .map(|(statement, params)| async move {
            client
                .execute(statement, params)
                .await
                .map_err(|e| match e.as_db_error() {
                    Some(_) => Failed::Statement(e),
                    None => Failed::Other(backend(e)),
                })
        });
    // The notices go after `COMMIT`, in the same trip (a hint: other
    // daemons also poll). One after a failed transaction is a false
    // alarm: its listeners read what is there.
    let announced: [&(dyn ToSql + Sync); 2] = [&CHANNEL, &notices];
    let (begun, executed, committed, _) = futures::join!(
        client.batch_execute("BEGIN"),
        join_all(executed),
        client.batch_execute("COMMIT"),
        client.execute(&announce, &announced)
    );
    begun.map_err(|e| Failed::Other(backend(e)))?;
    // The first failure is the cause: the statements after it fail only
    // because the transaction aborted, and `COMMIT` then rolls it back.
    for result in executed {
        result?;
    }
    committed.map_err(|e| Failed::Other(backend(e)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_group_skips_busy_runs_and_keeps_each_runs_order() {
        let mut waiting: VecDeque<(String, u32)> =
            [("a", 1), ("b", 1), ("a", 2), ("c", 1), ("b", 2)]
                .into_iter()
                .map(|(run, n)| (run.to_owned(), n))
                .collect();
        let busy: HashSet<String> = ["b".to_owned()].into();
        let group = take_group(&mut waiting, |(run, _)| run, &busy, 2);
        assert_eq!(group, [("a".to_owned(), 1), ("a".to_owned(), 2)]);
        // `c` is past the cap; `b` is busy: both wait, in order.
        let left: Vec<(String, u32)> = waiting.iter().cloned().collect();
        assert_eq!(
            left,
            [
                ("b".to_owned(), 1),
                ("c".to_owned(), 1),
                ("b".to_owned(), 2)
            ]
        );
        let next = take_group(&mut waiting, |(run, _)| run, &HashSet::new(), 10);
        assert_eq!(next.len(), 3);
        assert!(waiting.is_empty());
    }
}
