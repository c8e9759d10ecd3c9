//! The embedded libSQL store.
//!
//! One dedicated thread owns the connection; callers talk to it over a
//! channel. Commits that arrive while the thread is busy are written
//! together in one transaction (group commit), so many workflows finishing
//! steps at once share one WAL sync. Reads are served between commit
//! batches, after the commits queued before them.

mod checkpoint;
mod db;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use self::checkpoint::{Checkpointer, FinishRequest, WRITER_FINISH_FROM, WalIndex};
use self::db::Db;
use super::{
    Admission, Admitted, AgentRow, Backlog, BoxFuture, Catalog, Claim, Commit, Debounced,
    DecisionFilter, DecisionRow, DecisionStatus, Durability, EventFilter, Expiry, FoundEntry,
    InboxMessage, Listing, LogEntry, PendingStart, Prune, PrunedFilter, PrunedRow, RateCall, Rated,
    RunLog, ScheduleAdvance, ScheduleRow, SecretRow, SessionTurn, Sessions, Slots, Source,
    Standing, StepDetail, StepRow, StoreError, StoreHealth, StoreResult, TemplateDraft,
    TemplateFilter, TemplateRow, Transcript, Transcripts, VaultHeader, WorkflowFilter, WorkflowRow,
    WorkflowState, WorkflowStatus, WorktreeLease, Worktrees,
};

/// At most this many commits share one transaction.
const MAX_BATCH: usize = 1024;

/// How often the WAL is checkpointed (off the commit path).
const CHECKPOINT_EVERY: Duration = Duration::from_millis(100);

/// How long a commit waiting alone looks for its answer, and the store
/// thread for its next request, before they sleep.
const SPIN_FOR: Duration = Duration::from_micros(200);

type Job = Box<dyn FnOnce(&Db) + Send>;

enum Request {
    Commit(Box<Commit>, oneshot::Sender<StoreResult<()>>),
    Job(Job),
}

/// The libSQL event store.
pub struct LibsqlStore {
    tx: Option<mpsc::Sender<Request>>,
    thread: Option<JoinHandle<()>>,
    checkpointer: Option<Checkpointer>,
    path: PathBuf,
    durability: Durability,
    /// Commits sent and not yet answered.
    unanswered: AtomicUsize,
}

impl std::fmt::Debug for LibsqlStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LibsqlStore")
            .field("path", &self.path)
            .field("durability", &self.durability)
            .finish_non_exhaustive()
    }
}

impl LibsqlStore {
    /// Opens (creating and migrating if needed) the database file at `path`.
    pub fn open(path: &Path, durability: Durability) -> StoreResult<LibsqlStore> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| {
                StoreError::Backend(format!("cannot create {}: {e}", dir.display()))
            })?;
        }
        let (tx, rx) = mpsc::channel::<Request>();
        let (ready_tx, ready_rx) = mpsc::channel::<StoreResult<()>>();
        let db_path = path.to_path_buf();
        let finish = FinishRequest::default();
        let finish_asked = finish.clone();
        let thread = std::thread::Builder::new()
            .name("opcode-store".into())
            .spawn(move || match Db::open(&db_path, durability) {
                Ok(db) => {
                    let _ = ready_tx.send(Ok(()));
                    let mut finishing = Finishing {
                        asked: finish_asked,
                        wal: WalIndex::of(&db_path),
                        finished_at: None,
                    };
                    serve(&db, &rx, &mut finishing);
                }
                Err(e) => {
                    let _ = ready_tx.send(Err(e));
                }
            })
            .map_err(|e| StoreError::Backend(format!("cannot start the store thread: {e}")))?;
        ready_rx.recv().map_err(|_| StoreError::Closed)??;
        let checkpointer = Checkpointer::start(path, CHECKPOINT_EVERY, finish)?;
        Ok(LibsqlStore {
            tx: Some(tx),
            thread: Some(thread),
            checkpointer: Some(checkpointer),
            path: path.to_path_buf(),
            durability,
            unanswered: AtomicUsize::new(0),
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The durability it was opened with.
    pub fn durability(&self) -> Durability {
        self.durability
    }

    fn send(&self, request: Request) -> StoreResult<()> {
        self.tx
            .as_ref()
            .ok_or(StoreError::Closed)?
            .send(request)
            .map_err(|_| StoreError::Closed)
    }

    /// Runs `f` on the store thread and returns its answer.
    fn ask<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Db) -> StoreResult<T> + Send + 'static,
    ) -> BoxFuture<'_, StoreResult<T>> {
        self.ask_looking(f, Duration::ZERO)
    }

    /// [`Self::ask`], looking for the answer for `spin` before sleeping
    /// ([`answer_of`]).
    fn ask_looking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Db) -> StoreResult<T> + Send + 'static,
        spin: Duration,
    ) -> BoxFuture<'_, StoreResult<T>> {
        let (reply, answer) = oneshot::channel();
        let sent = self.send(Request::Job(Box::new(move |db| {
            let _ = reply.send(f(db));
        })));
        Box::pin(async move {
            sent?;
            answer_of(answer, spin).await
        })
    }
}

