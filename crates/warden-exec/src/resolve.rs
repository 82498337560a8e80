//! Resolving the program to an absolute path and checking the working
//! directory before anything is spawned, so the failure names the cause.

use std::ffi::OsStr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use nix::unistd::{AccessFlags, access};

use crate::SpawnError;

/// Checks that `cwd` is a directory we may enter.
pub(crate) fn check_cwd(cwd: &Path) -> Result<(), SpawnError> {
    let bad = |why: String| SpawnError::BadCwd {
        path: cwd.display().to_string(),
        why,
    };
    let meta = std::fs::metadata(cwd).map_err(|e| bad(e.to_string()))?;
    if !meta.is_dir() {
        return Err(bad("not a directory".into()));
    }
    access(cwd, AccessFlags::X_OK).map_err(|e| bad(e.desc().into()))?;
    Ok(())
}

/// Resolves `program` the way `execvp` would, using the child's `path`, and
/// relative paths against `cwd` — except that relative or empty `PATH`
/// entries are skipped: a bare name never resolves to a file in the
/// working directory, which a run's own files could plant.
pub(crate) fn program(
    program: &str,
    cwd: &Path,
    path: Option<&OsStr>,
) -> Result<PathBuf, SpawnError> {
    if program.contains('/') {
        let p = cwd.join(program);
        return check_executable(&p, program).map(|()| p);
    }
    let path = path.unwrap_or_else(|| OsStr::new("/usr/local/bin:/usr/bin:/bin"));
    let mut denied = None;
    for dir in std::env::split_paths(path).filter(|d| d.is_absolute()) {
        let candidate = dir.join(program);
        match check_executable(&candidate, program) {
            Ok(()) => return Ok(candidate),
            Err(e @ SpawnError::NotExecutable(_)) => denied = Some(e),
            Err(_) => {}
        }
    }
    Err(denied.unwrap_or_else(|| SpawnError::ProgramNotFound(program.to_owned())))
}

fn check_executable(p: &Path, shown: &str) -> Result<(), SpawnError> {
    let meta = std::fs::metadata(p).map_err(|_| SpawnError::ProgramNotFound(shown.to_owned()))?;
    if !meta.is_file() || meta.permissions().mode() & 0o111 == 0 {
        return Err(SpawnError::NotExecutable(shown.to_owned()));
    }
    access(p, AccessFlags::X_OK).map_err(|_| SpawnError::NotExecutable(shown.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolves_on_path_and_names_failures() {
        let root = Path::new("/");
        let sh = program("sh", root, Some(OsStr::new("/nonexistent:/bin"))).unwrap();
        assert_eq!(sh, PathBuf::from("/bin/sh"));
        assert!(matches!(
            program("no-such-program-xyz", root, None),
            Err(SpawnError::ProgramNotFound(p)) if p == "no-such-program-xyz"
        ));
        assert!(matches!(
            program("/etc/passwd", root, None),
            Err(SpawnError::NotExecutable(_))
        ));
        assert!(matches!(
            check_cwd(Path::new("/nonexistent-dir")),
            Err(SpawnError::BadCwd { .. })
        ));
        assert!(matches!(
            check_cwd(Path::new("/etc/passwd")),
            Err(SpawnError::BadCwd { .. })
        ));
    }
}
