//! Streams of task events as Server-Sent Events, read from the durable task
//! event log: each event's `id:` is its global sequence, so a subscriber
//! that reconnects with `Last-Event-ID` gets exactly what it missed. A
//! stream starts with the task, then its status and artifact updates in
//! order, and closes after a terminal or interrupted state.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use warden_core::{Message, Task, TaskEvent};

use super::{A2aState, MAX_STREAMS};
use crate::ProtocolVersion;
use crate::engine::event_from_log;
use crate::jsonrpc;
use crate::jsonrpc::A2aError;
use crate::wire::{rest03, v1, v03};

const PAGE: u32 = 256;

/// How stream events are wrapped.
#[derive(Debug, Clone)]
pub struct Framing {
    /// Shapes of this protocol version.
    pub version: ProtocolVersion,
    /// The JSON-RPC request id each event answers; `None` for the
    /// HTTP+JSON binding, whose events are bare.
    pub rpc_id: Option<Value>,
    /// 0.3's HTTP+JSON shapes (the 0.3 proto's JSON) instead of `version`'s.
    pub rest03: bool,
}

impl Framing {
    fn task(&self, task: &Task) -> Value {
        let result = match (self.version, self.rest03) {
            (_, true) => serde_json::to_value(v1::StreamResponse::Task(task.into()))
                .map(|r| rest03::response_out(r, false)),
            (ProtocolVersion::V1_0, _) => {
                serde_json::to_value(v1::StreamResponse::Task(task.into()))
            }
            (ProtocolVersion::V0_3, _) => serde_json::to_value(v03::Event::Task(task.into())),
        };
        self.wrap(result.unwrap_or(Value::Null))
    }

    fn wrap(&self, result: Value) -> Value {
        match &self.rpc_id {
            Some(id) => jsonrpc::result(id, result),
            None => result,
        }
    }

    fn message(&self, message: &Message) -> Value {
        let result = match (self.version, self.rest03) {
            (_, true) => serde_json::to_value(v1::StreamResponse::Message(message.into()))
                .map(|r| rest03::response_out(r, false)),
            (ProtocolVersion::V1_0, _) => {
                serde_json::to_value(v1::StreamResponse::Message(message.into()))
            }
            (ProtocolVersion::V0_3, _) => serde_json::to_value(v03::Event::Message(message.into())),
        };
        self.wrap(result.unwrap_or(Value::Null))
    }

    fn event(&self, event: &TaskEvent, is_final: bool) -> Value {
        let result = match (self.version, self.rest03) {
            (_, true) => serde_json::to_value(v1::StreamResponse::from(event))
                .map(|r| rest03::response_out(r, is_final)),
            (ProtocolVersion::V1_0, _) => serde_json::to_value(v1::StreamResponse::from(event)),
            (ProtocolVersion::V0_3, _) => serde_json::to_value(v03::event(event, is_final)),
        };
        self.wrap(result.unwrap_or(Value::Null))
    }
}

fn sse_event(seq: u64, data: &Value) -> Event {
    Event::default().id(seq.to_string()).data(data.to_string())
}

/// Whether this event ends the stream.
fn ends(event: &TaskEvent) -> bool {
    matches!(event, TaskEvent::Status { status, .. } if status.state.is_terminal() || status.state.is_interrupted())
}

/// The SSE response: `first` (sent with id `after`) unless resuming, then
/// every event of the task after `after`.
pub fn respond(
    state: &A2aState,
    first: Option<Task>,
    task: &Task,
    after: u64,
    framing: Framing,
) -> Response {
    // Open streams are capped: each can hold a page of events in memory.
    let Ok(permit) = Arc::clone(&state.streams).try_acquire_owned() else {
        let mut body = A2aError::UnsupportedOperation(format!(
            "{MAX_STREAMS} streams are open, the maximum; retry later"
        ))
        .to_rest();
        body["error"]["code"] = 503.into();
        body["error"]["status"] = "UNAVAILABLE".into();
        return (
            axum::http::StatusCode::SERVICE_UNAVAILABLE,
            axum::Json(body),
        )
            .into_response();
    };
    let engine = state.engine.clone();
    let shutdown = state.shutdown.clone();
    let (tx, rx) = mpsc::channel::<Result<Event, Infallible>>(32);
    let (task_id, context_id) = (task.id, task.context_id.clone());
    let already_over = task.status.state.is_terminal();
    tokio::spawn(async move {
        let _permit = permit;
        if let Some(t) = &first
            && tx
                .send(Ok(sse_event(after, &framing.task(t))))
                .await
                .is_err()
        {
            return;
        }
        let store = engine.store().clone();
        let mut changes = store.changes_of("task", &task_id.to_string());
        let mut after = after;
        loop {
            let batch = match store
                .events_for("task", task_id.to_string(), after, PAGE)
                .await
            {
                Ok(b) => b,
                Err(e) => {
                    tracing::error!(task = %task_id, error = %e, "cannot read task events for a stream");
                    return;
                }
            };
            let full = batch.len() == PAGE as usize;
            let empty = batch.is_empty();
            for ev in batch {
                after = ev.seq;
                let Some(event) = event_from_log(task_id, &context_id, &ev.kind, &ev.body) else {
                    continue;
                };
                let last = ends(&event);
                if tx
                    .send(Ok(sse_event(ev.seq, &framing.event(&event, last))))
                    .await
                    .is_err()
                    || last
                {
                    return;
                }
            }
            if already_over && empty {
                return;
            }
            if full {
                continue;
            }
            tokio::select! {
                more = changes.changed() => if !more { return },
                () = tx.closed() => return,
                () = shutdown.cancelled() => return,
            }
        }
    });
    Sse::new(ReceiverStream::new(rx))
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response()
}

/// A stream that is one direct message (no task, so no event id to resume from).
pub fn respond_message(message: &Message, framing: &Framing) -> Response {
    let event = Event::default().data(framing.message(message).to_string());
    Sse::new(tokio_stream::once(Ok::<_, Infallible>(event))).into_response()
}

/// Reads `Last-Event-ID`, when a subscriber resumes.
pub fn last_event_id(headers: &axum::http::HeaderMap) -> Option<u64> {
    headers
        .get("last-event-id")?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()
}
