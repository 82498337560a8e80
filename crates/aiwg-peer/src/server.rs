//! The orchestrator side of `executor.v1`, served on loopback for a test:
//! both registration routes (issuing a token), deregistration, the executor
//! WebSocket, and a client that posts dispatches to the executor. Every
//! payload received is checked against the schema rules; what fails is
//! kept as a violation for the test to assert on.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use axum::{Json, Router};
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::sync::{Notify, mpsc};

use crate::schema;

/// A frame received from the executor.
#[derive(Debug, Clone, PartialEq)]
pub struct Received {
    /// Which connection it came on (1, 2, … in order of connecting).
    pub connection: u32,
    pub frame: Value,
}

#[derive(Default)]
struct Inner {
    tokens: HashMap<String, String>,
    registrations: Vec<Value>,
    sandbox_registrations: Vec<Value>,
    deregistrations: Vec<String>,
    received: Vec<Received>,
    violations: Vec<String>,
    connections: u32,
    open: Option<mpsc::UnboundedSender<Message>>,
    /// Answer executor registration with this status instead (e.g. 404).
    refuse_registration: Option<u16>,
    /// Missions whose terminal event arrived: the event and when.
    ended: HashMap<String, (String, Instant)>,
    /// Each mission's life as seen, to judge the order of its events.
    order: crate::order::Tracker,
}

struct Shared {
    inner: Mutex<Inner>,
    changed: Notify,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A running peer; stops when dropped.
pub struct Peer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    client: reqwest::Client,
}

impl Drop for Peer {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
    }
}

