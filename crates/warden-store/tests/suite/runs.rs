//! The run lifecycle as the store records it.

use warden_core::{CoreError, Outcome, RunState};
use warden_store::{CommitMode, Store, StoreError};

use super::{open, record};

#[tokio::test]
async fn lifecycle_is_recorded_with_events_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir);
    let run = store.create_run(record(), "test").await.unwrap();
    assert_eq!(run.state, RunState::Starting);
    store.mark_started(run.id, 4242).await.unwrap();
    store
        .append_output(run.id, 0, "stdout", b"hi\n".to_vec())
        .await
        .unwrap();
    store
        .append_output(run.id, 1, "stderr", b"warn\n".to_vec())
        .await
        .unwrap();
    let state = store
        .finish_run(run.id, Outcome::exit_code(3))
        .await
        .unwrap();
    assert_eq!(state, RunState::Failed);
    let done = store.get_run(run.id).await.unwrap();
    assert_eq!(done.state, RunState::Failed);
    assert_eq!(done.outcome, Some(Outcome::exit_code(3)));
    assert_eq!(done.pid, Some(4242));
    assert_eq!(done.output_bytes, 8);
    assert!(done.finished_at.is_some() && done.started_at.is_some());

    let events = store
        .events_for("run", run.id.to_string(), 0, 100)
        .await
        .unwrap();
    let kinds: Vec<&str> = events.iter().map(|e| e.kind.as_str()).collect();
    assert_eq!(
        kinds,
        [
            "run.created",
            "run.started",
            "run.output",
            "run.output",
            "run.finished"
        ]
    );
    assert!(events.windows(2).all(|w| w[0].seq < w[1].seq));
    assert_eq!(events[2].data.as_deref(), Some(&b"hi\n"[..]));
    assert_eq!(events[3].data.as_deref(), Some(&b"warn\n"[..]));
    assert_eq!(
        events[4].body["outcome"],
        serde_json::json!({"status": "failed", "kind": "application", "exit_code": 3})
    );

    let later = store
        .events_for("run", run.id.to_string(), events[1].seq, 100)
        .await
        .unwrap();
    assert_eq!(later, events[2..].to_vec());
    assert_eq!(*store.committed().borrow(), events[4].seq);
}

#[tokio::test]
async fn an_ended_run_cannot_end_again_and_nothing_is_half_written() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir);
    let run = store.create_run(record(), "test").await.unwrap();
    store.mark_started(run.id, 1).await.unwrap();
    store.finish_run(run.id, Outcome::Completed).await.unwrap();
    let before = store
        .events_for("run", run.id.to_string(), 0, 100)
        .await
        .unwrap();
    let err = store
        .finish_run(run.id, Outcome::Cancelled)
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::Rejected(CoreError::InvalidTransition { .. })
        ),
        "{err}"
    );
    assert_eq!(
        store.get_run(run.id).await.unwrap().outcome,
        Some(Outcome::Completed)
    );
    assert_eq!(
        store
            .events_for("run", run.id.to_string(), 0, 100)
            .await
            .unwrap(),
        before
    );
    let late = store
        .append_output(run.id, 9, "stdout", b"late".to_vec())
        .await
        .unwrap_err();
    assert!(
        matches!(
            late,
            StoreError::Rejected(CoreError::InvalidTransition { .. })
        ),
        "{late}"
    );
    let missing = store.get_run(warden_core::RunId::new()).await.unwrap_err();
    assert!(missing.is_not_found());
}

#[tokio::test]
async fn writes_survive_reopening() {
    let dir = tempfile::tempdir().unwrap();
    let id = {
        let store = open(&dir);
        let run = store.create_run(record(), "test").await.unwrap();
        store.mark_started(run.id, 7).await.unwrap();
        store.close();
        run.id
    };
    let store = open(&dir);
    assert_eq!(store.get_run(id).await.unwrap().state, RunState::Running);
    let live = store.live_runs().await.unwrap();
    assert_eq!(live.iter().map(|r| r.id).collect::<Vec<_>>(), vec![id]);
    assert_eq!(
        store
            .interrupt_run(id, "server_restart", "the server stopped".into())
            .await
            .unwrap(),
        RunState::Failed
    );
    assert_eq!(store.live_runs().await.unwrap(), vec![]);
    let run = store.get_run(id).await.unwrap();
    assert_eq!(
        run.outcome,
        Some(Outcome::infrastructure(
            "server_restart",
            Some("the server stopped".into())
        ))
    );
    assert_eq!(
        store.list_runs(Some(RunState::Running), 10).await.unwrap(),
        vec![]
    );
    assert_eq!(store.list_runs(None, 10).await.unwrap(), vec![run]);
}

#[tokio::test]
async fn migrations_are_versioned_and_a_newer_schema_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("warden.db");
    Store::open(&path, CommitMode::Group).unwrap().close();
    let raw = rusqlite_version(&path);
    assert_eq!(raw, 5);
    set_version(&path, 99);
    let err = Store::open(&path, CommitMode::Group).unwrap_err();
    assert!(err.to_string().contains("newer than this build"), "{err}");
}

fn rusqlite_version(path: &std::path::Path) -> u32 {
    let c = rusqlite::Connection::open(path).unwrap();
    c.query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap()
}

fn set_version(path: &std::path::Path, v: u32) {
    let c = rusqlite::Connection::open(path).unwrap();
    c.pragma_update(None, "user_version", v).unwrap();
}
