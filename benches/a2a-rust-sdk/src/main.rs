//! Benchmark target: the official A2A Rust SDK server (`a2a-server-lf`, imported as
//! `a2a_server`) with its `DefaultRequestHandler` + `InMemoryTaskStore` and an echo
//! `AgentExecutor` modelled on the SDK's own `examples/src/lib.rs` EchoExecutor.
//!
//! Usage: a2a-rust-sdk-echo --listen 127.0.0.1:PORT [--workers N] [--artifact]
//!
//! Routes (one HTTP/1.1 + h2c listener, axum 0.8):
//!   POST /                 JSON-RPC 2.0 binding (SendMessage, SendStreamingMessage, GetTask, ...)
//!   POST /jsonrpc          same JSON-RPC router (the path the SDK example uses)
//!   POST /rest/message:send, /rest/message:stream, GET /rest/tasks/{id}, ...  HTTP+JSON binding
//!   GET  /.well-known/agent-card.json
//! JSON-RPC requires the header `A2A-Version: 1.0` (absent header = 0.3 = rejected).

use std::net::SocketAddr;
use std::sync::Arc;

use a2a::*;
use a2a_server::{
    AgentExecutor, DefaultRequestHandler, ExecutorContext, InMemoryTaskStore, StaticAgentCard,
};
use futures::stream::{self, BoxStream};

/// Echo executor. Same event sequence as the SDK example's EchoExecutor:
/// `statusUpdate(WORKING)` then a `task` with state COMPLETED whose `status.message`
/// (role AGENT) carries one text part `"Echo: <user text parts joined by ', '>"`.
/// With `--artifact`: `statusUpdate(WORKING)`, an `artifactUpdate` (lastChunk) carrying the
/// same text, then a terminal `statusUpdate(COMPLETED, message)`; the handler folds these
/// into the stored task, so SendMessage returns a task with history + artifacts.
struct EchoExecutor {
    with_artifact: bool,
}

impl AgentExecutor for EchoExecutor {
    fn execute(&self, ctx: ExecutorContext) -> BoxStream<'static, Result<StreamResponse, A2AError>> {
        let task_id = ctx.task_id.clone();
        let context_id = ctx.context_id.clone();

        let text = match &ctx.message {
            Some(msg) => {
                let parts: Vec<String> = msg
                    .parts
                    .iter()
                    .map(|p| match &p.content {
                        PartContent::Text(t) => t.clone(),
                        _ => "[non-text]".to_string(),
                    })
                    .collect();
                format!("Echo: {}", parts.join(", "))
            }
            None => "Echo: (no message)".to_string(),
        };

        let mut events: Vec<Result<StreamResponse, A2AError>> = Vec::with_capacity(3);
        events.push(Ok(StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
            task_id: task_id.clone(),
            context_id: context_id.clone(),
            status: TaskStatus {
                state: TaskState::Working,
                message: None,
                timestamp: Some(chrono::Utc::now()),
            },
            metadata: None,
        })));

        if self.with_artifact {
            events.push(Ok(StreamResponse::ArtifactUpdate(TaskArtifactUpdateEvent {
                task_id: task_id.clone(),
                context_id: context_id.clone(),
                artifact: Artifact {
                    artifact_id: new_artifact_id(),
                    name: Some("echo".to_string()),
                    description: None,
                    parts: vec![Part::text(text.clone())],
                    metadata: None,
                    extensions: None,
                },
                append: None,
                last_chunk: Some(true),
                metadata: None,
            })));
        }

        let reply = Message {
            role: Role::Agent,
            message_id: new_message_id(),
            task_id: Some(task_id.clone()),
            context_id: Some(context_id.clone()),
            parts: vec![Part::text(text)],
            metadata: None,
            extensions: None,
            reference_task_ids: None,
        };
        let completed = TaskStatus {
            state: TaskState::Completed,
            message: Some(reply),
            timestamp: Some(chrono::Utc::now()),
        };
        if self.with_artifact {
            // Terminal statusUpdate: the handler merges it into the stored task, so the
            // blocking response is the stored task with history + artifacts + status.
            events.push(Ok(StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
                task_id,
                context_id,
                status: completed,
                metadata: None,
            })));
        } else {
            // SDK example shape: a full Task snapshot (replaces the stored task; it has no
            // history/artifacts, and that is exactly what SendMessage returns).
            events.push(Ok(StreamResponse::Task(Task {
                id: task_id,
                context_id,
                status: completed,
                artifacts: None,
                history: None,
                metadata: None,
            })));
        }

        Box::pin(stream::iter(events))
    }

    fn cancel(&self, ctx: ExecutorContext) -> BoxStream<'static, Result<StreamResponse, A2AError>> {
        let (task_id, context_id) = ctx.task_info();
        Box::pin(stream::once(async move {
            Ok(StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
                task_id,
                context_id,
                status: TaskStatus {
                    state: TaskState::Canceled,
                    message: None,
                    timestamp: Some(chrono::Utc::now()),
                },
                metadata: None,
            }))
        }))
    }
}

