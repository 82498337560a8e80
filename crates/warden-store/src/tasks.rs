//! A2A tasks: created with their first message, moved through the checked
//! task state machine, given artifacts and messages. Every change appends a
//! `task.*` event in the same transaction; streams and resubscription read
//! those events.

use rusqlite::{Connection, OptionalExtension, params};
use serde_json::json;
use warden_core::{Artifact, CoreError, Message, Task, TaskId, TaskState, TaskStatus, Timestamp};

use crate::{Store, StoreError, events};

/// A page of tasks and the token for the next one, if there is more.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskPage {
    /// Newest status first.
    pub tasks: Vec<Task>,
    /// Pass back to get the next page; `None` on the last page.
    pub next_page_token: Option<String>,
    /// How many tasks match the filter across all pages, counted in the
    /// same snapshot as the page.
    pub total_size: u64,
}

/// Which tasks `list_tasks` returns.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TaskFilter {
    /// Only this conversation.
    pub context_id: Option<String>,
    /// Only tasks in this state.
    pub state: Option<TaskState>,
    /// Only tasks whose status changed at or after this time.
    pub updated_after: Option<Timestamp>,
}

fn status_millis(status: &TaskStatus) -> i64 {
    status.timestamp.unwrap_or_else(Timestamp::now).as_millis() as i64
}

fn task_state(conn: &Connection, id: &str) -> Result<TaskState, StoreError> {
    let status: String = conn
        .prepare_cached("SELECT status FROM tasks WHERE id = ?1")?
        .query_row([id], |r| r.get(0))
        .optional()?
        .ok_or_else(|| StoreError::NotFound {
            kind: "task",
            id: id.to_owned(),
        })?;
    Ok(serde_json::from_str::<TaskStatus>(&status)?.state)
}

fn load_task(conn: &Connection, id: &str) -> Result<Task, StoreError> {
    let row = conn
        .prepare_cached("SELECT context_id, status, metadata FROM tasks WHERE id = ?1")?
        .query_row([id], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, Option<String>>(2)?,
            ))
        })
        .optional()?
        .ok_or_else(|| StoreError::NotFound {
            kind: "task",
            id: id.to_owned(),
        })?;
    let (context_id, status, metadata) = row;
    let history = conn
        .prepare_cached("SELECT message FROM task_history WHERE task_id = ?1 ORDER BY seq")?
        .query_map([id], |r| r.get::<_, String>(0))?
        .map(|m| Ok(serde_json::from_str(&m?)?))
        .collect::<Result<Vec<Message>, StoreError>>()?;
    let artifacts = conn
        .prepare_cached("SELECT artifact FROM task_artifacts WHERE task_id = ?1 ORDER BY ord")?
        .query_map([id], |r| r.get::<_, String>(0))?
        .map(|a| Ok(serde_json::from_str(&a?)?))
        .collect::<Result<Vec<Artifact>, StoreError>>()?;
    Ok(Task {
        id: id.parse()?,
        context_id,
        status: serde_json::from_str(&status)?,
        artifacts,
        history,
        metadata: metadata.map(|m| serde_json::from_str(&m)).transpose()?,
    })
}

fn count_in(conn: &Connection, instance: &str, filter: &TaskFilter) -> Result<u64, StoreError> {
    let n: i64 = conn
        .prepare_cached(
            "SELECT COUNT(*) FROM tasks WHERE instance = ?1
               AND (?2 IS NULL OR context_id = ?2)
               AND (?3 IS NULL OR state = ?3)
               AND (?4 IS NULL OR updated_at >= ?4)",
        )?
        .query_row(
            params![
                instance,
                filter.context_id,
                filter.state.map(TaskState::as_str),
                filter.updated_after.map(|t| t.as_millis() as i64)
            ],
            |r| r.get(0),
        )?;
    Ok(n.max(0) as u64)
}

fn instance_of(conn: &Connection, id: &str) -> Result<String, StoreError> {
    conn.prepare_cached("SELECT instance FROM tasks WHERE id = ?1")?
        .query_row([id], |r| r.get(0))
        .optional()?
        .ok_or_else(|| StoreError::NotFound {
            kind: "task",
            id: id.to_owned(),
        })
}

fn push_message(conn: &Connection, id: &str, message: &Message) -> Result<(), StoreError> {
    conn.prepare_cached(
        "INSERT INTO task_history (task_id, seq, message)
         VALUES (?1, (SELECT COALESCE(MAX(seq), -1) + 1 FROM task_history WHERE task_id = ?1), ?2)",
    )?
    .execute(params![id, serde_json::to_string(message)?])?;
    Ok(())
}

