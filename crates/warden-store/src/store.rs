//! Opening the store and the two primitives everything else is built on:
//! `write` (durable, through the writer thread) and `read` (pooled, parallel).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rusqlite::{Connection, OpenFlags};
use tokio::sync::{broadcast, oneshot, watch};

use crate::events::{Committed, EntityChanges};
use crate::writer::{self, Completer, Job};
use crate::{StoreError, schema};

/// How the writer commits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CommitMode {
    /// Every waiting write shares one commit (the default).
    #[default]
    Group,
    /// One commit per write; only for measuring what group commit saves.
    PerWrite,
}

/// A handle to the store; cheap to clone.
#[derive(Clone)]
pub struct Store {
    inner: Arc<Inner>,
}

struct Inner {
    path: PathBuf,
    jobs: Mutex<Option<std::sync::mpsc::Sender<Job>>>,
    readers: Mutex<Vec<Connection>>,
    committed: watch::Receiver<u64>,
    changes: broadcast::Sender<Arc<Committed>>,
    writer: Mutex<Option<std::thread::JoinHandle<()>>>,
    counters: Arc<writer::Counters>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("path", &self.inner.path)
            .finish()
    }
}

impl Store {
    /// Opens (creating and migrating if needed) the database at `path`.
    pub fn open(path: &Path, mode: CommitMode) -> Result<Self, StoreError> {
        let open_err = |why: String| StoreError::Open {
            path: path.display().to_string(),
            why,
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| open_err(e.to_string()))?;
        }
        let mut conn = Connection::open(path).map_err(|e| open_err(e.to_string()))?;
        let wal: String = conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))?;
        if !wal.eq_ignore_ascii_case("wal") {
            return Err(open_err(format!("WAL mode refused (journal_mode={wal})")));
        }
        // FULL: a commit is on disk before the writer acknowledges it.
        conn.execute_batch(
            "PRAGMA synchronous=FULL; PRAGMA foreign_keys=ON; PRAGMA busy_timeout=5000; PRAGMA temp_store=MEMORY;",
        )?;
        schema::migrate(&mut conn)?;
        let last: i64 =
            conn.query_row("SELECT COALESCE(MAX(seq), 0) FROM events", [], |r| r.get(0))?;

        let counters = Arc::new(writer::Counters::default());
        let (tx, rx) = std::sync::mpsc::channel::<Job>();
        let (committed_tx, committed) = watch::channel(last.max(0) as u64);
        // A follower more than this many commits behind re-reads the log.
        let (changes, _) = broadcast::channel(1024);
        let writer = std::thread::Builder::new()
            .name("warden-store-writer".into())
            .spawn({
                let counters = Arc::clone(&counters);
                let changes = changes.clone();
                move || writer::run(conn, rx, committed_tx, changes, mode, counters)
            })
            .map_err(|e| open_err(format!("cannot start writer thread: {e}")))?;
        Ok(Self {
            inner: Arc::new(Inner {
                path: path.to_path_buf(),
                jobs: Mutex::new(Some(tx)),
                readers: Mutex::new(Vec::new()),
                committed,
                changes,
                writer: Mutex::new(Some(writer)),
                counters,
            }),
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Runs `f` in a write transaction; resolves after the commit is durable.
    /// If `f` fails, its changes are rolled back and nothing else is affected.
    pub async fn write<R, F>(&self, f: F) -> Result<R, StoreError>
    where
        R: Send + 'static,
        F: FnOnce(&Connection) -> Result<R, StoreError> + Send + 'static,
    {
        let (tx, rx) = oneshot::channel::<Result<R, StoreError>>();
        let job: Job = Box::new(move |conn| {
            let result = f(conn);
            let ok = result.is_ok();
            let done: Completer = Box::new(move |commit| {
                let _ = tx.send(commit.and(result));
            });
            (ok, done)
        });
        self.submit(job)?;
        rx.await.map_err(|_| StoreError::Closed)?
    }

    fn submit(&self, job: Job) -> Result<(), StoreError> {
        let guard = self.inner.jobs.lock().map_err(|_| StoreError::Closed)?;
        guard
            .as_ref()
            .ok_or(StoreError::Closed)?
            .send(job)
            .map_err(|_| StoreError::Closed)
    }

    /// Runs `f` on a read-only connection from the pool, off the async runtime.
    pub async fn read<R, F>(&self, f: F) -> Result<R, StoreError>
    where
        R: Send + 'static,
        F: FnOnce(&Connection) -> Result<R, StoreError> + Send + 'static,
    {
        let this = self.clone();
        tokio::task::spawn_blocking(move || this.read_blocking(f))
            .await
            .map_err(|_| StoreError::Closed)?
    }

    /// Like [`Store::read`], on the calling thread.
    pub fn read_blocking<R, F>(&self, f: F) -> Result<R, StoreError>
    where
        F: FnOnce(&Connection) -> Result<R, StoreError>,
    {
        let pooled = self.inner.readers.lock().ok().and_then(|mut p| p.pop());
        let conn = match pooled {
            Some(c) => c,
            None => {
                let c = Connection::open_with_flags(
                    &self.inner.path,
                    OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
                )?;
                c.execute_batch("PRAGMA busy_timeout=5000;")?;
                c
            }
        };
        let result = f(&conn);
        if let Ok(mut pool) = self.inner.readers.lock()
            && pool.len() < 8
        {
            pool.push(conn);
        }
        result
    }

    /// Whether the writer thread is running (it stops only on close or a panic).
    pub fn writer_alive(&self) -> bool {
        self.inner
            .writer
            .lock()
            .ok()
            .is_some_and(|w| w.as_ref().is_some_and(|h| !h.is_finished()))
    }

    /// (commits, writes) since open: writes per commit shows group commit at work.
    pub fn commit_stats(&self) -> (u64, u64) {
        use std::sync::atomic::Ordering::Relaxed;
        (
            self.inner.counters.commits.load(Relaxed),
            self.inner.counters.writes.load(Relaxed),
        )
    }

    /// The newest committed event sequence; changes after every commit that
    /// appended events. Streams wait on this instead of polling.
    pub fn committed(&self) -> watch::Receiver<u64> {
        self.inner.committed.clone()
    }

    /// Commits that append events of entity `kind`/`id`, from now on. A
    /// stream subscribes before it reads the log, so nothing falls between.
    pub fn changes_of(&self, kind: &str, id: &str) -> EntityChanges {
        EntityChanges::new(self.inner.changes.subscribe(), kind, id)
    }

    /// Stops accepting writes, lets the writer finish what is queued, and
    /// waits for it. Later writes fail with [`StoreError::Closed`].
    pub fn close(&self) {
        if let Ok(mut jobs) = self.inner.jobs.lock() {
            jobs.take();
        }
        let handle = self.inner.writer.lock().ok().and_then(|mut w| w.take());
        if let Some(h) = handle {
            let _ = h.join();
        }
    }
}