impl Drop for LibsqlStore {
    fn drop(&mut self) {
        // Closing the channel ends the thread after the queued requests.
        self.tx = None;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        // Then a last checkpoint, after the last write.
        self.checkpointer = None;
    }
}

/// The store thread: batches commits, runs reads in arrival order, and
/// finishes a checkpoint when the checkpointer asks or the WAL grew large,
/// after the next write (a writer that is never idle must still let the
/// WAL start over).
fn serve(db: &Db, rx: &mpsc::Receiver<Request>, finishing: &mut Finishing) {
    let mut commits: Vec<Commit> = Vec::new();
    let mut replies: Vec<oneshot::Sender<StoreResult<()>>> = Vec::new();
    // Only after a commit is a run's next round likely to follow at once.
    let mut committed = false;
    while let Some(first) = next_request(rx, committed) {
        committed = false;
        let mut next = Some(first);
        while let Some(request) = next.take() {
            match request {
                Request::Commit(commit, reply) => {
                    committed = true;
                    commits.push(*commit);
                    replies.push(reply);
                    if commits.len() >= MAX_BATCH {
                        flush(db, &mut commits, &mut replies);
                        finishing.finish_if_due(db);
                    }
                }
                Request::Job(job) => {
                    flush(db, &mut commits, &mut replies);
                    job(db);
                    finishing.finish_if_due(db);
                }
            }
            next = rx.try_recv().ok();
        }
        flush(db, &mut commits, &mut replies);
        finishing.finish_if_due(db);
    }
}

/// The next request: after a commit (`poll`), looked for without sleeping
/// for [`SPIN_FOR`] first (a run's next round usually comes within it, and
/// waking a sleeping thread costs as much), then waited for; after reads
/// alone, waited for at once (an idle daemon's polls of its inbox and
/// timers). `None` once the store is dropped. (The writer finishes
/// checkpoints by its own count of frames, so a checkpointer this polling
/// starves of CPU cannot let the WAL grow: decision 0039.)
fn next_request(rx: &mpsc::Receiver<Request>, poll: bool) -> Option<Request> {
    let since = Instant::now();
    loop {
        match rx.try_recv() {
            Ok(request) => return Some(request),
            Err(mpsc::TryRecvError::Disconnected) => return None,
            Err(mpsc::TryRecvError::Empty) if poll && since.elapsed() < SPIN_FOR => {
                std::thread::yield_now();
            }
            Err(mpsc::TryRecvError::Empty) => return rx.recv().ok(),
        }
    }
}

/// One commit counted among the unanswered ones while it lives.
struct Unanswered<'a> {
    count: &'a AtomicUsize,
    /// No other commit was waiting when it was sent.
    alone: bool,
}

impl Unanswered<'_> {
    fn count(count: &AtomicUsize) -> Unanswered<'_> {
        let alone = count.fetch_add(1, Ordering::AcqRel) == 0;
        Unanswered { count, alone }
    }
}

impl Drop for Unanswered<'_> {
    fn drop(&mut self) {
        self.count.fetch_sub(1, Ordering::AcqRel);
    }
}