impl Peer {
    /// Serves on 127.0.0.1 on a free port.
    pub async fn start() -> std::io::Result<Self> {
        let shared = Arc::new(Shared {
            inner: Mutex::new(Inner::default()),
            changed: Notify::new(),
        });
        let app = Router::new()
            .route("/api/sandboxes/register", post(sandbox_register))
            .route("/api/v1/executors/register", post(executor_register))
            .route("/api/v1/executors/{id}", delete(executor_delete))
            .route("/ws/executors/{id}", get(executor_ws))
            .with_state(Arc::clone(&shared));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async move {
                    let _ = stopped.await;
                })
                .await;
        });
        Ok(Self {
            addr,
            shared,
            stop: Some(stop),
            client: reqwest::Client::new(),
        })
    }

    /// `http://127.0.0.1:port`, what `AIWG_SERVE_ENDPOINT` names.
    pub fn base(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Answers executor registration with `status` from now on (`None`:
    /// register normally).
    pub fn refuse_registration(&self, status: Option<u16>) {
        self.shared.lock().refuse_registration = status;
    }

    /// The executor registrations received, in order.
    pub fn registrations(&self) -> Vec<Value> {
        self.shared.lock().registrations.clone()
    }

    /// The sandbox registrations received, in order.
    pub fn sandbox_registrations(&self) -> Vec<Value> {
        self.shared.lock().sandbox_registrations.clone()
    }

    /// Executor ids deregistered (`DELETE`), in order.
    pub fn deregistrations(&self) -> Vec<String> {
        self.shared.lock().deregistrations.clone()
    }

    /// Every frame received so far.
    pub fn received(&self) -> Vec<Received> {
        self.shared.lock().received.clone()
    }

    /// Every schema or protocol violation seen so far.
    pub fn violations(&self) -> Vec<String> {
        self.shared.lock().violations.clone()
    }

    /// The token issued to `executor_id`.
    pub fn token(&self, executor_id: &str) -> Option<String> {
        self.shared.lock().tokens.get(executor_id).cloned()
    }

    /// Whether an executor WebSocket is open now.
    pub fn connected(&self) -> bool {
        self.shared.lock().open.is_some()
    }

    /// Waits until `done` holds for the frames received (checked on every
    /// change), or fails after `limit` with what was received.
    pub async fn wait_for<F>(&self, limit: Duration, what: &str, done: F) -> Vec<Received>
    where
        F: Fn(&[Received]) -> bool,
    {
        let deadline = Instant::now() + limit;
        loop {
            let notified = self.shared.changed.notified();
            {
                let inner = self.shared.lock();
                if done(&inner.received) {
                    return inner.received.clone();
                }
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || tokio::time::timeout(left, notified).await.is_err() {
                let inner = self.shared.lock();
                if done(&inner.received) {
                    return inner.received.clone();
                }
                panic!(
                    "aiwg-peer: {what} did not happen within {limit:?}; received: {:#?}",
                    inner.received
                );
            }
        }
    }

    /// How many frames of `event` arrived (cheaper than a copy of them all).
    pub fn count(&self, event: &str) -> usize {
        self.shared
            .lock()
            .received
            .iter()
            .filter(|r| r.frame["event"] == event)
            .count()
    }

    /// How many missions have ended (a terminal event arrived).
    pub fn ended_count(&self) -> usize {
        self.shared.lock().ended.len()
    }

    /// Waits for `mission`'s terminal event; its name and when it arrived.
    pub async fn wait_ended(&self, mission: &str, limit: Duration) -> Option<(String, Instant)> {
        let deadline = Instant::now() + limit;
        loop {
            let notified = self.shared.changed.notified();
            if let Some(e) = self.shared.lock().ended.get(mission) {
                return Some(e.clone());
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || tokio::time::timeout(left, notified).await.is_err() {
                return self.shared.lock().ended.get(mission).cloned();
            }
        }
    }

    /// Sends a frame to the executor over the open WebSocket.
    pub fn send(&self, frame: Value) -> Result<(), String> {
        let inner = self.shared.lock();
        let tx = inner.open.as_ref().ok_or("no executor connected")?;
        tx.send(Message::Text(frame.to_string().into()))
            .map_err(|_| "the connection closed".to_owned())
    }

    /// Closes the executor's WebSocket (the executor should reconnect).
    pub fn drop_connection(&self) {
        if let Some(tx) = self.shared.lock().open.take() {
            let _ = tx.send(Message::Close(None));
        }
    }

    /// Posts a dispatch to the executor at `rest` with the token issued to
    /// `executor_id`; returns the status and body, and checks a 202 body.
    pub async fn dispatch(
        &self,
        rest: &str,
        executor_id: &str,
        session: &str,
        body: Value,
    ) -> (u16, Value) {
        let token = self.token(executor_id).unwrap_or_default();
        self.dispatch_with_token(rest, session, &token, body).await
    }

    /// As [`Peer::dispatch`] with a given bearer token.
    pub async fn dispatch_with_token(
        &self,
        rest: &str,
        session: &str,
        token: &str,
        body: Value,
    ) -> (u16, Value) {
        let resp = self
            .client
            .post(format!("{rest}/api/v1/sessions/{session}/dispatch"))
            .bearer_auth(token)
            .json(&body)
            .send()
            .await;
        let resp = match resp {
            Ok(r) => r,
            Err(e) => return (0, json!({"transport_error": e.to_string()})),
        };
        let status = resp.status().as_u16();
        let body: Value = resp.json().await.unwrap_or(Value::Null);
        if status == 202 {
            let mut v = self.shared.lock();
            v.violations.extend(
                schema::check_dispatch_response(&body)
                    .into_iter()
                    .map(|e| format!("dispatch answer: {e}")),
            );
        }
        (status, body)
    }

    /// Fetches `GET /api/v1/missions/{id}` from the executor and checks it.
    pub async fn mission_status(&self, rest: &str, token: &str, mission: &str) -> (u16, Value) {
        let resp = self
            .client
            .get(format!("{rest}/api/v1/missions/{mission}"))
            .bearer_auth(token)
            .send()
            .await;
        let Ok(resp) = resp else {
            return (0, Value::Null);
        };
        let status = resp.status().as_u16();
        let body: Value = resp.json().await.unwrap_or(Value::Null);
        if status == 200 {
            let mut v = self.shared.lock();
            v.violations.extend(
                schema::check_mission_status(&body)
                    .into_iter()
                    .map(|e| format!("mission status: {e}")),
            );
        }
        (status, body)
    }
}

async fn sandbox_register(State(s): State<Arc<Shared>>, Json(body): Json<Value>) -> Response {
    s.lock().sandbox_registrations.push(body);
    s.changed.notify_waiters();
    (StatusCode::CREATED, Json(json!({"registered": true}))).into_response()
}

async fn executor_register(State(s): State<Arc<Shared>>, Json(body): Json<Value>) -> Response {
    let mut inner = s.lock();
    inner.registrations.push(body.clone());
    if let Some(code) = inner.refuse_registration {
        drop(inner);
        s.changed.notify_waiters();
        let status = StatusCode::from_u16(code).unwrap_or(StatusCode::NOT_FOUND);
        return (status, Json(json!({"error": "refused by the test"}))).into_response();
    }
    let problems = schema::check_register(&body);
    inner
        .violations
        .extend(problems.iter().map(|p| format!("registration: {p}")));
    let id = body["executor_id"].as_str().unwrap_or_default().to_owned();
    // Registering again reclaims the identity: the same token.
    let token = inner
        .tokens
        .entry(id.clone())
        .or_insert_with(|| format!("peer-token-{}", uuid::Uuid::new_v4()))
        .clone();
    drop(inner);
    s.changed.notify_waiters();
    if !problems.is_empty() {
        return (
            StatusCode::UNPROCESSABLE_ENTITY,
            Json(json!({"errors": problems})),
        )
            .into_response();
    }
    let now = humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string();
    (
        StatusCode::CREATED,
        Json(json!({"executor_id": id, "token": token, "registered_at": now})),
    )
        .into_response()
}

fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers
        .get("authorization")?
        .to_str()
        .ok()?
        .strip_prefix("Bearer ")
}

async fn executor_delete(
    State(s): State<Arc<Shared>>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> StatusCode {
    let mut inner = s.lock();
    if inner.tokens.get(&id).map(String::as_str) != bearer(&headers) {
        return StatusCode::UNAUTHORIZED;
    }
    inner.deregistrations.push(id);
    drop(inner);
    s.changed.notify_waiters();
    StatusCode::NO_CONTENT
}

async fn executor_ws(
    State(s): State<Arc<Shared>>,
    Path(id): Path<String>,
    Query(q): Query<HashMap<String, String>>,
    ws: WebSocketUpgrade,
) -> Response {
    let ok = s
        .lock()
        .tokens
        .get(&id)
        .is_some_and(|t| Some(t) == q.get("token"));
    if !ok {
        return (
            StatusCode::UNAUTHORIZED,
            Json(json!({"error": "token_invalid"})),
        )
            .into_response();
    }
    ws.on_upgrade(move |socket| serve_socket(s, id, socket))
}

async fn serve_socket(s: Arc<Shared>, executor_id: String, socket: WebSocket) {
    let (tx, mut rx) = mpsc::unbounded_channel::<Message>();
    let connection = {
        let mut inner = s.lock();
        inner.connections += 1;
        inner.open = Some(tx);
        inner.connections
    };
    let (mut sink, mut stream) = socket.split();
    let writer = tokio::spawn(async move {
        while let Some(m) = rx.recv().await {
            let close = matches!(m, Message::Close(_));
            if sink.send(m).await.is_err() || close {
                break;
            }
        }
    });
    let mut first = true;
    while let Some(Ok(msg)) = stream.next().await {
        let Message::Text(text) = msg else {
            if matches!(msg, Message::Close(_)) {
                break;
            }
            continue;
        };
        let mut inner = s.lock();
        let frame: Value = match serde_json::from_str(&text) {
            Ok(v) => v,
            Err(e) => {
                inner
                    .violations
                    .push(format!("connection {connection}: not JSON: {e}"));
                continue;
            }
        };
        let event = frame["event"].as_str().unwrap_or("?").to_owned();
        let tag = |p: String| format!("connection {connection}, {event}: {p}");
        inner
            .violations
            .extend(schema::check_envelope(&frame).into_iter().map(tag));
        let out_of_order = inner.order.observe(connection, &frame);
        inner.violations.extend(
            out_of_order
                .into_iter()
                .map(|v| format!("connection {connection}: {v}")),
        );
        if first && event != "executor.resync" {
            inner.violations.push(format!(
                "connection {connection}: first frame was {event}, not executor.resync"
            ));
        }
        if frame["executor_id"].as_str() != Some(executor_id.as_str()) {
            inner.violations.push(format!(
                "connection {connection}, {event}: executor_id is not the connection's {executor_id}"
            ));
        }
        first = false;
        if matches!(
            event.as_str(),
            "mission.completed" | "mission.failed" | "mission.aborted"
        ) && let Some(id) = frame["mission_id"].as_str()
        {
            inner
                .ended
                .insert(id.to_owned(), (event.clone(), Instant::now()));
        }
        inner.received.push(Received { connection, frame });
        drop(inner);
        s.changed.notify_waiters();
    }
    writer.abort();
    {
        let mut inner = s.lock();
        if inner.connections == connection {
            inner.open = None;
        }
    }
    s.changed.notify_waiters();
}
