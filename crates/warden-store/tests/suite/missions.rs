//! AIWG missions in the store: dispatch is idempotent, state changes follow
//! the contract's diagram in one transaction with their event, and the
//! outbox delivers queued events in order across reopen.

use serde_json::{Value, json};
use warden_core::{MissionId, MissionState};
use warden_store::{Dispatched, MissionRecord, MissionUpdate, StoreError};

use super::open;

fn mission(id: &str) -> MissionRecord {
    MissionRecord {
        long_running: true,
        metadata: json!({"issue": 7}),
        ..MissionRecord::assigned(
            MissionId::parse(id).unwrap(),
            "s-1".into(),
            "default".into(),
            "make test".into(),
            "tests pass".into(),
            format!("ckpt-{id}"),
        )
    }
}

fn envelope(event: &str, id: &str) -> Value {
    json!({"event": event, "mission_id": id})
}

fn id(s: &str) -> MissionId {
    MissionId::parse(s).unwrap()
}

#[tokio::test]
async fn a_mission_is_dispatched_once() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir);
    let first = store
        .dispatch_mission(mission("m-1"), envelope("mission.assigned", "m-1"))
        .await
        .unwrap();
    assert!(matches!(first, Dispatched::Created(_)));
    let again = store
        .dispatch_mission(mission("m-1"), envelope("mission.assigned", "m-1"))
        .await
        .unwrap();
    let Dispatched::Existing(rec) = again else {
        panic!("dispatched twice")
    };
    assert_eq!(rec.state, MissionState::Assigned);
    assert_eq!(rec.metadata, json!({"issue": 7}));
    let events = store.recent_mission_events(id("m-1"), 50).await.unwrap();
    assert_eq!(events.len(), 1, "the second dispatch appended nothing");
}

#[tokio::test]
async fn transitions_follow_the_diagram_with_their_event() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir);
    store
        .dispatch_mission(mission("m-2"), envelope("mission.assigned", "m-2"))
        .await
        .unwrap();
    let refused = store
        .transition_mission(
            id("m-2"),
            MissionState::Completed,
            MissionUpdate::default(),
            (
                "mission.completed".into(),
                envelope("mission.completed", "m-2"),
            ),
        )
        .await;
    assert!(
        matches!(refused, Err(StoreError::Rejected(_))),
        "{refused:?}"
    );
    assert_eq!(
        store
            .recent_mission_events(id("m-2"), 50)
            .await
            .unwrap()
            .len(),
        1
    );

    store
        .transition_mission(
            id("m-2"),
            MissionState::Running,
            MissionUpdate {
                run_dir: Some("/runs/m-2".into()),
                shim: Some((4242, 99)),
                ..Default::default()
            },
            ("mission.started".into(), envelope("mission.started", "m-2")),
        )
        .await
        .unwrap();
    store
        .transition_mission(
            id("m-2"),
            MissionState::Completed,
            MissionUpdate {
                exit_code: Some(0),
                ..Default::default()
            },
            (
                "mission.completed".into(),
                envelope("mission.completed", "m-2"),
            ),
        )
        .await
        .unwrap();
    let rec = store.mission(id("m-2")).await.unwrap();
    assert_eq!(rec.state, MissionState::Completed);
    assert_eq!(rec.shim, Some((4242, 99)), "kept from the earlier change");
    assert_eq!(rec.run_dir.as_deref(), Some("/runs/m-2"));
    assert_eq!(rec.exit_code, Some(0));
    assert!(rec.completed_at.is_some());
    assert!(store.active_missions().await.unwrap().is_empty());
    let kinds: Vec<String> = store
        .recent_mission_events(id("m-2"), 2)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.kind)
        .collect();
    assert_eq!(kinds, ["mission.started", "mission.completed"]);
    assert!(matches!(
        store.mission(id("m-none")).await,
        Err(StoreError::NotFound { .. })
    ));
}