/// How long an answer is looked for before its task sleeps: only a commit
/// that waits `alone` looks; with others waiting, the workers have their
/// work to do meanwhile.
fn spin_when(alone: bool) -> Duration {
    if alone { SPIN_FOR } else { Duration::ZERO }
}

/// The store thread's answer to a commit (or to the read that follows
/// it): looked for while the task yields for `spin` (a lone commit's
/// answer usually comes within [`SPIN_FOR`], and waking a sleeping worker
/// costs as much), then waited for.
async fn answer_of<T>(
    mut answer: oneshot::Receiver<StoreResult<T>>,
    spin: Duration,
) -> StoreResult<T> {
    let since = Instant::now();
    while since.elapsed() < spin {
        match answer.try_recv() {
            Ok(result) => return result,
            Err(oneshot::error::TryRecvError::Closed) => return Err(StoreError::Closed),
            Err(oneshot::error::TryRecvError::Empty) => tokio::task::yield_now().await,
        }
    }
    answer.await.map_err(|_| StoreError::Closed)?
}

/// When the store thread finishes a checkpoint.
struct Finishing {
    /// Set by the checkpointer.
    asked: FinishRequest,
    /// Where the WAL's frames are counted.
    wal: WalIndex,
    /// The frame count a finished checkpoint left (the WAL starts over at
    /// the next commit; until then the count stays).
    finished_at: Option<u32>,
}

impl Finishing {
    /// Finishes a checkpoint if the checkpointer asked for one or the WAL
    /// holds [`WRITER_FINISH_FROM`] frames; asks again when it could not.
    fn finish_if_due(&mut self, db: &Db) {
        let asked = self.asked.take();
        let frames = self.wal.frames();
        let large = frames.is_some_and(|n| n >= WRITER_FINISH_FROM && Some(n) != self.finished_at);
        if !(asked || large) {
            return;
        }
        if db.finish_checkpoint() {
            self.finished_at = frames;
        } else if asked {
            self.asked.ask();
        }
    }
}

/// A workflow's state, read on the store thread.
fn read_state(db: &Db, id: &str, detail: StepDetail) -> StoreResult<Option<WorkflowState>> {
    let Some(workflow) = db.workflow(id)? else {
        return Ok(None);
    };
    Ok(Some(WorkflowState {
        workflow,
        steps: match detail {
            StepDetail::Whole => db.steps(id)?,
            StepDetail::StatusOnly => db.step_statuses(id)?,
        },
        pending_decisions: db.decisions(Some(id), Some(DecisionStatus::Pending))?,
    }))
}

fn flush(db: &Db, commits: &mut Vec<Commit>, replies: &mut Vec<oneshot::Sender<StoreResult<()>>>) {
    if commits.is_empty() {
        return;
    }
    let results = db.write(commits);
    for (reply, result) in replies.drain(..).zip(results) {
        let _ = reply.send(result);
    }
    commits.clear();
}

