//! `GET /api/v1/runs/{id}/events`: the run's events as Server-Sent Events.
//! Each event's `id:` is its global sequence; a client that reconnects with
//! `Last-Event-ID` receives every later event exactly once. The stream reads
//! the durable log, so what a client sees has been saved.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use base64::Engine;
use futures_util::Stream;
use serde_json::json;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use warden_store::EventRecord;

use super::runs_api::parse_id;
use super::{ApiError, AppState, MAX_EVENT_STREAMS};

const PAGE: u32 = 256;

pub async fn run_events(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    let id = parse_id(&id)?;
    let after = match headers.get("last-event-id") {
        Some(v) => v
            .to_str()
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
            .ok_or_else(|| {
                ApiError::field(
                    "Last-Event-ID",
                    "must be an event id (a non-negative integer)",
                )
            })?,
        // `?after=` is the same, for clients that cannot set headers.
        None => after_param(&query)?,
    };
    let run = state.store.get_run(id).await?;
    let permit = Arc::clone(&state.streams)
        .try_acquire_owned()
        .map_err(|_| {
            ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "too_many_streams",
                format!("{MAX_EVENT_STREAMS} event streams are open, the maximum; retry later"),
            )
        })?;
    let (tx, rx) = mpsc::channel::<Result<Event, Infallible>>(32);
    tokio::spawn(async move {
        let _permit = permit;
        let mut changes = state.store.changes_of("run", &id.to_string());
        let mut after = after;
        // A run that had ended when the client connected has all its events
        // in the log already; one that ends later ends the stream with
        // `run.finished`.
        let ended = run.state.is_terminal();
        loop {
            let batch = match state
                .store
                .events_for("run", id.to_string(), after, PAGE)
                .await
            {
                Ok(b) => b,
                Err(e) => {
                    let _ = tx.send(Ok(error_event(&e.to_string()))).await;
                    return;
                }
            };
            let full = batch.len() == PAGE as usize;
            let empty = batch.is_empty();
            for ev in batch {
                after = ev.seq;
                let last = ev.kind == "run.finished";
                if tx.send(Ok(render(&ev))).await.is_err() {
                    return;
                }
                if last {
                    return;
                }
            }
            if ended && empty {
                // The client already has everything up to the end.
                return;
            }
            if full || ended {
                continue;
            }
            tokio::select! {
                more = changes.changed() => if !more { return },
                () = state.shutdown.cancelled() => return,
                () = tx.closed() => return,
            }
        }
    });
    Ok(Sse::new(ReceiverStream::new(rx))
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15))))
}

fn after_param(query: &HashMap<String, String>) -> Result<u64, ApiError> {
    let mut after = 0;
    for (k, v) in query {
        match k.as_str() {
            "after" => {
                after = v.parse().map_err(|_| {
                    ApiError::field("after", "must be an event id (a non-negative integer)")
                })?;
            }
            other => {
                return Err(ApiError::field(
                    other,
                    format!("unknown query parameter {other:?}"),
                ));
            }
        }
    }
    Ok(after)
}

/// One SSE event: `id` = sequence, `event` = kind, `data` = JSON.
fn render(ev: &EventRecord) -> Event {
    let mut data = json!({ "seq": ev.seq, "run_id": ev.entity_id, "kind": ev.kind, "ts": ev.ts });
    if let serde_json::Value::Object(body) = &ev.body {
        for (k, v) in body {
            data[k] = v.clone();
        }
    }
    if let Some(bytes) = &ev.data {
        match std::str::from_utf8(bytes) {
            Ok(text) => data["text"] = json!(text),
            Err(_) => {
                data["base64"] = json!(base64::engine::general_purpose::STANDARD.encode(bytes))
            }
        }
    }
    match Event::default()
        .id(ev.seq.to_string())
        .event(&ev.kind)
        .json_data(&data)
    {
        Ok(e) => e,
        Err(e) => error_event(&e.to_string()),
    }
}

fn error_event(msg: &str) -> Event {
    Event::default()
        .event("error")
        .data(json!({ "message": msg }).to_string())
}
