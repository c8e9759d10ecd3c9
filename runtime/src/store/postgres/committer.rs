//! Group commit on PostgreSQL: commits that arrive while their lane is
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

use std::hash::{DefaultHasher, Hash, Hasher};

use deadpool_postgres::{Object, Pool};
use futures::future::join_all;
use tokio::sync::{mpsc, oneshot};
use tokio_postgres::types::ToSql;

use super::commit::{self, Statement};
use super::{CHANNEL, backend, pool_error};
use crate::store::{Commit, StoreError, StoreResult};

/// At most this many transactions are in flight at once: one a lane.
const LANES: usize = 4;

/// At most this many commits share one transaction.
const MAX_GROUP: usize = 256;

/// A commit waiting for its turn, and where its answer goes.
type Job = (Commit, oneshot::Sender<StoreResult<()>>);

/// The queues of commits to write, one a lane, each written by a task of
/// its own, so a caller that gives up never leaves a transaction halfway.
/// A run's commits always take the same lane, which writes one group after
/// another: they land in the order they were sent, and two lanes never
/// write one run's rows.
pub(super) struct Committer {
    lanes: Vec<mpsc::UnboundedSender<Job>>,
}

impl Committer {
    /// Starts the lanes' tasks, writing on connections from `pool`; they
    /// end when the committer is dropped, after the commits queued.
    pub fn start(pool: &Pool) -> Committer {
        let lanes = (0..LANES)
            .map(|_| {
                let (queue, jobs) = mpsc::unbounded_channel();
                tokio::spawn(serve(pool.clone(), jobs));
                queue
            })
            .collect();
        Committer { lanes }
    }

    /// Writes `commit`, all or nothing.
    pub async fn commit(&self, commit: Commit) -> StoreResult<()> {
        let (reply, answer) = oneshot::channel();
        let commit = crate::store::blobs::outlined(commit);
        let mut hasher = DefaultHasher::new();
        commit.workflow_id.hash(&mut hasher);
        let lane = usize::try_from(hasher.finish() % LANES as u64).unwrap_or_default();
        self.lanes[lane]
            .send((commit, reply))
            .map_err(|_| StoreError::Closed)?;
        answer.await.map_err(|_| StoreError::Closed)?
    }
}

/// One lane: takes every commit queued when the last group is written, and
/// writes them as the next group.
async fn serve(pool: Pool, mut jobs: mpsc::UnboundedReceiver<Job>) {
    while let Some(first) = jobs.recv().await {
        let mut group = vec![first];
        while group.len() < MAX_GROUP {
            match jobs.try_recv() {
                Ok(job) => group.push(job),
                Err(_) => break,
            }
        }
        write_group(&pool, group).await;
    }
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