impl RunLog for LibsqlStore {
    fn commit(&self, commit: Commit) -> BoxFuture<'_, StoreResult<()>> {
        let (reply, answer) = oneshot::channel();
        let unanswered = Unanswered::count(&self.unanswered);
        let sent = self.send(Request::Commit(
            Box::new(crate::store::blobs::outlined(commit)),
            reply,
        ));
        Box::pin(async move {
            sent?;
            answer_of(answer, spin_when(unanswered.alone)).await
        })
    }

    fn commit_and_state(
        &self,
        commit: Commit,
        detail: StepDetail,
    ) -> BoxFuture<'_, StoreResult<Option<WorkflowState>>> {
        let id = commit.workflow_id.clone();
        // The read is the commit's continuation: looked for as its answer is.
        let spin = spin_when(self.unanswered.load(Ordering::Acquire) == 0);
        // Both are queued now: the thread reads right after it has written.
        let committed = self.commit(commit);
        let state = self.ask_looking(move |db| read_state(db, &id, detail), spin);
        Box::pin(async move {
            committed.await?;
            state.await
        })
    }

    fn workflow<'a>(&'a self, id: &'a str) -> BoxFuture<'a, StoreResult<Option<WorkflowRow>>> {
        let id = id.to_owned();
        self.ask(move |db| db.workflow(&id))
    }

    fn source<'a>(&'a self, hash: &'a str) -> BoxFuture<'a, StoreResult<Option<Source>>> {
        let hash = hash.to_owned();
        self.ask(move |db| db.source(&hash))
    }

    fn blob<'a>(&'a self, hash: &'a str) -> BoxFuture<'a, StoreResult<Option<String>>> {
        let hash = hash.to_owned();
        self.ask(move |db| db.blob(&hash))
    }

    fn workflows(&self, filter: WorkflowFilter) -> BoxFuture<'_, StoreResult<Vec<WorkflowRow>>> {
        self.ask(move |db| db.workflows(&filter))
    }

    fn entries<'a>(
        &'a self,
        id: &'a str,
        after_seq: u64,
        inputs_only: bool,
    ) -> BoxFuture<'a, StoreResult<Vec<LogEntry>>> {
        let id = id.to_owned();
        self.ask(move |db| db.entries(&id, after_seq, inputs_only))
    }

    fn state<'a>(&'a self, id: &'a str) -> BoxFuture<'a, StoreResult<Option<WorkflowState>>> {
        let id = id.to_owned();
        // One trip to the store thread instead of three.
        self.ask(move |db| read_state(db, &id, StepDetail::Whole))
    }

    fn steps<'a>(&'a self, id: &'a str) -> BoxFuture<'a, StoreResult<Vec<StepRow>>> {
        let id = id.to_owned();
        self.ask(move |db| db.steps(&id))
    }

    fn decisions<'a>(
        &'a self,
        workflow_id: Option<&'a str>,
        status: Option<DecisionStatus>,
    ) -> BoxFuture<'a, StoreResult<Vec<DecisionRow>>> {
        let workflow_id = workflow_id.map(str::to_owned);
        self.ask(move |db| db.decisions(workflow_id.as_deref(), status))
    }

    fn next_timers(&self, limit: u32) -> BoxFuture<'_, StoreResult<Vec<(String, String)>>> {
        self.ask(move |db| db.next_timers(limit))
    }

    fn send<'a>(
        &'a self,
        workflow_id: &'a str,
        event: String,
        at: String,
    ) -> BoxFuture<'a, StoreResult<i64>> {
        let workflow_id = workflow_id.to_owned();
        self.ask(move |db| db.send(&workflow_id, &event, &at))
    }

    fn inbox<'a>(
        &'a self,
        workflow_id: Option<&'a str>,
    ) -> BoxFuture<'a, StoreResult<Vec<InboxMessage>>> {
        let workflow_id = workflow_id.map(str::to_owned);
        self.ask(move |db| db.inbox(workflow_id.as_deref()))
    }

    fn claim<'a>(
        &'a self,
        id: &'a str,
        owner: &'a str,
        take_from: Option<&'a str>,
        ttl: Duration,
    ) -> BoxFuture<'a, StoreResult<Claim>> {
        let (id, owner) = (id.to_owned(), owner.to_owned());
        let take_from = take_from.map(str::to_owned);
        self.ask(move |db| db.claim(&id, &owner, take_from.as_deref(), ttl))
    }

    fn renew<'a>(&'a self, owner: &'a str, ttl: Duration) -> BoxFuture<'a, StoreResult<()>> {
        let owner = owner.to_owned();
        self.ask(move |db| db.renew(&owner, ttl))
    }

    fn backlog(&self) -> BoxFuture<'_, StoreResult<Backlog>> {
        self.ask(Db::backlog)
    }

    fn orphans(&self, limit: u32) -> BoxFuture<'_, StoreResult<Vec<String>>> {
        self.ask(move |db| db.orphans(limit))
    }

    fn release<'a>(&'a self, id: &'a str, owner: &'a str) -> BoxFuture<'a, StoreResult<()>> {
        let (id, owner) = (id.to_owned(), owner.to_owned());
        self.ask(move |db| db.release(&id, &owner))
    }
}

