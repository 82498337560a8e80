//! The single writer thread and its group commit.
//!
//! Jobs queue on a channel. The thread takes every job waiting (up to
//! [`MAX_BATCH`]), runs each inside its own savepoint of one transaction so a
//! failing job leaves the others intact, commits once, and only then tells
//! each caller how its job went.

use std::sync::mpsc::{Receiver, TryRecvError};

use rusqlite::{Connection, TransactionBehavior};
use tokio::sync::watch;

use crate::StoreError;
use crate::store::CommitMode;

/// The most jobs one commit carries.
const MAX_BATCH: usize = 512;

/// Called after the commit with its result; sends the caller its answer.
pub(crate) type Completer = Box<dyn FnOnce(Result<(), StoreError>) + Send>;

/// A unit of work: runs in the transaction, says whether it succeeded, and
/// returns what to do once the commit's fate is known.
pub(crate) type Job = Box<dyn FnOnce(&Connection) -> (bool, Completer) + Send>;

pub(crate) fn run(
    mut conn: Connection,
    jobs: Receiver<Job>,
    committed: watch::Sender<u64>,
    mode: CommitMode,
) {
    let mut batch: Vec<Job> = Vec::with_capacity(MAX_BATCH);
    while let Ok(first) = jobs.recv() {
        batch.push(first);
        if mode == CommitMode::Group {
            while batch.len() < MAX_BATCH {
                match jobs.try_recv() {
                    Ok(j) => batch.push(j),
                    Err(TryRecvError::Empty | TryRecvError::Disconnected) => break,
                }
            }
        }
        commit_batch(&mut conn, batch.drain(..), &committed);
    }
}

fn commit_batch(
    conn: &mut Connection,
    batch: impl Iterator<Item = Job>,
    committed: &watch::Sender<u64>,
) {
    let mut completers = Vec::new();
    let result = (|| -> Result<(), StoreError> {
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        for job in batch {
            tx.execute_batch("SAVEPOINT job")?;
            let (ok, done) = job(&tx);
            completers.push(done);
            if ok {
                tx.execute_batch("RELEASE job")?;
            } else {
                tx.execute_batch("ROLLBACK TO job; RELEASE job")?;
            }
        }
        tx.commit()?;
        Ok(())
    })();
    match result {
        Ok(()) => {
            if let Ok(seq) = conn.query_row("SELECT COALESCE(MAX(seq), 0) FROM events", [], |r| {
                r.get::<_, i64>(0)
            }) {
                committed.send_if_modified(|cur| {
                    let seq = seq.max(0) as u64;
                    let changed = seq > *cur;
                    *cur = seq.max(*cur);
                    changed
                });
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
