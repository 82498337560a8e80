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
    /// return counts: it is never missed between two calls).
    pub async fn changed(&self) {
        self.notify.notified().await;
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

async fn read_events(s: Arc<Shared>, stop: CancellationToken) {
    loop {
        let ready = tokio::select! {
            r = s.fd.readable() => r,
            () = stop.cancelled() => return,
        };
        let mut guard = match ready {
            Ok(g) => g,
            Err(e) => {
                tracing::error!(error = %e, "the run directories' inotify failed; missions fall back to their 1 s checks");
                return;
            }
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
            Err(e) => {
                tracing::error!(error = %e, "reading the run directories' inotify failed");
                return;
            }
        }
    }
}