impl Slots for LibsqlStore {
    fn admit(&self, ask: Admission) -> BoxFuture<'_, StoreResult<Admitted>> {
        self.ask(move |db| db.admit(&ask))
    }

    fn promote<'a>(&'a self, key: &'a str) -> BoxFuture<'a, StoreResult<Vec<String>>> {
        let key = key.to_owned();
        self.ask(move |db| db.promote(&key))
    }

    fn waiting(&self) -> BoxFuture<'_, StoreResult<Vec<(String, u64)>>> {
        self.ask(Db::waiting)
    }

    fn standing<'a>(&'a self, id: &'a str) -> BoxFuture<'a, StoreResult<Option<Standing>>> {
        let id = id.to_owned();
        self.ask(move |db| db.standing(&id))
    }

    fn take_call(&self, call: RateCall) -> BoxFuture<'_, StoreResult<Rated>> {
        self.ask(move |db| db.take_call(&call))
    }

    fn debounce(&self, delivery: Debounced) -> BoxFuture<'_, StoreResult<PendingStart>> {
        self.ask(move |db| db.debounce(&delivery))
    }

    fn due_starts(&self, now_ms: u64, limit: u32) -> BoxFuture<'_, StoreResult<Vec<PendingStart>>> {
        self.ask(move |db| db.due_starts(now_ms, limit))
    }

    fn forget_start<'a>(&'a self, start: &'a PendingStart) -> BoxFuture<'a, StoreResult<()>> {
        let start = start.clone();
        self.ask(move |db| db.forget_start(&start))
    }
}

impl Sessions for LibsqlStore {
    fn session_turns<'a>(&'a self, session: &'a str) -> BoxFuture<'a, StoreResult<Vec<String>>> {
        let session = session.to_owned();
        self.ask(move |db| db.session_turns(&session))
    }

    fn record_turn(&self, turn: SessionTurn, keep: u32) -> BoxFuture<'_, StoreResult<()>> {
        self.ask(move |db| db.record_turn(&turn, keep))
    }
}

impl Transcripts for LibsqlStore {
    fn keep_transcript(&self, transcript: Transcript) -> BoxFuture<'_, StoreResult<()>> {
        self.ask(move |db| db.keep_transcript(&transcript))
    }

    fn transcript<'a>(
        &'a self,
        workflow_id: &'a str,
        step: &'a str,
        attempt: u32,
    ) -> BoxFuture<'a, StoreResult<Option<String>>> {
        let (id, step) = (workflow_id.to_owned(), step.to_owned());
        self.ask(move |db| db.transcript(&id, &step, attempt))
    }
}

impl Worktrees for LibsqlStore {
    fn take_worktree(
        &self,
        lease: WorktreeLease,
        ttl: Duration,
        over: Option<String>,
    ) -> BoxFuture<'_, StoreResult<WorktreeLease>> {
        self.ask(move |db| db.take_worktree(&lease, ttl, over.as_deref()))
    }

    fn keep_worktrees<'a>(
        &'a self,
        owner: &'a str,
        held: Vec<String>,
        ttl: Duration,
    ) -> BoxFuture<'a, StoreResult<()>> {
        let owner = owner.to_owned();
        self.ask(move |db| db.keep_worktrees(&owner, &held, ttl))
    }
}

