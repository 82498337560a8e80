//! The bus's semantics on a real store: leases, late acks, redelivery,
//! dead letters, TTL, prune, unregister, bad input.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use warden_bus::{Bus, BusConfig, BusError, Post};
use warden_core::Timestamp;
use warden_store::{CommitMode, Store};

fn bus(dir: &tempfile::TempDir, config: BusConfig) -> Bus {
    let store = Store::open(&dir.path().join("warden.db"), CommitMode::Group).unwrap();
    Bus::new(store, config)
}

fn post<'a>(to: &'a str, payload: &'a str, ttl: Option<i64>) -> Post<'a> {
    Post {
        from: "user",
        to,
        kind: "request",
        capability: "code.search",
        payload,
        ttl,
        reply_to: None,
    }
}

/// Waits (by the clock, not a guess) until `ms` since the epoch has passed.
async fn until(ms: u64) {
    let now = Timestamp::now().as_millis();
    if ms >= now {
        tokio::time::sleep(Duration::from_millis(ms - now + 5)).await;
    }
}

#[tokio::test]
async fn a_delivered_message_belongs_to_its_lease_holder() {
    let dir = tempfile::tempdir().unwrap();
    let bus = bus(&dir, BusConfig::default());
    bus.register("researcher", &["coder,reader".into()])
        .await
        .unwrap();
    let m = bus
        .post(&post("researcher", r#"{"query":"test"}"#, None))
        .await
        .unwrap();
    assert_eq!((m.status.as_str(), m.ttl), ("pending", 300_000));
    let got = bus.poll("researcher", 10).await.unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!((got[0].status.as_str(), got[0].attempts), ("delivered", 1));
    let lease = got[0].lease_token.clone().unwrap();
    assert!(
        bus.poll("researcher", 10).await.unwrap().is_empty(),
        "leased messages are not redelivered"
    );
    assert!(matches!(
        bus.ack(&m.id, "not-the-lease", "x").await,
        Err(BusError::NotLeased(_))
    ));
    let done = bus.ack(&m.id, &lease, r#"{"found":3}"#).await.unwrap();
    assert_eq!(done.status, "completed");
    assert_eq!(done.result, Some(serde_json::json!({"found": 3})));
    let again = bus.ack(&m.id, &lease, "x").await;
    assert!(
        matches!(again, Err(BusError::NotLeased(ref e)) if e.contains("completed")),
        "{again:?}"
    );
}

#[tokio::test]
async fn an_expired_lease_cannot_ack_and_the_message_comes_back() {
    let dir = tempfile::tempdir().unwrap();
    let config = BusConfig {
        visibility: Duration::from_millis(100),
        ..BusConfig::default()
    };
    let bus = bus(&dir, config);
    bus.register("a", &[]).await.unwrap();
    let m = bus.post(&post("a", "1", None)).await.unwrap();
    let first = bus.poll("a", 1).await.unwrap().remove(0);
    until(first.visible_at).await;
    let late = bus
        .ack(&m.id, first.lease_token.as_deref().unwrap(), "x")
        .await;
    assert!(
        matches!(late, Err(BusError::NotLeased(ref e)) if e.contains("expired")),
        "{late:?}"
    );
    assert_eq!(
        bus.message(&m.id).await.unwrap().status,
        "delivered",
        "a late ack changes nothing"
    );
    let second = bus.poll("a", 1).await.unwrap().remove(0);
    assert_eq!(second.attempts, 2);
    assert_eq!(second.history.as_array().unwrap().len(), 1);
    let stale = bus
        .reject(&m.id, first.lease_token.as_deref().unwrap(), "no")
        .await;
    assert!(matches!(stale, Err(BusError::NotLeased(_))), "{stale:?}");
    let failed = bus
        .reject(&m.id, second.lease_token.as_deref().unwrap(), "cannot")
        .await
        .unwrap();
    assert_eq!(
        (failed.status.as_str(), failed.error.as_deref()),
        ("failed", Some("cannot"))
    );
}

#[tokio::test]
async fn too_many_deliveries_go_to_the_dead_letters_with_their_history() {
    let dir = tempfile::tempdir().unwrap();
    let config = BusConfig {
        visibility: Duration::from_millis(50),
        max_attempts: 2,
        ..BusConfig::default()
    };
    let bus = bus(&dir, config);
    bus.register("a", &[]).await.unwrap();
    let m = bus.post(&post("a", "{}", None)).await.unwrap();
    for attempt in 1..=2 {
        let d = bus.poll("a", 1).await.unwrap().remove(0);
        assert_eq!(d.attempts, attempt);
        until(d.visible_at).await;
    }
    assert!(bus.poll("a", 1).await.unwrap().is_empty());
    let dead = bus.message(&m.id).await.unwrap();
    assert_eq!(dead.status, "dead");
    assert_eq!(dead.history.as_array().unwrap().len(), 2);
    let status = bus.status().await.unwrap();
    assert_eq!(status[0].dead, 1);
}

#[tokio::test]
async fn a_message_past_its_ttl_is_never_delivered_and_prune_removes_it() {
    let dir = tempfile::tempdir().unwrap();
    let bus = bus(&dir, BusConfig::default());
    bus.register("a", &[]).await.unwrap();
    let m = bus.post(&post("a", "{}", Some(50))).await.unwrap();
    until(m.ts + 50).await;
    assert!(bus.poll("a", 10).await.unwrap().is_empty());
    let keep = bus.post(&post("a", "{}", Some(0))).await.unwrap();
    assert_eq!(bus.prune().await.unwrap(), (1, 0, 0));
    assert!(matches!(
        bus.message(&m.id).await,
        Err(BusError::UnknownMessage(_))
    ));
    assert_eq!(
        bus.message(&keep.id).await.unwrap().status,
        "pending",
        "ttl 0 never expires"
    );
}

#[tokio::test]
async fn unregister_fails_what_was_left_and_bad_input_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let bus = bus(
        &dir,
        BusConfig {
            max_payload: 64,
            ..BusConfig::default()
        },
    );
    bus.register("a", &[]).await.unwrap();
    let m = bus.post(&post("a", "{}", None)).await.unwrap();
    assert_eq!(bus.unregister("a").await.unwrap(), 1);
    let failed = bus.message(&m.id).await.unwrap();
    assert_eq!(failed.status, "failed");
    assert!(failed.error.unwrap().contains("unregistered"));
    assert!(matches!(
        bus.unregister("a").await,
        Err(BusError::UnknownAgent(_))
    ));
    assert!(matches!(
        bus.post(&post("nobody", "{}", None)).await,
        Err(BusError::UnknownAgent(_))
    ));
    assert!(matches!(
        bus.poll("nobody", 1).await,
        Err(BusError::UnknownAgent(_))
    ));
    bus.register("b", &[]).await.unwrap();
    for (payload, ttl, field) in [
        ("{not json", None, "payload"),
        (&*"x".repeat(100), None, "payload"),
        ("{}", Some(-1), "ttl"),
    ] {
        let e = bus.post(&post("b", payload, ttl)).await;
        assert!(
            matches!(e, Err(BusError::Invalid { field: f, .. }) if f == field),
            "{e:?}"
        );
    }
    assert!(matches!(
        bus.ack("msg_nope", "t", "x").await,
        Err(BusError::UnknownMessage(_))
    ));
    assert_eq!(
        bus.status()
            .await
            .unwrap()
            .iter()
            .map(|c| c.pending)
            .sum::<u64>(),
        0
    );
}

#[tokio::test]
async fn hundreds_of_waiting_polls_share_one_watch_and_each_is_woken() {
    // More than fs.inotify.max_user_instances (128 by default): with a
    // watch per waiting poll most of them would fail.
    const WAITERS: usize = 300;
    let dir = tempfile::tempdir().unwrap();
    let bus = bus(&dir, BusConfig::default());
    for i in 0..WAITERS {
        bus.register(&format!("agent-{i}"), &["code.search".into()])
            .await
            .unwrap();
    }
    let mut waiting = Vec::new();
    for i in 0..WAITERS {
        let bus = bus.clone();
        waiting.push(tokio::spawn(async move {
            bus.poll_wait(&format!("agent-{i}"), 10, Duration::from_secs(30))
                .await
        }));
    }
    // Every poll has looked once and is asleep on the watch: the posts
    // below must wake them.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while bus.waiting() < WAITERS {
        assert!(
            std::time::Instant::now() < deadline,
            "only {} polls went to sleep",
            bus.waiting()
        );
        tokio::task::yield_now().await;
    }
    for i in 0..WAITERS {
        let to = format!("agent-{i}");
        bus.post(&post(&to, "{}", None)).await.unwrap();
    }
    for (i, w) in waiting.into_iter().enumerate() {
        let got = tokio::time::timeout(Duration::from_secs(20), w)
            .await
            .expect("a waiting poll was not woken")
            .unwrap()
            .unwrap_or_else(|e| panic!("agent-{i}'s poll failed: {e}"));
        assert_eq!(got.len(), 1, "agent-{i}");
    }
}
