mod audit;
mod commit;
mod runs;

use std::time::Duration;

use warden_core::{RunRecord, RunSpec, StdinMode, Terminal};
use warden_store::{CommitMode, Store};

pub fn open(dir: &tempfile::TempDir) -> Store {
    Store::open(&dir.path().join("warden.db"), CommitMode::Group).unwrap()
}

pub fn record() -> RunRecord {
    RunRecord::new(RunSpec {
        argv: vec!["echo".into(), "hi".into()],
        cwd: "/".into(),
        env: vec![],
        timeout: Duration::from_secs(5),
        max_output: 1024,
        terminal: Terminal::Pipes,
        stdin: StdinMode::Closed,
    })
}
