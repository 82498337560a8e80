//! The audit hash chain.

use warden_store::StoreError;

use super::open;

#[tokio::test]
async fn chain_verifies_and_detects_tampering() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir);
    for i in 0..5 {
        store
            .audit(
                "operator",
                "run.cancel",
                &format!("run-{i}"),
                serde_json::json!({ "i": i }),
            )
            .await
            .unwrap();
    }
    assert_eq!(store.verify_audit().await.unwrap(), 5);
    let log = store.audit_log(0, 100).await.unwrap();
    assert_eq!(log.len(), 5);
    assert!(log.windows(2).all(|w| w[1].prev_hash == w[0].hash));

    // The table refuses edits; tamper underneath the trigger to prove the chain catches it.
    let path = store.path().to_owned();
    store.close();
    let raw = rusqlite::Connection::open(&path).unwrap();
    let refused = raw
        .execute("UPDATE audit SET subject = 'forged' WHERE seq = 3", [])
        .unwrap_err();
    assert!(refused.to_string().contains("append-only"), "{refused}");
    raw.execute_batch(
        "DROP TRIGGER audit_no_update; UPDATE audit SET subject = 'forged' WHERE seq = 3;",
    )
    .unwrap();
    drop(raw);
    let store = warden_store::Store::open(&path, warden_store::CommitMode::Group).unwrap();
    assert!(matches!(
        store.verify_audit().await,
        Err(StoreError::AuditChainBroken { seq: 3 })
    ));
}
