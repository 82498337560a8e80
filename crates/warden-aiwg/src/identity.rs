//! The executor's persistent identity: a UUIDv7 in `WARDEN_HOME/identity`,
//! made once and reused as `executor_id` across restarts (the orchestrator
//! reconciles missions by it).

use std::io::Write;
use std::path::Path;

/// Reads the identity, creating it (atomically) on first use.
pub fn load_or_create(home: &Path) -> std::io::Result<String> {
    let path = home.join("identity");
    match std::fs::read_to_string(&path) {
        Ok(text) => {
            let id = text.trim();
            uuid::Uuid::parse_str(id).map_err(|e| {
                std::io::Error::other(format!(
                    "{} does not hold a UUID ({e}); move it away to get a new identity",
                    path.display()
                ))
            })?;
            Ok(id.to_owned())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let id = uuid::Uuid::now_v7().to_string();
            let tmp = home.join(format!("identity.{}.tmp", std::process::id()));
            let mut f = std::fs::File::create(&tmp)?;
            writeln!(f, "{id}")?;
            f.sync_all()?;
            std::fs::rename(&tmp, &path)?;
            Ok(id)
        }
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn made_once_then_reused() {
        let dir = tempfile::tempdir().unwrap();
        let a = load_or_create(dir.path()).unwrap();
        let b = load_or_create(dir.path()).unwrap();
        assert_eq!(a, b);
        assert_eq!(uuid::Uuid::parse_str(&a).unwrap().get_version_num(), 7);
        std::fs::write(dir.path().join("identity"), "garbage").unwrap();
        assert!(load_or_create(dir.path()).is_err());
    }
}
