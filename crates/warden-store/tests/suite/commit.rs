//! Group commit: many writers share commits, one failing write does not
//! sink the others, and readers never wait for the writer.

use std::sync::mpsc;
use std::time::Duration;

use warden_core::{Outcome, RunId};
use warden_store::StoreError;

use super::{open, record};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_writers_all_commit_with_distinct_sequences() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir);
    let mut tasks = Vec::new();
    for _ in 0..64 {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            let run = store.create_run(record(), "test").await.unwrap();
            store.mark_started(run.id, 1).await.unwrap();
            // A failing write in the middle of other writers' batches.
            let bad = store.finish_run(RunId::new(), Outcome::Completed).await;
            assert!(matches!(bad, Err(StoreError::NotFound { .. })));
            store.finish_run(run.id, Outcome::Completed).await.unwrap();
            run.id
        }));
    }
    let mut seqs = Vec::new();
    for t in tasks {
        let id = t.await.unwrap();
        let events = store
            .events_for("run", id.to_string(), 0, 10)
            .await
            .unwrap();
        assert_eq!(events.len(), 3);
        seqs.extend(events.iter().map(|e| e.seq));
    }
    seqs.sort();
    seqs.dedup();
    assert_eq!(seqs.len(), 64 * 3);
    assert_eq!(store.verify_audit().await.unwrap(), 64);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_do_not_wait_for_an_open_write() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir);
    let run = store.create_run(record(), "test").await.unwrap();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let writer = store.clone();
    // This write holds the writer's transaction open until the read is done;
    // if reads waited for the writer, the read below would never return.
    let blocked = tokio::spawn(async move {
        writer
            .write(move |_| {
                release_rx
                    .recv_timeout(Duration::from_secs(10))
                    .map_err(|_| StoreError::Closed)
            })
            .await
    });
    let read = tokio::time::timeout(Duration::from_secs(5), store.get_run(run.id)).await;
    release_tx.send(()).unwrap();
    assert_eq!(
        read.expect("read waited for the writer").unwrap().id,
        run.id
    );
    blocked.await.unwrap().unwrap();
}

#[tokio::test]
async fn a_follower_wakes_for_its_own_entity_only() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir);
    let mine = store.create_run(record(), "test").await.unwrap();
    let other = store.create_run(record(), "test").await.unwrap();
    use futures_util::FutureExt;
    let mut changes = store.changes_of("run", &mine.id.to_string());
    // The feed is told before a write is acknowledged, so by now it knows.
    store.mark_started(other.id, 1).await.unwrap();
    assert_eq!(
        changes.changed().now_or_never(),
        None,
        "another run's commit woke the follower"
    );
    store.mark_started(mine.id, 2).await.unwrap();
    assert_eq!(changes.changed().now_or_never(), Some(true));
    // A follower that fell behind the feed re-reads rather than miss anything.
    let mut behind = store.changes_of("run", &mine.id.to_string());
    for _ in 0..1100 {
        store
            .audit("test", "noise", "x", serde_json::json!({}))
            .await
            .unwrap();
        store.create_run(record(), "test").await.unwrap();
    }
    assert_eq!(behind.changed().now_or_never(), Some(true));
}
