//! One inotify instance for every run directory a server follows.
//!
//! An inotify instance per directory runs into `fs.inotify.max_user_instances`
//! (128 by default) long before a server runs out of missions; watches are
//! far cheaper (`max_user_watches` is in the hundreds of thousands). So one
//! reader task drains a single instance and wakes the [`DirWatch`] of each
//! directory that changed.

use std::collections::HashMap;
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify, WatchDescriptor};
use tokio::io::unix::AsyncFd;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// The shared instance; cheap to clone. Create it inside a tokio runtime:
/// its reader task runs there, until the last clone is dropped.
#[derive(Clone)]
pub struct DirWatcher {
    shared: Arc<Shared>,
    _reader: Arc<Reader>,
}

impl std::fmt::Debug for DirWatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DirWatcher")
            .field("dirs", &self.len())
            .finish()
    }
}

/// Stops the reader task when dropped.
struct Reader(CancellationToken);

impl Drop for Reader {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

struct Shared {
    fd: AsyncFd<Watched>,
    /// Who waits on each watch descriptor (a directory watched twice gets
    /// the same descriptor from the kernel).
    waiters: Mutex<HashMap<WatchDescriptor, Waiters>>,
    next: std::sync::atomic::AtomicU64,
    /// The reader task failed: every watch falls back to a look a second.
    failed: std::sync::atomic::AtomicBool,
}

/// The waiters of one descriptor, each with its token.
type Waiters = Vec<(u64, Arc<Notify>)>;

struct Watched(Inotify);

impl AsRawFd for Watched {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_fd().as_raw_fd()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl DirWatcher {
    pub fn new() -> std::io::Result<Self> {
        let inotify = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC)?;
        let shared = Arc::new(Shared {
            // `Watched` owns the fd, so it outlives the registration (the
            // soundness concern behind the deprecation; `register` is unsafe).
            #[allow(deprecated)]
            fd: AsyncFd::new(Watched(inotify))?,
            waiters: Mutex::new(HashMap::new()),
            next: std::sync::atomic::AtomicU64::new(0),
            failed: std::sync::atomic::AtomicBool::new(false),
        });
        let stop = CancellationToken::new();
        tokio::spawn(read_events(Arc::clone(&shared), stop.clone()));
        Ok(Self {
            shared,
            _reader: Arc::new(Reader(stop)),
        })
    }

    /// Starts following `dir`: files created, written or renamed into it.
    pub fn watch(&self, dir: &Path) -> std::io::Result<DirWatch> {
        let notify = Arc::new(Notify::new());
        let token = self
            .shared
            .next
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // Under the lock: an event for the new descriptor waits for it.
        let mut waiters = lock(&self.shared.waiters);
        let wd = self.shared.fd.get_ref().0.add_watch(
            dir,
            AddWatchFlags::IN_MODIFY | AddWatchFlags::IN_CREATE | AddWatchFlags::IN_MOVED_TO,
        )?;
        waiters
            .entry(wd)
            .or_default()
            .push((token, Arc::clone(&notify)));
        Ok(DirWatch {
            shared: Arc::clone(&self.shared),
            wd,
            token,
            notify,
        })
    }

    /// How many directories are followed now.
    pub fn len(&self) -> usize {
        lock(&self.shared.waiters).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Wakes when files of one directory change.
pub struct DirWatch {
    shared: Arc<Shared>,
    wd: WatchDescriptor,
    token: u64,
    notify: Arc<Notify>,
}

impl DirWatch {
    /// Returns after the next change (one that happened since the last
    /// return counts: it is never missed between two calls), or after a
    /// second if the shared reader has failed.
    pub async fn changed(&self) {
        if self
            .shared
            .failed
            .load(std::sync::atomic::Ordering::Acquire)
        {
            tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        } else {
            self.notify.notified().await;
        }
    }
}

impl Drop for DirWatch {
    fn drop(&mut self) {
        let mut waiters = lock(&self.shared.waiters);
        let Some(list) = waiters.get_mut(&self.wd) else {
            return;
        };
        list.retain(|(t, _)| *t != self.token);
        if list.is_empty() {
            waiters.remove(&self.wd);
            // Fails harmlessly when the directory is gone (the kernel
            // dropped the watch already).
            let _ = self.shared.fd.get_ref().0.rm_watch(self.wd);
        }
    }
}

/// Marks the reader failed and wakes every watch, so each one falls back to
/// looking once a second.
fn fail(s: &Shared, e: &dyn std::fmt::Display) {
    tracing::error!(error = %e, "the run directories' inotify failed; missions fall back to a look a second");
    s.failed.store(true, std::sync::atomic::Ordering::Release);
    lock(&s.waiters)
        .values()
        .flatten()
        .for_each(|(_, n)| n.notify_one());
}

async fn read_events(s: Arc<Shared>, stop: CancellationToken) {
    loop {
        let ready = tokio::select! {
            r = s.fd.readable() => r,
            () = stop.cancelled() => return,
        };
        let mut guard = match ready {
            Ok(g) => g,
            Err(e) => return fail(&s, &e),
        };
        match guard.get_inner().0.read_events() {
            Ok(events) => {
                let waiters = lock(&s.waiters);
                // A full queue loses events: everyone looks again.
                if events
                    .iter()
                    .any(|e| e.mask.contains(AddWatchFlags::IN_Q_OVERFLOW))
                {
                    waiters.values().flatten().for_each(|(_, n)| n.notify_one());
                    continue;
                }
                for e in &events {
                    for (_, n) in waiters.get(&e.wd).into_iter().flatten() {
                        n.notify_one();
                    }
                }
            }
            Err(nix::errno::Errno::EAGAIN) => guard.clear_ready(),
            Err(e) => return fail(&s, &e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    async fn wakes(w: &DirWatch) -> bool {
        tokio::time::timeout(Duration::from_secs(5), w.changed())
            .await
            .is_ok()
    }

    #[tokio::test]
    async fn a_directory_watched_twice_keeps_waking_the_handle_left() {
        let dir = tempfile::tempdir().unwrap();
        let watcher = DirWatcher::new().unwrap();
        let a = watcher.watch(dir.path()).unwrap();
        let b = watcher.watch(dir.path()).unwrap();
        assert_eq!(watcher.len(), 1, "one descriptor for the directory");
        std::fs::write(dir.path().join("one"), "x").unwrap();
        assert!(wakes(&a).await && wakes(&b).await);
        drop(a);
        // A wake-up left from the first write (create, then modify) is
        // taken first, so the next one is the second write's.
        let _ = tokio::time::timeout(Duration::from_millis(100), b.changed()).await;
        std::fs::write(dir.path().join("two"), "x").unwrap();
        assert!(wakes(&b).await, "the other handle still hears");
        drop(b);
        assert!(watcher.is_empty());
    }

    #[tokio::test]
    async fn a_change_before_the_wait_is_not_missed_and_other_directories_stay_quiet() {
        let (one, two) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let watcher = DirWatcher::new().unwrap();
        let w1 = watcher.watch(one.path()).unwrap();
        let w2 = watcher.watch(two.path()).unwrap();
        std::fs::write(one.path().join("f"), "x").unwrap();
        // Give the reader time to dispatch before anyone waits.
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(wakes(&w1).await);
        let quiet = tokio::time::timeout(Duration::from_millis(200), w2.changed()).await;
        assert!(quiet.is_err(), "no change in the second directory");
    }
}
