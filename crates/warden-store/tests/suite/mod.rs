mod audit;
mod commit;
mod missions;
mod runs;
mod tasks;

use std::time::Duration;

use warden_core::{RunRecord, RunSpec};
use warden_store::{CommitMode, Store};

pub fn open(dir: &tempfile::TempDir) -> Store {
    Store::open(&dir.path().join("warden.db"), CommitMode::Group).unwrap()
}

pub fn record() -> RunRecord {
    RunRecord::new(RunSpec::new(
        vec!["echo".into(), "hi".into()],
        "/".into(),
        Duration::from_secs(5),
        1024,
    ))
}
