//! Waiting for the bus to change without polling it: every commit, from
//! this process or another, writes the database's WAL file, so an inotify
//! watch on its directory wakes a long poll exactly when there may be
//! something new.

use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::path::Path;

use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify};
use tokio::io::unix::AsyncFd;

/// Wakes on writes to the store's files.
pub struct StoreWatch {
    fd: AsyncFd<Watched>,
    prefix: String,
}

/// The inotify instance, as tokio's reactor wants it.
struct Watched(Inotify);

impl AsRawFd for Watched {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_fd().as_raw_fd()
    }
}

impl StoreWatch {
    /// Watches the directory of `db` for changes to its files.
    pub fn new(db: &Path) -> std::io::Result<Self> {
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
        Ok(Self {
            // `new` is deprecated because it cannot know the fd outlives the
            // registration; here it does: `Watched` owns the inotify fd, and
            // the AsyncFd deregisters before dropping it.
            #[allow(deprecated)]
            fd: AsyncFd::new(Watched(inotify))?,
            prefix,
        })
    }

    /// Returns after the next write to one of the store's files.
    pub async fn changed(&mut self) -> std::io::Result<()> {
        loop {
            let mut guard = self.fd.readable().await?;
            let events = match guard.get_inner().0.read_events() {
                Ok(ev) => ev,
                Err(nix::errno::Errno::EAGAIN) => {
                    guard.clear_ready();
                    continue;
                }
                Err(e) => return Err(e.into()),
            };
            let ours = events.iter().any(|e| {
                e.name
                    .as_ref()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with(&self.prefix))
            });
            if ours {
                return Ok(());
            }
        }
    }
}

impl std::fmt::Debug for StoreWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreWatch")
            .field("fd", &self.fd.get_ref().as_raw_fd())
            .finish()
    }
}
