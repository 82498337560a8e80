//! How the helper tells the supervisor what became of setup: one record
//! per run, written by the helper into a private directory the run cannot
//! reach, read (and removed) by the supervisor when the run has ended.
//!
//! A record is always written: `ran` once the target was started, or the
//! setup failure. No record at all means the helper died before it could
//! say, which the supervisor reports as such, never as the program's exit.

use std::fs;
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::Path;

use serde::{Deserialize, Serialize};

/// A setup failure: the target never started.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SetupFailure {
    /// `confinement_unavailable`, `confinement_failed`, `program_not_found`
    /// or `permission_denied`.
    pub reason: String,
    pub detail: String,
}

impl SetupFailure {
    pub(crate) fn new(reason: &str, detail: impl Into<String>) -> Self {
        Self {
            reason: reason.to_owned(),
            detail: detail.into(),
        }
    }

    pub(crate) fn unavailable(detail: impl Into<String>) -> Self {
        Self::new("confinement_unavailable", detail)
    }

    /// A setup step failed (bad policy, a system call refused).
    pub fn failed(detail: impl Into<String>) -> Self {
        Self::new("confinement_failed", detail)
    }

    /// The helper's exit code, as `env` and shells use them.
    pub(crate) fn exit_code(&self) -> i32 {
        match self.reason.as_str() {
            "program_not_found" => 127,
            "permission_denied" => 126,
            _ => 125,
        }
    }
}

/// What the helper recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "setup", rename_all = "snake_case")]
pub enum Record {
    /// The target was started; its exit is the helper's.
    Ran,
    Failed(SetupFailure),
}

impl Record {
    /// Creates the record's file: a new file (never an existing one, never
    /// through a symlink), readable by its owner only. Created before the
    /// helper's mounts turn read-only; written once the target has ended
    /// (or setup failed), so a helper killed before then leaves it empty.
    pub fn create(path: &Path) -> std::io::Result<fs::File> {
        fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(nix::libc::O_NOFOLLOW)
            .open(path)
    }

    /// Writes the record into a file from [`Record::create`].
    pub fn write_to(&self, mut file: fs::File) -> std::io::Result<()> {
        let json = serde_json::to_vec(self).map_err(std::io::Error::other)?;
        file.write_all(&json)
    }

    /// Creates and writes the record at once.
    pub fn write(&self, path: &Path) -> std::io::Result<()> {
        self.write_to(Self::create(path)?)
    }

    /// Reads the record without removing it; `None` if there is none or its
    /// file is still empty.
    pub fn read(path: &Path) -> Option<Result<Self, String>> {
        Self::load(path, false)
    }

    /// Reads and removes the record; `None` if there is none, or if its file
    /// is still empty (the helper was killed before it could write it).
    pub fn take(path: &Path) -> Option<Result<Self, String>> {
        Self::load(path, true)
    }

    /// Opens the record (never through a symlink), removing it once opened
    /// when `remove`, and parses it.
    fn load(path: &Path, remove: bool) -> Option<Result<Self, String>> {
        let mut f = fs::OpenOptions::new()
            .read(true)
            .custom_flags(nix::libc::O_NOFOLLOW)
            .open(path)
            .ok()?;
        if remove {
            let _ = fs::remove_file(path);
        }
        let mut text = Vec::new();
        if let Err(e) = f.read_to_end(&mut text) {
            return Some(Err(format!("reading {}: {e}", path.display())));
        }
        if text.is_empty() {
            return None;
        }
        Some(serde_json::from_slice(&text).map_err(|e| {
            format!(
                "the sandbox helper left an unreadable record ({e}): {}",
                String::from_utf8_lossy(&text)
            )
        }))
    }
}

/// Creates `dir` (mode 0700) or checks that the existing one is a real
/// directory of this user that nobody else may enter: another local user
/// must not be able to plant records or links in it.
pub fn private_dir(dir: &Path) -> Result<(), String> {
    match fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => return Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(format!("creating {}: {e}", dir.display())),
    }
    let meta = fs::symlink_metadata(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let uid = nix::unistd::geteuid().as_raw();
    if !meta.is_dir() || meta.uid() != uid || meta.mode() & 0o077 != 0 {
        return Err(format!(
            "{} must be a directory owned by uid {uid} with mode 0700 (it is owned by {} with mode {:o}); remove it",
            dir.display(),
            meta.uid(),
            meta.mode() & 0o7777
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_is_written_once_and_taken_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.status");
        Record::Ran.write(&path).unwrap();
        assert!(Record::Ran.write(&path).is_err(), "never overwritten");
        assert_eq!(Record::take(&path), Some(Ok(Record::Ran)));
        assert_eq!(Record::take(&path), None);
        let failed = Record::Failed(SetupFailure::failed("x"));
        failed.write(&path).unwrap();
        assert_eq!(Record::take(&path), Some(Ok(failed)));
        // Created but never written: the helper was killed.
        drop(Record::create(&path).unwrap());
        assert_eq!(Record::take(&path), None);
        assert!(!path.exists());
    }

    #[test]
    fn records_are_not_read_or_written_through_symlinks() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("secret");
        fs::write(&target, "{\"setup\":\"ran\"}").unwrap();
        let link = dir.path().join("r.status");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        assert!(Record::take(&link).is_none());
        assert!(Record::Ran.write(&link).is_err());
        assert_eq!(fs::read_to_string(&target).unwrap(), "{\"setup\":\"ran\"}");
    }

    #[test]
    fn a_shared_or_foreign_directory_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let private = dir.path().join("p");
        private_dir(&private).unwrap();
        private_dir(&private).unwrap();
        let open = dir.path().join("o");
        fs::create_dir(&open).unwrap();
        fs::set_permissions(&open, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
        assert!(private_dir(&open).unwrap_err().contains("mode 0700"));
        let link = dir.path().join("l");
        std::os::unix::fs::symlink(&private, &link).unwrap();
        assert!(private_dir(&link).is_err());
    }
}
