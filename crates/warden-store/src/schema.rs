//! Versioned schema migrations, applied in order at open. The version lives
//! in SQLite's `user_version`; a migration is never edited once released.

use rusqlite::Connection;

use crate::StoreError;

/// Each entry moves the schema from version `index` to `index + 1`.
const MIGRATIONS: &[&str] = &[
    // 1: runs, output chunks, the event log and the audit chain.
    r#"
    CREATE TABLE runs (
        id           TEXT PRIMARY KEY,
        spec         TEXT NOT NULL,
        state        TEXT NOT NULL,
        outcome      TEXT,
        pid          INTEGER,
        created_at   INTEGER NOT NULL,
        started_at   INTEGER,
        finished_at  INTEGER,
        output_bytes INTEGER NOT NULL DEFAULT 0
    );
    -- Only live runs are indexed by state: the restart sweep needs them, and
    -- ending a run then touches one small hot page instead of two random ones.
    CREATE INDEX runs_live ON runs(state) WHERE state IN ('starting', 'running');

    CREATE TABLE output_chunks (
        run_id TEXT NOT NULL REFERENCES runs(id),
        seq    INTEGER NOT NULL,
        stream TEXT NOT NULL,
        data   BLOB NOT NULL,
        PRIMARY KEY (run_id, seq)
    ) WITHOUT ROWID;

    CREATE TABLE events (
        seq         INTEGER PRIMARY KEY AUTOINCREMENT,
        entity_kind TEXT NOT NULL,
        entity_id   TEXT NOT NULL,
        kind        TEXT NOT NULL,
        body        TEXT NOT NULL,
        ts          INTEGER NOT NULL
    );
    CREATE INDEX events_entity ON events(entity_kind, entity_id, seq);
    CREATE TRIGGER events_no_update BEFORE UPDATE ON events
        BEGIN SELECT RAISE(ABORT, 'the event log is append-only'); END;
    CREATE TRIGGER events_no_delete BEFORE DELETE ON events
        BEGIN SELECT RAISE(ABORT, 'the event log is append-only'); END;

    CREATE TABLE audit (
        seq       INTEGER PRIMARY KEY AUTOINCREMENT,
        ts        INTEGER NOT NULL,
        actor     TEXT NOT NULL,
        action    TEXT NOT NULL,
        subject   TEXT NOT NULL,
        detail    TEXT NOT NULL,
        prev_hash TEXT NOT NULL,
        hash      TEXT NOT NULL
    );
    CREATE TRIGGER audit_no_update BEFORE UPDATE ON audit
        BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
    CREATE TRIGGER audit_no_delete BEFORE DELETE ON audit
        BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
    "#,
    // 2: A2A tasks, their history and artifacts.
    r#"
    CREATE TABLE tasks (
        id         TEXT PRIMARY KEY,
        instance   TEXT NOT NULL,
        context_id TEXT NOT NULL,
        state      TEXT NOT NULL,
        status     TEXT NOT NULL,
        metadata   TEXT,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL
    );
    -- ListTasks: newest status first, per instance, with a stable cursor.
    CREATE INDEX tasks_list ON tasks(instance, updated_at DESC, id DESC);
    CREATE INDEX tasks_context ON tasks(instance, context_id);

    CREATE TABLE task_history (
        task_id TEXT NOT NULL REFERENCES tasks(id),
        seq     INTEGER NOT NULL,
        message TEXT NOT NULL,
        PRIMARY KEY (task_id, seq)
    ) WITHOUT ROWID;

    CREATE TABLE task_artifacts (
        task_id     TEXT NOT NULL REFERENCES tasks(id),
        artifact_id TEXT NOT NULL,
        ord         INTEGER NOT NULL,
        artifact    TEXT NOT NULL,
        PRIMARY KEY (task_id, artifact_id)
    ) WITHOUT ROWID;
    "#,
    // 3: the scratchpad bus: agents, messages under leases, resource leases.
    r#"
    CREATE TABLE bus_agents (
        name          TEXT PRIMARY KEY,
        capabilities  TEXT NOT NULL,
        registered_at INTEGER NOT NULL,
        last_poll     INTEGER
    ) WITHOUT ROWID;

    -- seq is the rowid: new messages take the largest plus one, so the
    -- queue order holds without AUTOINCREMENT's extra write per post.
    CREATE TABLE bus_messages (
        seq         INTEGER PRIMARY KEY,
        id          TEXT NOT NULL UNIQUE,
        sender      TEXT NOT NULL,
        recipient   TEXT NOT NULL,
        type        TEXT NOT NULL,
        capability  TEXT NOT NULL,
        payload     TEXT NOT NULL,
        ttl_ms      INTEGER NOT NULL,
        status      TEXT NOT NULL,
        ts          INTEGER NOT NULL,
        reply_to    TEXT,
        attempts    INTEGER NOT NULL DEFAULT 0,
        lease_token TEXT,
        visible_at  INTEGER NOT NULL,
        result      TEXT,
        error       TEXT,
        history     TEXT NOT NULL DEFAULT '[]',
        done_at     INTEGER
    );
    -- Poll: a recipient's unfinished messages in order, so a poll reads
    -- from the head of its queue however deep it is.
    CREATE INDEX bus_ready ON bus_messages(recipient, seq) WHERE status IN ('pending', 'delivered');
    CREATE INDEX bus_done ON bus_messages(done_at) WHERE status IN ('completed', 'failed');

    -- The human at the keyboard, the seed's default agent.
    INSERT INTO bus_agents (name, capabilities, registered_at) VALUES ('user', '[]', 0);

    CREATE TABLE bus_leases (
        resource   TEXT PRIMARY KEY,
        holder     TEXT,
        fencing    INTEGER NOT NULL,
        expires_at INTEGER
    ) WITHOUT ROWID;
    "#,
    // 4: AIWG executor-contract missions. Their events go to the event log
    // (entity_kind 'mission'); `mission_outbox` is how far the log has been
    // delivered to the orchestrator, so an outage loses nothing.
    r#"
    CREATE TABLE missions (
        id            TEXT PRIMARY KEY,
        session_id    TEXT NOT NULL,
        instance      TEXT NOT NULL,
        objective     TEXT NOT NULL,
        completion    TEXT NOT NULL,
        long_running  INTEGER NOT NULL,
        metadata      TEXT NOT NULL,
        state         TEXT NOT NULL,
        checkpoint_id TEXT NOT NULL,
        run_dir       TEXT,
        shim_pid      INTEGER,
        shim_start    INTEGER,
        exit_code     INTEGER,
        error         TEXT,
        created_at    INTEGER NOT NULL,
        updated_at    INTEGER NOT NULL,
        completed_at  INTEGER
    );
    CREATE INDEX missions_live ON missions(state)
        WHERE state NOT IN ('done', 'failed', 'aborted');

    CREATE TABLE mission_outbox (
        id        INTEGER PRIMARY KEY CHECK (id = 1),
        delivered INTEGER NOT NULL
    );
    INSERT INTO mission_outbox (id, delivered) VALUES (1, 0);
    "#,
    // 5: how far each mission's output has been reported (bytes), written
    // with its progress events and its suspension, so a restart (a crash
    // too) reads on from there: nothing reported twice, nothing skipped.
    r#"
    ALTER TABLE missions ADD COLUMN scanned INTEGER;
    "#,
];

/// The schema version this build writes.
pub(crate) const CURRENT: u32 = MIGRATIONS.len() as u32;

/// Brings `conn` up to [`CURRENT`]; refuses a database from a newer build.
pub(crate) fn migrate(conn: &mut Connection) -> Result<(), StoreError> {
    let have: u32 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    if have > CURRENT {
        return Err(StoreError::Open {
            path: conn.path().unwrap_or("?").to_owned(),
            why: format!(
                "schema version {have} is newer than this build's {CURRENT}; upgrade warden"
            ),
        });
    }
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(have as usize) {
        // Another process may be migrating the same file: take the write
        // lock first and look again, so each step runs exactly once.
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let now: u32 = tx.query_row("PRAGMA user_version", [], |r| r.get(0))?;
        if now > i as u32 {
            tx.commit()?;
            continue;
        }
        tx.execute_batch(sql)?;
        tx.pragma_update(None, "user_version", i as u32 + 1)?;
        tx.commit()?;
    }
    Ok(())
}