fn agent_card(base: &str) -> AgentCard {
    AgentCard {
        name: "Echo Agent (a2a-rs benchmark)".to_string(),
        description: "Echoes back the user's message.".to_string(),
        version: a2a::VERSION.to_string(),
        provider: None,
        capabilities: AgentCapabilities {
            streaming: Some(true),
            push_notifications: Some(false),
            extensions: None,
            extended_agent_card: None,
        },
        skills: vec![AgentSkill {
            id: "echo".to_string(),
            name: "Echo".to_string(),
            description: "Echoes back the user's message.".to_string(),
            tags: vec!["echo".to_string()],
            examples: None,
            input_modes: None,
            output_modes: None,
            security_requirements: None,
        }],
        default_input_modes: vec!["text/plain".to_string()],
        default_output_modes: vec!["text/plain".to_string()],
        supported_interfaces: vec![
            AgentInterface::new(format!("{base}/"), TRANSPORT_PROTOCOL_JSONRPC),
            AgentInterface::new(format!("{base}/rest"), TRANSPORT_PROTOCOL_HTTP_JSON),
        ],
        security_schemes: None,
        security_requirements: None,
        documentation_url: None,
        icon_url: None,
        signatures: None,
    }
}

struct Args {
    listen: SocketAddr,
    workers: Option<usize>,
    with_artifact: bool,
}

fn usage() -> ! {
    eprintln!("usage: a2a-rust-sdk-echo --listen 127.0.0.1:PORT [--workers N] [--artifact]");
    std::process::exit(2);
}

fn parse_args() -> Args {
    let mut listen: Option<SocketAddr> = None;
    let mut workers = None;
    let mut with_artifact = false;
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let (key, inline) = match a.split_once('=') {
            Some((k, v)) => (k.to_string(), Some(v.to_string())),
            None => (a.clone(), None),
        };
        let mut value = || inline.clone().or_else(|| it.next()).unwrap_or_else(|| usage());
        match key.as_str() {
            "--listen" => listen = Some(value().parse().unwrap_or_else(|_| usage())),
            "--workers" => workers = Some(value().parse().unwrap_or_else(|_| usage())),
            "--artifact" => with_artifact = true,
            "-h" | "--help" => usage(),
            _ => usage(),
        }
    }
    Args {
        listen: listen.unwrap_or_else(|| usage()),
        workers,
        with_artifact,
    }
}

fn main() {
    let args = parse_args();
    let mut rt = tokio::runtime::Builder::new_multi_thread();
    rt.enable_all();
    if let Some(n) = args.workers {
        rt.worker_threads(n);
    }
    rt.build().expect("tokio runtime").block_on(serve(args));
}

async fn serve(args: Args) {
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .unwrap_or_else(|e| {
            eprintln!("bind {}: {e}", args.listen);
            std::process::exit(1);
        });
    let addr = listener.local_addr().expect("local_addr");
    let base = format!("http://{addr}");

    let handler = Arc::new(DefaultRequestHandler::new(
        EchoExecutor {
            with_artifact: args.with_artifact,
        },
        InMemoryTaskStore::new(),
    ));
    let card = Arc::new(StaticAgentCard::new(agent_card(&base)));

    let app = axum::Router::new()
        .merge(a2a_server::jsonrpc::jsonrpc_router(handler.clone()))
        .nest("/jsonrpc", a2a_server::jsonrpc::jsonrpc_router(handler.clone()))
        .nest("/rest", a2a_server::rest::rest_router(handler))
        .merge(a2a_server::agent_card::agent_card_router(card));

    // As warden does: small writes (SSE events) leave at once rather than
    // waiting for the client's delayed ACK, so streams compare servers, not Nagle.
    let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
        let _ = tcp.set_nodelay(true);
    });
    println!("listening on {base}");
    if let Err(e) = axum::serve(listener, app).await {
        eprintln!("server error: {e}");
        std::process::exit(1);
    }
}
