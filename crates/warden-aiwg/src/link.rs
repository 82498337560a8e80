//! The link to `aiwg serve`: registration (both routes), the outbound
//! executor WebSocket with reconnects, and delivery of the mission event
//! log through it.
//!
//! Events are in the store before they are sent; the outbox cursor moves
//! only after a frame was written to the socket, so an outage loses none
//! and, after reconnecting, the rest go out in order. The bearer token is
//! kept in memory only and never printed (the WebSocket URL carries it, so
//! the URL is never logged either).

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde::Serialize;
use serde_json::json;
use tokio::sync::Notify;
use tokio_tungstenite::tungstenite::Message;
use tokio_util::sync::CancellationToken;
use warden_core::Timestamp;
use warden_store::Store;

use crate::wire::{
    Event, Inbound, RegisterPayload, RegisterResponse, SPEC_VERSION, TransportEndpoints,
};

/// What the link needs to know.
#[derive(Clone)]
pub struct LinkConfig {
    /// `AIWG_SERVE_ENDPOINT`, e.g. `http://127.0.0.1:7337`.
    pub endpoint: String,
    /// `AIWG_SERVE_NAME`.
    pub name: String,
    pub executor_id: String,
    /// Where `aiwg serve` reaches this executor.
    pub rest_url: String,
    pub ws_url: String,
    pub version: String,
    /// Read at each registration: only what is proven on this host then.
    pub capabilities: Capabilities,
}

/// The capabilities to claim, as of now.
pub type Capabilities = Arc<dyn Fn() -> Vec<String> + Send + Sync>;

/// What `GET /api/v1/aiwg/status` shows. Never a token.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct LinkStatus {
    pub configured: bool,
    pub endpoint: Option<String>,
    pub name: Option<String>,
    pub executor_id: Option<String>,
    /// Executor registration succeeded and a token is held.
    pub registered: bool,
    /// The executor WebSocket is open.
    pub connected: bool,
    pub executor_register_error: Option<String>,
    pub sandbox_register_error: Option<String>,
    /// Why the last WebSocket attempt or connection ended.
    pub ws_error: Option<String>,
    /// How many times the WebSocket was opened.
    pub connections: u64,
    /// What the last successful registration claimed.
    pub capabilities: Vec<String>,
}

/// The live link.
pub struct Link {
    config: LinkConfig,
    store: Store,
    status: Mutex<LinkStatus>,
    token: Mutex<Option<String>>,
    /// Skips the backoff wait.
    wake: Notify,
    /// New events are in the log.
    outbox: Notify,
    http: reqwest::Client,
    /// Where inbound events go (the mission service).
    inbound: std::sync::OnceLock<InboundHandler>,
    /// What each new connection sends after the resync and the backlog.
    connect: std::sync::OnceLock<ConnectHook>,
}

/// Runs on every new connection after the resync, before the backlog goes
/// out: it logs what the connection should carry (`mission.reconnected`,
/// `mission.resumed`), which then goes out with the backlog, in order.
pub type ConnectHook =
    Arc<dyn Fn() -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> + Send + Sync>;

/// Receives what the orchestrator sends.
pub type InboundHandler = Arc<dyn Fn(Inbound) + Send + Sync>;