fn refuse_if_terminal(conn: &Connection, id: &str, what: &str) -> Result<TaskState, StoreError> {
    let state = task_state(conn, id)?;
    if state.is_terminal() {
        return Err(CoreError::InvalidTransition {
            from: state.as_str().into(),
            to: what.into(),
        }
        .into());
    }
    Ok(state)
}

/// One change of a task, for [`Store::update_task`].
#[derive(Debug, Clone, PartialEq)]
pub enum TaskChange {
    /// As [`Store::set_task_status`].
    Status(TaskStatus),
    /// As [`Store::add_task_artifact`].
    Artifact {
        artifact: Artifact,
        append: bool,
        last_chunk: bool,
    },
    /// As [`Store::add_task_message`].
    Message(Message),
}

/// Applies `changes` to task `id` inside the caller's transaction; returns
/// the last event's seq.
fn apply(c: &Connection, id: &str, changes: &[TaskChange]) -> Result<u64, StoreError> {
    let mut seq = 0;
    for change in changes {
        seq = match change {
            TaskChange::Status(s) => set_status(c, id, s)?,
            TaskChange::Artifact {
                artifact,
                append,
                last_chunk,
            } => add_artifact(c, id, artifact, *append, *last_chunk)?,
            TaskChange::Message(m) => {
                refuse_if_terminal(c, id, "message")?;
                push_message(c, id, m)?;
                events::append(c, "task", id, "task.message", &json!({ "message": m }))?
            }
        };
    }
    Ok(seq)
}

fn set_status(c: &Connection, id: &str, status: &TaskStatus) -> Result<u64, StoreError> {
    let next = task_state(c, id)?.move_to(status.state)?;
    c.prepare_cached("UPDATE tasks SET state = ?2, status = ?3, updated_at = ?4 WHERE id = ?1")?
        .execute(params![
            id,
            next.as_str(),
            serde_json::to_string(status)?,
            status_millis(status),
        ])?;
    if let Some(m) = &status.message {
        push_message(c, id, m)?;
    }
    events::append(c, "task", id, "task.status", &json!({ "status": status }))
}

fn add_artifact(
    c: &Connection,
    id: &str,
    artifact: &Artifact,
    append: bool,
    last_chunk: bool,
) -> Result<u64, StoreError> {
    refuse_if_terminal(c, id, "artifact")?;
    let existing: Option<String> = c
        .prepare_cached(
            "SELECT artifact FROM task_artifacts WHERE task_id = ?1 AND artifact_id = ?2",
        )?
        .query_row(params![id, artifact.artifact_id], |r| r.get(0))
        .optional()?;
    let update = |stored: &Artifact| -> Result<(), StoreError> {
        c.prepare_cached(
            "UPDATE task_artifacts SET artifact = ?3 WHERE task_id = ?1 AND artifact_id = ?2",
        )?
        .execute(params![
            id,
            artifact.artifact_id,
            serde_json::to_string(stored)?
        ])?;
        Ok(())
    };
    match (append, existing) {
        (true, Some(json)) => {
            let mut stored: Artifact = serde_json::from_str(&json)?;
            stored.parts.extend(artifact.parts.iter().cloned());
            update(&stored)?;
        }
        // Replacing keeps the artifact's place among the others.
        (false, Some(_)) => update(artifact)?,
        (_, None) => {
            c.prepare_cached(
                "INSERT INTO task_artifacts (task_id, artifact_id, ord, artifact)
                 VALUES (?1, ?2, (SELECT COUNT(*) FROM task_artifacts WHERE task_id = ?1), ?3)",
            )?
            .execute(params![
                id,
                artifact.artifact_id,
                serde_json::to_string(artifact)?
            ])?;
        }
    }
    events::append(
        c,
        "task",
        id,
        "task.artifact",
        &json!({ "artifact": artifact, "append": append, "last_chunk": last_chunk }),
    )
}