impl Catalog for LibsqlStore {
    fn define_template(&self, draft: TemplateDraft) -> BoxFuture<'_, StoreResult<TemplateRow>> {
        self.ask(move |db| db.define_template(&draft))
    }

    fn template<'a>(
        &'a self,
        name: &'a str,
        version: Option<i64>,
    ) -> BoxFuture<'a, StoreResult<Option<TemplateRow>>> {
        let name = name.to_owned();
        self.ask(move |db| db.template(&name, version))
    }

    fn templates(&self, filter: TemplateFilter) -> BoxFuture<'_, StoreResult<Vec<TemplateRow>>> {
        self.ask(move |db| db.templates(&filter))
    }

    fn find_entries(&self, filter: EventFilter) -> BoxFuture<'_, StoreResult<Vec<FoundEntry>>> {
        self.ask(move |db| db.find_entries(&filter))
    }

    fn count(&self, listing: Listing) -> BoxFuture<'_, StoreResult<u64>> {
        self.ask(move |db| db.count(&listing))
    }

    fn touch_agent<'a>(&'a self, id: &'a str, at: &'a str) -> BoxFuture<'a, StoreResult<()>> {
        let (id, at) = (id.to_owned(), at.to_owned());
        self.ask(move |db| db.touch_agent(&id, &at))
    }

    fn agents(&self) -> BoxFuture<'_, StoreResult<Vec<AgentRow>>> {
        self.ask(Db::agents)
    }

    fn workflow_counts(&self) -> BoxFuture<'_, StoreResult<Vec<(WorkflowStatus, u64)>>> {
        self.ask(Db::workflow_counts)
    }

    fn save_schedule(&self, job: ScheduleRow) -> BoxFuture<'_, StoreResult<()>> {
        self.ask(move |db| db.save_schedule(&job))
    }

    fn schedules(&self) -> BoxFuture<'_, StoreResult<Vec<ScheduleRow>>> {
        self.ask(Db::schedules)
    }

    fn delete_schedule<'a>(&'a self, id: &'a str) -> BoxFuture<'a, StoreResult<bool>> {
        let id = id.to_owned();
        self.ask(move |db| db.delete_schedule(&id))
    }

    fn vault_header(&self) -> BoxFuture<'_, StoreResult<Option<VaultHeader>>> {
        self.ask(Db::vault_header)
    }

    fn create_vault(&self, header: VaultHeader) -> BoxFuture<'_, StoreResult<VaultHeader>> {
        self.ask(move |db| db.create_vault(&header))
    }

    fn put_secret(&self, secret: SecretRow) -> BoxFuture<'_, StoreResult<()>> {
        self.ask(move |db| db.put_secret(&secret))
    }

    fn secrets(&self) -> BoxFuture<'_, StoreResult<Vec<SecretRow>>> {
        self.ask(Db::secrets)
    }

    fn delete_secret<'a>(&'a self, name: &'a str) -> BoxFuture<'a, StoreResult<bool>> {
        let name = name.to_owned();
        self.ask(move |db| db.delete_secret(&name))
    }

    fn health(&self) -> BoxFuture<'_, StoreResult<StoreHealth>> {
        self.ask(Db::health)
    }

    fn expired(&self, expiry: Expiry) -> BoxFuture<'_, StoreResult<Vec<String>>> {
        self.ask(move |db| db.expired(&expiry))
    }

    fn prune(&self, runs: Vec<Prune>, at: String) -> BoxFuture<'_, StoreResult<Vec<String>>> {
        self.ask(move |db| {
            let pruned = db.prune(&runs, &at);
            // Deleting scattered rows writes many pages: copy them into the
            // database now, so that the WAL starts over after each batch.
            db.finish_checkpoint();
            pruned
        })
    }

    fn decision_page(
        &self,
        filter: DecisionFilter,
    ) -> BoxFuture<'_, StoreResult<Vec<DecisionRow>>> {
        self.ask(move |db| db.decision_page(&filter))
    }

    fn forget_pruned(&self, before: String) -> BoxFuture<'_, StoreResult<u64>> {
        self.ask(move |db| db.forget_pruned(&before))
    }

    fn pruned(&self, filter: PrunedFilter) -> BoxFuture<'_, StoreResult<Vec<PrunedRow>>> {
        self.ask(move |db| db.pruned(&filter))
    }

    fn advance_schedule(&self, advance: ScheduleAdvance) -> BoxFuture<'_, StoreResult<bool>> {
        self.ask(move |db| db.advance_schedule(&advance))
    }

    fn set_schedule_status<'a>(
        &'a self,
        id: &'a str,
        workflow_id: &'a str,
        status: &'a str,
    ) -> BoxFuture<'a, StoreResult<()>> {
        let (id, workflow_id, status) = (id.to_owned(), workflow_id.to_owned(), status.to_owned());
        self.ask(move |db| db.set_schedule_status(&id, &workflow_id, &status))
    }
}
