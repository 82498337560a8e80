//! The task engine against a real store.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use warden_a2a::engine::TaskEngine;
use warden_core::{Message, Part, Role, Task, TaskId, TaskState, TaskStatus, Timestamp};
use warden_store::{CommitMode, Store};

#[tokio::test]
async fn tasks_left_in_flight_by_a_previous_server_are_failed_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("w.db"), CommitMode::Group).unwrap();
    let live = Task {
        id: TaskId::new(),
        context_id: "c".into(),
        status: TaskStatus {
            state: TaskState::Working,
            message: None,
            timestamp: Some(Timestamp::now()),
        },
        artifacts: vec![],
        history: vec![Message {
            message_id: "m".into(),
            context_id: Some("c".into()),
            task_id: None,
            role: Role::User,
            parts: vec![Part::text("x")],
            metadata: None,
            extensions: vec![],
            reference_task_ids: vec![],
        }],
        metadata: None,
    };
    let done = Task {
        id: TaskId::new(),
        status: TaskStatus {
            state: TaskState::Completed,
            ..live.status.clone()
        },
        ..live.clone()
    };
    store.create_task("default", live.clone()).await.unwrap();
    store.create_task("default", done.clone()).await.unwrap();

    let engine = TaskEngine::new(store.clone());
    assert_eq!(engine.settle_interrupted().await.unwrap(), 1);
    let (_, after) = store.get_task(live.id).await.unwrap();
    assert_eq!(after.status.state, TaskState::Failed);
    let why = after.status.message.unwrap();
    assert_eq!(why.role, Role::Agent);
    assert!(
        matches!(&why.parts[0].content, warden_core::PartContent::Text(t) if t.contains("server stopped"))
    );
    assert_eq!(
        store.get_task(done.id).await.unwrap().1.status.state,
        TaskState::Completed
    );
    assert_eq!(engine.settle_interrupted().await.unwrap(), 0);
}