impl Store {
    /// Records a new task of `instance` with its history (the client's first
    /// message) and status, and its `task.created` event, whose seq it returns.
    pub async fn create_task(&self, instance: &str, task: Task) -> Result<u64, StoreError> {
        let instance = instance.to_owned();
        self.write(move |c| {
            let id = task.id.to_string();
            let now = Timestamp::now().as_millis() as i64;
            c.prepare_cached(
                "INSERT INTO tasks (id, instance, context_id, state, status, metadata, created_at, updated_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            )?
            .execute(params![
                id,
                instance,
                task.context_id,
                task.status.state.as_str(),
                serde_json::to_string(&task.status)?,
                task.metadata.as_ref().map(serde_json::to_string).transpose()?,
                now,
                status_millis(&task.status),
            ])?;
            for m in &task.history {
                push_message(c, &id, m)?;
            }
            for (ord, a) in task.artifacts.iter().enumerate() {
                c.prepare_cached("INSERT INTO task_artifacts (task_id, artifact_id, ord, artifact) VALUES (?1, ?2, ?3, ?4)")?
                    .execute(params![id, a.artifact_id, ord as i64, serde_json::to_string(a)?])?;
            }
            events::append(c, "task", &id, "task.created", &json!({ "instance": instance, "status": task.status }))
        })
        .await
    }

    /// Moves a task to `status` through the checked state machine (terminal
    /// states are sticky) and appends `task.status`. Returns the event's seq.
    pub async fn set_task_status(&self, id: TaskId, status: TaskStatus) -> Result<u64, StoreError> {
        self.write(move |c| set_status(c, &id.to_string(), &status))
            .await
    }

    /// Adds an artifact, or with `append` extends the parts of the one with
    /// the same id; refused once the task has ended. Appends `task.artifact`.
    pub async fn add_task_artifact(
        &self,
        id: TaskId,
        artifact: Artifact,
        append: bool,
        last_chunk: bool,
    ) -> Result<u64, StoreError> {
        self.write(move |c| add_artifact(c, &id.to_string(), &artifact, append, last_chunk))
            .await
    }

    /// As [`Store::update_task`], only if the task's newest event is still
    /// `newest` (nothing happened to it since); otherwise refused.
    pub async fn update_task_if_unchanged(
        &self,
        id: TaskId,
        newest: u64,
        changes: Vec<TaskChange>,
    ) -> Result<u64, StoreError> {
        self.write(move |c| {
            let key = id.to_string();
            let now: i64 = c
                .prepare_cached(
                    "SELECT COALESCE(MAX(seq), 0) FROM events WHERE entity_kind = 'task' AND entity_id = ?1",
                )?
                .query_row([&key], |r| r.get(0))?;
            if now.max(0) as u64 != newest {
                return Err(CoreError::InvalidTransition {
                    from: format!("event {now}"),
                    to: format!("a change expected after event {newest}"),
                }
                .into());
            }
            apply(c, &key, &changes)
        })
        .await
    }

    /// Applies `changes` to task `id` in order, in one transaction: all of
    /// them or (if one is refused) none. Returns the last event's seq.
    pub async fn update_task(
        &self,
        id: TaskId,
        changes: Vec<TaskChange>,
    ) -> Result<u64, StoreError> {
        self.write(move |c| apply(c, &id.to_string(), &changes))
            .await
    }

    /// Adds a message to a live task's history and appends `task.message`;
    /// returns the task as it is then and the event's seq.
    pub async fn add_task_message(
        &self,
        id: TaskId,
        message: Message,
    ) -> Result<(Task, u64), StoreError> {
        self.write(move |c| {
            let id = id.to_string();
            refuse_if_terminal(c, &id, "message")?;
            push_message(c, &id, &message)?;
            let seq = events::append(
                c,
                "task",
                &id,
                "task.message",
                &json!({ "message": message }),
            )?;
            // Read in the same transaction: a stream that starts with this
            // task and continues after `seq` misses nothing.
            Ok((load_task(c, &id)?, seq))
        })
        .await
    }

    /// A task, its instance and the seq of its newest event, read in one
    /// snapshot: a stream that starts with this task and continues after
    /// that seq misses nothing and repeats nothing.
    pub async fn task_snapshot(&self, id: TaskId) -> Result<(String, Task, u64), StoreError> {
        self.read(move |c| {
            let tx = c.unchecked_transaction()?;
            let id = id.to_string();
            let instance = instance_of(&tx, &id)?;
            let task = load_task(&tx, &id)?;
            let seq: i64 = tx
                .prepare_cached("SELECT COALESCE(MAX(seq), 0) FROM events WHERE entity_kind = 'task' AND entity_id = ?1")?
                .query_row([&id], |r| r.get(0))?;
            tx.commit()?;
            Ok((instance, task, seq.max(0) as u64))
        })
        .await
    }

    /// One task with its full history and artifacts, and the instance it belongs to.
    pub async fn get_task(&self, id: TaskId) -> Result<(String, Task), StoreError> {
        self.read(move |c| {
            // One snapshot: status, history and artifacts from the same commit.
            let tx = c.unchecked_transaction()?;
            let id = id.to_string();
            let instance = instance_of(&tx, &id)?;
            let task = load_task(&tx, &id)?;
            tx.commit()?;
            Ok((instance, task))
        })
        .await
    }

    /// Tasks paused for input (any instance), with their context ids and
    /// statuses: at start-up, those paused on a live process's prompt have
    /// lost it.
    pub async fn paused_tasks(&self) -> Result<Vec<(TaskId, String, TaskStatus)>, StoreError> {
        self.read(|c| {
            c.prepare_cached(
                "SELECT id, context_id, status FROM tasks WHERE state = 'input_required' ORDER BY id",
            )?
            .query_map([], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                ))
            })?
            .map(|row| {
                let (id, ctx, status) = row?;
                Ok((id.parse()?, ctx, serde_json::from_str(&status)?))
            })
            .collect()
        })
        .await
    }

    /// Tasks being worked (submitted or working, any instance), with their
    /// context ids. At start-up these are tasks a previous server left in
    /// flight. Tasks waiting for the client (input or auth required) are
    /// not: nothing of theirs was running.
    pub async fn live_tasks(&self) -> Result<Vec<(TaskId, String)>, StoreError> {
        self.read(|c| {
            c.prepare_cached(
                "SELECT id, context_id FROM tasks
                 WHERE state IN ('submitted', 'working') ORDER BY id",
            )?
            .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))?
            .map(|row| {
                let (id, ctx) = row?;
                Ok((id.parse()?, ctx))
            })
            .collect()
        })
        .await
    }

    /// Tasks of `instance`, newest status first, `page_size` at a time.
    /// A malformed `page_token` is refused.
    pub async fn list_tasks(
        &self,
        instance: &str,
        filter: TaskFilter,
        page_size: u32,
        page_token: Option<String>,
    ) -> Result<TaskPage, StoreError> {
        let cursor = match page_token.as_deref() {
            None | Some("") => None,
            Some(t) => Some(
                t.split_once('.')
                    .and_then(|(ms, id)| {
                        Some((
                            ms.parse::<i64>().ok()?,
                            id.parse::<TaskId>().ok()?.to_string(),
                        ))
                    })
                    .ok_or_else(|| {
                        CoreError::field("pageToken", "is not a token this server issued")
                    })?,
            ),
        };
        let instance = instance.to_owned();
        self.read(move |c| {
            // One snapshot for the page and the count it is reported with.
            let tx = c.unchecked_transaction()?;
            let total_size = count_in(&tx, &instance, &filter)?;
            let mut stmt = tx.prepare_cached(
                "SELECT id, updated_at FROM tasks
                 WHERE instance = ?1
                   AND (?2 IS NULL OR context_id = ?2)
                   AND (?3 IS NULL OR state = ?3)
                   AND (?4 IS NULL OR updated_at >= ?4)
                   AND (?5 IS NULL OR updated_at < ?5 OR (updated_at = ?5 AND id < ?6))
                 ORDER BY updated_at DESC, id DESC
                 LIMIT ?7",
            )?;
            let (after_ms, after_id) = cursor.unzip();
            let rows = stmt
                .query_map(
                    params![
                        instance,
                        filter.context_id,
                        filter.state.map(TaskState::as_str),
                        filter.updated_after.map(|t| t.as_millis() as i64),
                        after_ms,
                        after_id,
                        i64::from(page_size) + 1,
                    ],
                    |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)),
                )?
                .collect::<Result<Vec<_>, _>>()?;
            let more = rows.len() > page_size as usize;
            let rows = &rows[..rows.len().min(page_size as usize)];
            let tasks = rows
                .iter()
                .map(|(id, _)| load_task(&tx, id))
                .collect::<Result<Vec<_>, _>>()?;
            let next_page_token = if more {
                rows.last().map(|(id, ms)| format!("{ms}.{id}"))
            } else {
                None
            };
            drop(stmt);
            tx.commit()?;
            Ok(TaskPage {
                tasks,
                next_page_token,
                total_size,
            })
        })
        .await
    }
}
