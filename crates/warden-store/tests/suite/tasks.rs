//! A2A tasks in the store.

use warden_core::{
    Artifact, CoreError, Message, Part, Role, Task, TaskId, TaskState, TaskStatus, Timestamp,
};
use warden_store::{StoreError, TaskFilter};

use super::open;

fn message(id: &str, role: Role, text: &str) -> Message {
    Message {
        message_id: id.into(),
        context_id: Some("ctx".into()),
        task_id: None,
        role,
        parts: vec![Part::text(text)],
        metadata: None,
        extensions: vec![],
        reference_task_ids: vec![],
    }
}

fn status(state: TaskState, at: u64) -> TaskStatus {
    TaskStatus {
        state,
        message: None,
        timestamp: Some(Timestamp::from_millis(at)),
    }
}

fn task(context: &str, at: u64) -> Task {
    Task {
        id: TaskId::new(),
        context_id: context.into(),
        status: status(TaskState::Submitted, at),
        artifacts: vec![],
        history: vec![message("m1", Role::User, "hello")],
        metadata: None,
    }
}

fn artifact(id: &str, text: &str) -> Artifact {
    Artifact {
        artifact_id: id.into(),
        name: None,
        description: None,
        parts: vec![Part::text(text)],
        metadata: None,
        extensions: vec![],
    }
}

#[tokio::test]
async fn a_task_lives_through_its_states_with_events() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir);
    let t = task("ctx", 1_000);
    store.create_task("default", t.clone()).await.unwrap();
    store
        .set_task_status(t.id, status(TaskState::Working, 2_000))
        .await
        .unwrap();
    store
        .add_task_artifact(t.id, artifact("out", "a"), false, false)
        .await
        .unwrap();
    store
        .add_task_artifact(t.id, artifact("out", "b"), true, true)
        .await
        .unwrap();
    store
        .add_task_artifact(t.id, artifact("other", "x"), false, true)
        .await
        .unwrap();
    let mut done = status(TaskState::Completed, 3_000);
    done.message = Some(message("m2", Role::Agent, "done"));
    store.set_task_status(t.id, done.clone()).await.unwrap();

    let (instance, got) = store.get_task(t.id).await.unwrap();
    assert_eq!(instance, "default");
    assert_eq!(
        got,
        Task {
            status: done.clone(),
            artifacts: vec![
                Artifact {
                    parts: vec![Part::text("a"), Part::text("b")],
                    ..artifact("out", "a")
                },
                artifact("other", "x"),
            ],
            history: vec![
                message("m1", Role::User, "hello"),
                message("m2", Role::Agent, "done")
            ],
            ..t.clone()
        }
    );
    let kinds: Vec<String> = store
        .events_for("task", t.id.to_string(), 0, 100)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.kind)
        .collect();
    assert_eq!(
        kinds,
        [
            "task.created",
            "task.status",
            "task.artifact",
            "task.artifact",
            "task.artifact",
            "task.status"
        ]
    );
}

#[tokio::test]
async fn terminal_states_are_sticky_and_refusals_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir);
    let t = task("ctx", 1_000);
    store.create_task("default", t.clone()).await.unwrap();
    store
        .set_task_status(t.id, status(TaskState::Canceled, 2_000))
        .await
        .unwrap();
    let before = store
        .events_for("task", t.id.to_string(), 0, 100)
        .await
        .unwrap();
    for result in [
        store
            .set_task_status(t.id, status(TaskState::Completed, 3_000))
            .await,
        store
            .add_task_artifact(t.id, artifact("late", "x"), false, true)
            .await,
        store
            .add_task_message(t.id, message("m9", Role::User, "more"))
            .await
            .map(|(_, seq)| seq),
    ] {
        assert!(
            matches!(
                result,
                Err(StoreError::Rejected(CoreError::InvalidTransition { .. }))
            ),
            "{result:?}"
        );
    }
    assert_eq!(
        store
            .events_for("task", t.id.to_string(), 0, 100)
            .await
            .unwrap(),
        before
    );
    assert_eq!(
        store.get_task(t.id).await.unwrap().1.status.state,
        TaskState::Canceled
    );
    assert!(
        store
            .get_task(TaskId::new())
            .await
            .unwrap_err()
            .is_not_found()
    );
}

#[tokio::test]
async fn listing_is_newest_status_first_with_a_stable_cursor_and_filters() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir);
    let mut ids = Vec::new();
    for i in 0..7u64 {
        let t = task(if i % 2 == 0 { "even" } else { "odd" }, 1_000 + i);
        ids.push(t.id);
        store.create_task("default", t).await.unwrap();
    }
    store
        .create_task("other", task("even", 5_000))
        .await
        .unwrap();
    // The oldest task changes last, so it comes first.
    store
        .set_task_status(ids[0], status(TaskState::Working, 9_000))
        .await
        .unwrap();

    let mut seen = Vec::new();
    let mut token = None;
    loop {
        let page = store
            .list_tasks("default", TaskFilter::default(), 3, token)
            .await
            .unwrap();
        seen.extend(page.tasks.iter().map(|t| t.id));
        token = page.next_page_token;
        if token.is_none() {
            break;
        }
    }
    let want: Vec<TaskId> = std::iter::once(ids[0])
        .chain(ids[1..].iter().rev().copied())
        .collect();
    assert_eq!(seen, want);

    let even = store
        .list_tasks(
            "default",
            TaskFilter {
                context_id: Some("even".into()),
                ..TaskFilter::default()
            },
            10,
            None,
        )
        .await
        .unwrap();
    assert_eq!((even.tasks.len(), even.total_size), (4, 4));
    let working = store
        .list_tasks(
            "default",
            TaskFilter {
                state: Some(TaskState::Working),
                ..TaskFilter::default()
            },
            10,
            None,
        )
        .await
        .unwrap();
    assert_eq!(
        working.tasks.iter().map(|t| t.id).collect::<Vec<_>>(),
        vec![ids[0]]
    );
    let recent = store
        .list_tasks(
            "default",
            TaskFilter {
                updated_after: Some(Timestamp::from_millis(1_005)),
                ..TaskFilter::default()
            },
            10,
            None,
        )
        .await
        .unwrap();
    assert_eq!(recent.tasks.len(), 3);
    let bad = store
        .list_tasks("default", TaskFilter::default(), 3, Some("nonsense".into()))
        .await
        .unwrap_err();
    assert!(
        matches!(bad, StoreError::Rejected(CoreError::InvalidField { .. })),
        "{bad}"
    );
}
