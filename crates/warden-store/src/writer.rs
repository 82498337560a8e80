//! The single writer thread and its group commit.
//!
//! Jobs queue on a channel. The thread opens a transaction for the first
//! job, runs every other job waiting (up to [`MAX_BATCH`]) in the same
//! transaction, each inside its own savepoint so a failing job leaves the
//! others intact, commits once, and only then tells each caller how its job
//! went.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, TryRecvError};
use std::time::{Duration, Instant};

use rusqlite::{Connection, TransactionBehavior};
use tokio::sync::{broadcast, watch};

use crate::StoreError;
use crate::events::{self, Committed};
use crate::store::CommitMode;

/// The most jobs one commit carries.
const MAX_BATCH: usize = 512;

/// The longest a commit waits for more writers when several were active in
/// the previous one (PostgreSQL's `commit_delay` idea, adaptive).
const GATHER: Duration = Duration::from_micros(200);

/// Called after the commit with its result; sends the caller its answer.
pub(crate) type Completer = Box<dyn FnOnce(Result<(), StoreError>) + Send>;

/// A unit of work: runs in the transaction, says whether it succeeded, and
/// returns what to do once the commit's fate is known.
pub(crate) type Job = Box<dyn FnOnce(&Connection) -> (bool, Completer) + Send>;

/// Counters for observing group commit at work.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) commits: AtomicU64,
    pub(crate) writes: AtomicU64,
}

pub(crate) fn run(
    mut conn: Connection,
    jobs: Receiver<Job>,
    committed: watch::Sender<u64>,
    changes: broadcast::Sender<Arc<Committed>>,
    mode: CommitMode,
    counters: Arc<Counters>,
) {
    // How many writers the last commit carried: while several are active,
    // the next commit waits (briefly) for as many before it syncs.
    let mut last_batch = 1usize;
    while let Ok(first) = jobs.recv() {
        let mut completers = Vec::new();
        let result = (|| -> Result<(), StoreError> {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            run_job(&tx, first, &mut completers)?;
            if mode == CommitMode::Group {
                gather(&tx, &jobs, last_batch, &mut completers)?;
            }
            tx.commit()?;
            Ok(())
        })();
        last_batch = completers.len();
        counters.commits.fetch_add(1, Ordering::Relaxed);
        counters
            .writes
            .fetch_add(completers.len() as u64, Ordering::Relaxed);
        let touched = events::take_touched();
        match result {
            Ok(()) => {
                publish_last_seq(&conn, &committed);
                if !touched.is_empty() {
                    // No follower listening is fine.
                    let _ = changes.send(Arc::new(Committed::new(touched)));
                }
                for done in completers {
                    done(Ok(()));
                }
            }
            Err(e) => {
                tracing::error!(error = %e, jobs = completers.len(), "group commit failed; nothing of the batch was saved");
                let msg = e.to_string();
                for done in completers {
                    done(Err(StoreError::Commit(msg.clone())));
                }
            }
        }
    }
}

/// Runs every job already waiting, and while fewer than `expect` have run,
/// waits up to [`GATHER`] for more; jobs run as they arrive, so the wait
/// overlaps with work.
fn gather(
    tx: &Connection,
    jobs: &Receiver<Job>,
    expect: usize,
    completers: &mut Vec<Completer>,
) -> Result<(), StoreError> {
    let deadline = Instant::now() + GATHER;
    while completers.len() < MAX_BATCH {
        let job = match jobs.try_recv() {
            Ok(j) => j,
            Err(TryRecvError::Disconnected) => break,
            Err(TryRecvError::Empty) => {
                let now = Instant::now();
                if completers.len() >= expect || now >= deadline {
                    break;
                }
                match jobs.recv_timeout(deadline - now) {
                    Ok(j) => j,
                    Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => break,
                }
            }
        };
        run_job(tx, job, completers)?;
    }
    Ok(())
}

/// Runs one job in its own savepoint, so its failure undoes only its own changes.
fn run_job(tx: &Connection, job: Job, completers: &mut Vec<Completer>) -> Result<(), StoreError> {
    tx.prepare_cached("SAVEPOINT job")?.execute([])?;
    let (ok, done) = job(tx);
    completers.push(done);
    if !ok {
        tx.prepare_cached("ROLLBACK TO job")?.execute([])?;
    }
    tx.prepare_cached("RELEASE job")?.execute([])?;
    Ok(())
}

/// Tells event streams how far the durable log now reaches.
fn publish_last_seq(conn: &Connection, committed: &watch::Sender<u64>) {
    let last = conn
        .prepare_cached("SELECT COALESCE(MAX(seq), 0) FROM events")
        .and_then(|mut s| s.query_row([], |r| r.get::<_, i64>(0)));
    match last {
        Ok(seq) => {
            let seq = seq.max(0) as u64;
            committed.send_if_modified(|cur| {
                let changed = seq > *cur;
                *cur = seq.max(*cur);
                changed
            });
        }
        Err(e) => {
            // Wake the streams anyway: they re-read the log themselves.
            tracing::error!(error = %e, "cannot read the newest event sequence after a commit");
            committed.send_modify(|_| ());
        }
    }
}