#[tokio::test]
async fn the_outbox_delivers_queued_events_in_order_across_reopen() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = open(&dir);
        for m in ["m-a", "m-b"] {
            store
                .dispatch_mission(mission(m), envelope("mission.assigned", m))
                .await
                .unwrap();
        }
        store
            .append_mission_event(
                id("m-a"),
                "mission.progress".into(),
                envelope("mission.progress", "m-a"),
            )
            .await
            .unwrap();
        let pending = store.undelivered_mission_events(0, 10).await.unwrap();
        let kinds: Vec<(&str, &str)> = pending
            .iter()
            .map(|e| (e.kind.as_str(), e.envelope["mission_id"].as_str().unwrap()))
            .collect();
        assert_eq!(
            kinds,
            [
                ("mission.assigned", "m-a"),
                ("mission.assigned", "m-b"),
                ("mission.progress", "m-a")
            ]
        );
        store
            .mission_events_delivered(pending[1].seq)
            .await
            .unwrap();
        // Never backwards.
        store
            .mission_events_delivered(pending[0].seq)
            .await
            .unwrap();
        store.close();
    }
    let store = open(&dir);
    let pending = store.undelivered_mission_events(0, 10).await.unwrap();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].kind, "mission.progress");
    // A state change refused by a compare-and-set appends nothing.
    let stale = store
        .transition_mission(
            id("m-a"),
            MissionState::Running,
            MissionUpdate {
                only_from: Some(MissionState::Suspended),
                ..Default::default()
            },
            ("mission.resumed".into(), json!({})),
        )
        .await;
    assert!(matches!(stale, Err(StoreError::Rejected(_))), "{stale:?}");
    assert_eq!(
        store.undelivered_mission_events(0, 10).await.unwrap().len(),
        1
    );
    assert_eq!(store.active_missions().await.unwrap().len(), 2);
    assert!(matches!(
        store
            .append_mission_event(id("m-x"), "mission.progress".into(), json!({}))
            .await,
        Err(StoreError::NotFound { .. })
    ));
}

#[tokio::test]
async fn resumes_commit_together_and_the_read_mark_moves_with_its_events() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir);
    for m in ["m-a", "m-b", "m-c"] {
        store
            .dispatch_mission(mission(m), envelope("mission.assigned", m))
            .await
            .unwrap();
        store
            .transition_mission(
                id(m),
                MissionState::Running,
                MissionUpdate::default(),
                ("mission.started".into(), envelope("mission.started", m)),
            )
            .await
            .unwrap();
    }
    store
        .record_progress(
            id("m-a"),
            42,
            (
                "mission.progress".into(),
                envelope("mission.progress", "m-a"),
            ),
        )
        .await
        .unwrap();
    assert_eq!(store.mission(id("m-a")).await.unwrap().scanned, Some(42));
    for (m, mark) in [("m-a", 50), ("m-b", 7)] {
        let update = MissionUpdate {
            scanned: Some(mark),
            ..MissionUpdate::default()
        };
        store
            .transition_mission(
                id(m),
                MissionState::Suspended,
                update,
                ("mission.suspended".into(), envelope("mission.suspended", m)),
            )
            .await
            .unwrap();
    }
    // A mark not given is kept.
    store
        .transition_mission(
            id("m-b"),
            MissionState::Failed,
            MissionUpdate::default(),
            ("mission.failed".into(), envelope("mission.failed", "m-b")),
        )
        .await
        .unwrap();
    assert_eq!(store.mission(id("m-b")).await.unwrap().scanned, Some(7));

    let resume = |m: &str, to| warden_store::Resume {
        id: id(m),
        events: vec![
            (
                "mission.reconnected".into(),
                envelope("mission.reconnected", m),
            ),
            ("mission.resumed".into(), envelope("mission.resumed", m)),
        ],
        to,
    };
    // m-b ended meanwhile and m-c was never suspended: only m-a resumes,
    // into the prompt it was waiting on.
    let resumed = store
        .resume_missions(vec![
            resume("m-a", MissionState::HitlRequired),
            resume("m-b", MissionState::Running),
            resume("m-c", MissionState::Running),
        ])
        .await
        .unwrap();
    assert_eq!(resumed, vec![id("m-a")]);
    let a = store.mission(id("m-a")).await.unwrap();
    assert_eq!(a.state, MissionState::HitlRequired);
    assert_eq!(a.scanned, Some(50));
    let kinds: Vec<String> = store
        .recent_mission_events(id("m-a"), 2)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.kind)
        .collect();
    assert_eq!(kinds, ["mission.reconnected", "mission.resumed"]);
    assert_eq!(
        store.recent_mission_events(id("m-c"), 1).await.unwrap()[0].kind,
        "mission.started",
        "nothing logged for a mission not resumed"
    );
    // A state the diagram forbids after a resume is refused whole.
    let err = store
        .resume_missions(vec![resume("m-a", MissionState::Assigned)])
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Rejected(_)), "{err}");
    let listed: Vec<String> = store
        .list_missions(true, 10)
        .await
        .unwrap()
        .into_iter()
        .map(|m| m.id.to_string())
        .collect();
    assert_eq!(listed.len(), 2, "m-b ended: {listed:?}");
}
