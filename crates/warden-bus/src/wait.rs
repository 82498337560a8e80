//! Waiting for the bus to change without polling it: every commit, from
//! this process or another, writes the database's WAL file, so an inotify
//! watch on its directory wakes a long poll exactly when there may be
//! something new.
//!
//! One watch serves every waiting poll of a bus: an inotify instance per
//! poll would run into `fs.inotify.max_user_instances` (128 by default)
//! with a few hundred agents waiting at once.

use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify};
use tokio::io::unix::AsyncFd;
use tokio::sync::watch;

/// The inotify instance, as tokio's reactor wants it.
struct Watched(Inotify);

impl AsRawFd for Watched {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_fd().as_raw_fd()
    }
}

/// Counts writes to the store's files; each waiting poll holds a receiver.
#[derive(Default)]
pub struct StoreChanges {
    /// The running watch's counter; `None` before the first wait or after
    /// its task ended (it is started again).
    current: Mutex<Option<watch::Receiver<u64>>>,
    /// Polls asleep on it now.
    asleep: Arc<AtomicUsize>,
}

/// Counts a poll as asleep while it lives.
pub struct Asleep(Arc<AtomicUsize>);

impl Drop for Asleep {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl std::fmt::Debug for StoreChanges {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreChanges").finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl StoreChanges {
    /// A receiver that sees the writes to `db`'s files from now on
    /// (`changed()` returns after the next one). Must be called inside a
    /// tokio runtime: the watch's task runs there.
    pub fn subscribe(&self, db: &Path) -> std::io::Result<watch::Receiver<u64>> {
        let mut current = lock(&self.current);
        let running = current.as_ref().filter(|rx| rx.has_changed().is_ok());
        let rx = match running {
            Some(rx) => rx.clone(),
            None => {
                let rx = start(db)?;
                *current = Some(rx.clone());
                rx
            }
        };
        let mut mine = rx;
        mine.mark_unchanged();
        Ok(mine)
    }

    /// Marks a poll asleep until the guard is dropped.
    pub fn asleep(&self) -> Asleep {
        self.asleep.fetch_add(1, Ordering::Relaxed);
        Asleep(Arc::clone(&self.asleep))
    }

    /// How many polls are asleep now.
    pub fn waiting(&self) -> usize {
        self.asleep.load(Ordering::Relaxed)
    }
}

/// Watches the directory of `db` for changes to its files: one task bumps
/// the counter for each batch of events that names one of them. It lives
/// as long as its bus (which keeps a receiver), unless the watch fails or
/// its directory goes: receivers then see the sender closed, and the next
/// subscription starts a new watch.
fn start(db: &Path) -> std::io::Result<watch::Receiver<u64>> {
    let dir = db.parent().unwrap_or(Path::new("."));
    let prefix = db
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("warden.db")
        .to_owned();
    let inotify = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC)?;
    inotify.add_watch(
        dir,
        AddWatchFlags::IN_MODIFY | AddWatchFlags::IN_CREATE | AddWatchFlags::IN_MOVED_TO,
    )?;
    // `new` is deprecated because it cannot know the fd outlives the
    // registration; here it does: `Watched` owns the inotify fd, and the
    // AsyncFd deregisters before dropping it.
    #[allow(deprecated)]
    let fd = AsyncFd::new(Watched(inotify))?;
    let (tx, rx) = watch::channel(0u64);
    tokio::spawn(async move {
        loop {
            let ready = tokio::select! {
                r = fd.readable() => r,
                () = tx.closed() => return,
            };
            let Ok(mut guard) = ready else { return };
            match guard.get_inner().0.read_events() {
                Ok(events) => {
                    // The directory is gone (or unmounted): nothing more
                    // will come from this watch.
                    if events
                        .iter()
                        .any(|e| e.mask.contains(AddWatchFlags::IN_IGNORED))
                    {
                        return;
                    }
                    let ours = events.iter().any(|e| {
                        e.mask.contains(AddWatchFlags::IN_Q_OVERFLOW)
                            || e.name
                                .as_ref()
                                .and_then(|n| n.to_str())
                                .is_some_and(|n| n.starts_with(&prefix))
                    });
                    if ours {
                        tx.send_modify(|n| *n = n.wrapping_add(1));
                    }
                }
                Err(nix::errno::Errno::EAGAIN) => guard.clear_ready(),
                Err(_) => return,
            }
        }
    });
    Ok(rx)
}