const BACKOFF_MIN: Duration = Duration::from_secs(1);
const BACKOFF_MAX: Duration = Duration::from_secs(30);
/// A ping this often finds a dead connection the kernel has not noticed.
const PING_EVERY: Duration = Duration::from_secs(15);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Link {
    pub fn new(config: LinkConfig, store: Store) -> Arc<Self> {
        let status = LinkStatus {
            configured: true,
            endpoint: Some(config.endpoint.clone()),
            name: Some(config.name.clone()),
            executor_id: Some(config.executor_id.clone()),
            ..LinkStatus::default()
        };
        Arc::new(Self {
            config,
            store,
            status: Mutex::new(status),
            token: Mutex::new(None),
            wake: Notify::new(),
            outbox: Notify::new(),
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(15))
                .build()
                .unwrap_or_default(),
            inbound: std::sync::OnceLock::new(),
            connect: std::sync::OnceLock::new(),
        })
    }

    /// Sets what each new connection sends after the resync (once).
    pub fn on_connect(&self, hook: ConnectHook) {
        let _ = self.connect.set(hook);
    }

    /// Deregisters (`DELETE /api/v1/executors/{id}` with the token), as the
    /// contract asks on a clean shutdown. Errors are logged: the process is
    /// ending either way.
    pub async fn deregister(&self) {
        let Some(token) = lock(&self.token).clone() else {
            return;
        };
        let url = format!(
            "{}/api/v1/executors/{}",
            self.config.endpoint.trim_end_matches('/'),
            self.config.executor_id
        );
        match self.http.delete(url).bearer_auth(token).send().await {
            Ok(r) if r.status().is_success() => tracing::info!("deregistered from aiwg serve"),
            Ok(r) => tracing::warn!(status = %r.status(), "deregistration refused"),
            Err(e) => tracing::warn!(error = %self.redact(&e.to_string()), "deregistration failed"),
        }
    }

    /// Sets where inbound events go (once).
    pub fn on_inbound(&self, handler: InboundHandler) {
        let _ = self.inbound.set(handler);
    }

    pub fn status(&self) -> LinkStatus {
        lock(&self.status).clone()
    }

    pub fn executor_id(&self) -> &str {
        &self.config.executor_id
    }

    /// Skips the wait before the next registration or connection attempt.
    pub fn reconnect_now(&self) {
        self.wake.notify_one();
    }

    /// Tells the link that events were appended to the log.
    pub fn events_appended(&self) {
        self.outbox.notify_one();
    }

    /// Whether `presented` is the token `aiwg serve` issued: length first,
    /// then a constant-time comparison. `None` when none is held.
    pub fn token_matches(&self, presented: &str) -> Option<bool> {
        let held = lock(&self.token).clone()?;
        Some(
            held.len() == presented.len()
                && held
                    .bytes()
                    .zip(presented.bytes())
                    .fold(0u8, |acc, (a, b)| acc | (a ^ b))
                    == 0,
        )
    }

    fn set(&self, f: impl FnOnce(&mut LinkStatus)) {
        f(&mut lock(&self.status));
    }

    /// Replaces the token with `<redacted>` wherever it appears.
    fn redact(&self, text: &str) -> String {
        match lock(&self.token).as_deref() {
            Some(t) if !t.is_empty() => text.replace(t, "<redacted>"),
            _ => text.to_owned(),
        }
    }

    /// Runs the link until `shutdown`.
    pub async fn run(self: Arc<Self>, shutdown: CancellationToken) {
        let mut backoff = BACKOFF_MIN;
        loop {
            if lock(&self.token).is_none() && !self.register().await {
                if !self.pause(&mut backoff, &shutdown).await {
                    return;
                }
                continue;
            }
            match self.connect_and_serve(&shutdown).await {
                Served::Shutdown => return,
                Served::Reconnect => {
                    backoff = BACKOFF_MIN;
                    continue;
                }
                Served::Ended { was_open } => {
                    if was_open {
                        backoff = BACKOFF_MIN;
                    }
                }
                Served::TokenRefused => {
                    *lock(&self.token) = None;
                    self.set(|s| s.registered = false);
                }
            }
            if !self.pause(&mut backoff, &shutdown).await {
                return;
            }
        }
    }

    /// Waits the backoff (with jitter), or less when woken; `false` on
    /// shutdown. Doubles the backoff up to 30 s.
    async fn pause(&self, backoff: &mut Duration, shutdown: &CancellationToken) -> bool {
        // The last byte of a UUIDv7 is random.
        let jitter = 0.8 + 0.4 * f64::from(uuid::Uuid::now_v7().as_bytes()[15]) / 255.0;
        let wait = backoff.mul_f64(jitter);
        *backoff = (*backoff * 2).min(BACKOFF_MAX);
        tokio::select! {
            () = tokio::time::sleep(wait) => true,
            () = self.wake.notified() => true,
            () = shutdown.cancelled() => false,
        }
    }

    /// Registers on both routes (independently); `true` once the executor
    /// registration gave a token.
    async fn register(&self) -> bool {
        let base = self.config.endpoint.trim_end_matches('/');
        let payload = RegisterPayload {
            executor_id: self.config.executor_id.clone(),
            name: self.config.name.clone(),
            version: self.config.version.clone(),
            spec_version: SPEC_VERSION,
            transport_endpoints: TransportEndpoints {
                rest: self.config.rest_url.clone(),
                ws: self.config.ws_url.clone(),
            },
            capabilities: (self.config.capabilities)(),
        };
        let claimed = payload.capabilities.clone();
        let sandbox = json!({
            "instance_id": self.config.executor_id,
            "name": self.config.name,
            "endpoint": self.config.rest_url,
        });
        let (executor, sandbox) = tokio::join!(
            self.http
                .post(format!("{base}/api/v1/executors/register"))
                .json(&payload)
                .send(),
            self.http
                .post(format!("{base}/api/sandboxes/register"))
                .json(&sandbox)
                .send(),
        );
        let sandbox_error = match sandbox {
            Ok(r) if r.status().is_success() => None,
            Ok(r) => Some(format!(
                "POST /api/sandboxes/register answered {}",
                r.status()
            )),
            Err(e) => Some(format!("POST /api/sandboxes/register: {e}")),
        };
        let outcome = match executor {
            Ok(r) if r.status().is_success() => match r.json::<RegisterResponse>().await {
                Ok(answer) if answer.executor_id == self.config.executor_id => Ok(answer.token),
                Ok(answer) => Err(format!(
                    "registration answered for executor {} instead of {}",
                    answer.executor_id, self.config.executor_id
                )),
                Err(e) => Err(format!("registration answer unreadable: {e}")),
            },
            Ok(r) => Err(format!(
                "POST /api/v1/executors/register answered {}",
                r.status()
            )),
            Err(e) => Err(format!("POST /api/v1/executors/register: {e}")),
        };
        if let Some(e) = &sandbox_error {
            tracing::warn!(error = %e, "sandbox registration with aiwg serve failed");
        }
        match outcome {
            Ok(token) => {
                *lock(&self.token) = Some(token);
                self.set(|s| {
                    s.registered = true;
                    s.executor_register_error = None;
                    s.sandbox_register_error = sandbox_error;
                    s.capabilities = claimed;
                });
                tracing::info!(executor_id = %self.config.executor_id, "registered with aiwg serve");
                true
            }
            Err(e) => {
                tracing::warn!(error = %e, "executor registration with aiwg serve failed; retrying with backoff");
                self.set(|s| {
                    s.registered = false;
                    s.executor_register_error = Some(e);
                    s.sandbox_register_error = sandbox_error;
                });
                false
            }
        }
    }

    /// The WebSocket URL with the token; never logged.
    fn ws_url(&self, token: &str) -> String {
        let base = self.config.endpoint.trim_end_matches('/');
        let base = base
            .strip_prefix("https://")
            .map(|rest| format!("wss://{rest}"))
            .or_else(|| {
                base.strip_prefix("http://")
                    .map(|rest| format!("ws://{rest}"))
            })
            .unwrap_or_else(|| base.to_owned());
        format!(
            "{base}/ws/executors/{}?token={token}",
            self.config.executor_id
        )
    }

    async fn connect_and_serve(&self, shutdown: &CancellationToken) -> Served {
        let Some(token) = lock(&self.token).clone() else {
            return Served::TokenRefused;
        };
        // Small frames go out at once (no Nagle delay waiting for an ACK).
        let connect = tokio_tungstenite::connect_async_with_config(self.ws_url(&token), None, true);
        let (mut ws, _) = tokio::select! {
            r = connect => match r {
                Ok(ok) => ok,
                Err(tokio_tungstenite::tungstenite::Error::Http(resp))
                    if resp.status().as_u16() == 401 =>
                {
                    self.set(|s| s.ws_error = Some("the WebSocket refused the token (401); registering again".into()));
                    return Served::TokenRefused;
                }
                Err(e) => {
                    let why = self.redact(&e.to_string());
                    tracing::warn!(error = %why, "executor WebSocket connect failed");
                    self.set(|s| s.ws_error = Some(why));
                    return Served::Ended { was_open: false };
                }
            },
            () = shutdown.cancelled() => return Served::Shutdown,
        };
        self.set(|s| {
            s.connected = true;
            s.connections += 1;
            s.ws_error = None;
        });
        tracing::info!("executor WebSocket open");
        let ended = self.serve(&mut ws, shutdown).await;
        // The close handshake waits for the peer's answer: not forever.
        let _ = tokio::time::timeout(Duration::from_secs(2), ws.close(None)).await;
        self.set(|s| {
            s.connected = false;
            if let Err(why) = &ended {
                s.ws_error = Some(why.clone());
            }
        });
        match ended {
            Ok(()) if shutdown.is_cancelled() => Served::Shutdown,
            Ok(()) => Served::Reconnect,
            Err(why) => {
                tracing::warn!(error = %why, "executor WebSocket closed");
                Served::Ended { was_open: true }
            }
        }
    }

    /// One open connection: resync first, then the undelivered log, then
    /// whatever is appended, while reading what the orchestrator sends.
    async fn serve(&self, ws: &mut WsStream, shutdown: &CancellationToken) -> Result<(), String> {
        let owned: Vec<String> = self
            .store
            .active_missions()
            .await
            .map_err(|e| format!("reading missions: {e}"))?
            .into_iter()
            .map(|m| m.id.to_string())
            .collect();
        let resync = Event::Resync {
            owned_mission_ids: owned,
        }
        .envelope(&self.config.executor_id, None, Timestamp::now());
        self.store
            .append_executor_event(
                self.config.executor_id.clone(),
                "executor.resync".into(),
                resync.clone(),
            )
            .await
            .map_err(|e| format!("logging executor.resync: {e}"))?;
        send(ws, &resync).await?;
        if let Some(hook) = self.connect.get() {
            hook().await;
        }
        let mut acks = Acks::default();
        self.drain(ws, &mut acks).await?;
        let mut ping = tokio::time::interval(PING_EVERY);
        ping.tick().await;
        loop {
            tokio::select! {
                () = self.outbox.notified() => self.drain(ws, &mut acks).await?,
                // Asked to reconnect: close, then connect again at once.
                () = self.wake.notified() => return Ok(()),
                _ = ping.tick() => {
                    if acks.waiting_since.is_some_and(|t| t.elapsed() > PING_EVERY * 2) {
                        return Err(format!("no answer to a ping in {} s", (PING_EVERY * 2).as_secs()));
                    }
                    self.ping(ws, &mut acks).await?;
                }
                frame = ws.next() => match frame {
                    None => return Err("the orchestrator closed the connection".into()),
                    Some(Err(e)) => return Err(e.to_string()),
                    Some(Ok(Message::Close(_))) => return Err("the orchestrator closed the connection".into()),
                    Some(Ok(Message::Text(text))) => self.inbound(&text),
                    Some(Ok(Message::Pong(payload))) => self.acknowledged(&payload, &mut acks).await?,
                    Some(Ok(_)) => {}
                },
                () = shutdown.cancelled() => {
                    // What is already logged goes out before the close, and
                    // its acknowledgement is awaited (briefly).
                    self.drain(ws, &mut acks).await?;
                    let limit = tokio::time::Instant::now() + Duration::from_secs(2);
                    while acks.waiting_since.is_some() {
                        match tokio::time::timeout_at(limit, ws.next()).await {
                            Ok(Some(Ok(Message::Pong(p)))) => self.acknowledged(&p, &mut acks).await?,
                            Ok(Some(Ok(_))) => {}
                            _ => break,
                        }
                    }
                    return Ok(());
                }
            }
        }
    }

    /// Pings with the highest seq sent: the pong comes back after the peer
    /// read every frame before it, and only then is the cursor moved.
    async fn ping(&self, ws: &mut WsStream, acks: &mut Acks) -> Result<(), String> {
        ws.send(Message::Ping(acks.sent.to_be_bytes().to_vec().into()))
            .await
            .map_err(|e| e.to_string())?;
        acks.waiting_since
            .get_or_insert_with(std::time::Instant::now);
        Ok(())
    }

    async fn acknowledged(&self, payload: &[u8], acks: &mut Acks) -> Result<(), String> {
        let Ok(bytes) = <[u8; 8]>::try_from(payload) else {
            return Ok(());
        };
        let seq = u64::from_be_bytes(bytes);
        // Answered: nothing outstanding, or the peer keeps up with a stream
        // of frames (the newest ping is younger).
        acks.waiting_since = (seq < acks.sent).then(std::time::Instant::now);
        if seq > 0 {
            self.store
                .mission_events_delivered(seq)
                .await
                .map_err(|e| format!("moving the outbox cursor: {e}"))?;
        }
        Ok(())
    }

    /// Sends every undelivered event in order, then a ping carrying the
    /// last seq sent: the cursor moves when its pong returns, so frames lost
    /// with a connection are sent again on the next (delivery is at least
    /// once, and never lost).
    async fn drain(&self, ws: &mut WsStream, acks: &mut Acks) -> Result<(), String> {
        let mut sent_any = false;
        loop {
            let batch = self
                .store
                .undelivered_mission_events(acks.sent, 256)
                .await
                .map_err(|e| format!("reading the outbox: {e}"))?;
            let Some(last) = batch.last().map(|e| e.seq) else {
                break;
            };
            for e in &batch {
                ws.feed(Message::Text(e.envelope.to_string().into()))
                    .await
                    .map_err(|e| e.to_string())?;
            }
            ws.flush().await.map_err(|e| e.to_string())?;
            acks.sent = last;
            sent_any = true;
        }
        if sent_any {
            self.ping(ws, acks).await?;
        }
        Ok(())
    }

    fn inbound(&self, text: &str) {
        match Inbound::parse(text) {
            Ok(Inbound::Other { event }) => {
                tracing::debug!(%event, "inbound event ignored");
            }
            Ok(event) => match self.inbound.get() {
                Some(handler) => handler(event),
                None => tracing::warn!(?event, "inbound event with nobody to take it"),
            },
            Err(why) => tracing::warn!(%why, "unreadable frame from aiwg serve"),
        }
    }
}

type WsStream =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

async fn send(ws: &mut WsStream, v: &serde_json::Value) -> Result<(), String> {
    ws.send(Message::Text(v.to_string().into()))
        .await
        .map_err(|e| e.to_string())
}

/// What one connection sent and what came back.
#[derive(Default)]
struct Acks {
    /// The highest seq written to this connection.
    sent: u64,
    /// When the oldest unanswered ping went out.
    waiting_since: Option<std::time::Instant>,
}

enum Served {
    Shutdown,
    /// Closed on request; connect again without waiting.
    Reconnect,
    Ended {
        was_open: bool,
    },
    TokenRefused,
}
