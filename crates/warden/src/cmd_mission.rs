//! `warden mission …`: the AIWG missions of a running server, through its
//! HTTP API (only the server watches the missions' shims, so an abort must
//! go through it). Human-readable output, or `--json`.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use serde_json::Value;

#[derive(Debug, Args)]
pub struct MissionArgs {
    /// The server's base URL.
    #[arg(
        long,
        env = "WARDEN_URL",
        default_value = "http://127.0.0.1:8122",
        global = true
    )]
    pub url: String,
    /// Operator token, when the server requires one.
    #[arg(
        long,
        env = "WARDEN_OPERATOR_TOKEN",
        hide_env_values = true,
        global = true
    )]
    pub token: Option<String>,
    /// Print JSON for scripts.
    #[arg(long, global = true)]
    pub json: bool,
    #[command(subcommand)]
    pub command: MissionCommand,
}

#[derive(Debug, Subcommand)]
pub enum MissionCommand {
    /// The newest missions, newest first.
    List {
        /// Only missions that have not ended.
        #[arg(long)]
        active: bool,
        /// At most this many (1-1000).
        #[arg(long, default_value_t = 50)]
        limit: u32,
    },
    /// One mission: state, times, exit code or error, recent events.
    Show { mission_id: String },
    /// Kill a mission's run: its processes are stopped and it ends `aborted`.
    Abort {
        mission_id: String,
        /// Return at once instead of waiting until its processes are gone.
        #[arg(long)]
        no_wait: bool,
        /// Seconds to wait for the end [default: 30].
        #[arg(long, value_name = "S", default_value_t = 30.0)]
        timeout: f64,
    },
}

/// Exit codes of `warden mission`.
pub const EXIT_CODES: &str = "\
Exit codes:
  0  done (abort: the mission ended aborted, or had already ended)
  1  the server refused the request or could not be reached (see the message)
  2  abort: the mission did not end within --timeout";

struct Client {
    http: reqwest::Client,
    url: String,
    token: Option<String>,
}

impl Client {
    async fn call(&self, method: reqwest::Method, path: &str) -> anyhow::Result<(u16, Value)> {
        let mut req = self
            .http
            .request(method, format!("{}{path}", self.url.trim_end_matches('/')));
        if let Some(t) = &self.token {
            req = req.bearer_auth(t);
        }
        let resp = req.send().await.with_context(|| {
            format!(
                "cannot reach warden at {} (is `warden serve` running? set --url or WARDEN_URL)",
                self.url
            )
        })?;
        let code = resp.status().as_u16();
        let body = resp.json().await.unwrap_or(Value::Null);
        Ok((code, body))
    }

    /// The body of a 2xx answer; otherwise the server's own message.
    async fn ok(&self, method: reqwest::Method, path: &str) -> anyhow::Result<(u16, Value)> {
        let (code, body) = self.call(method, path).await?;
        if (200..300).contains(&code) {
            return Ok((code, body));
        }
        let why = body["error"]["message"]
            .as_str()
            .map_or_else(|| body.to_string(), str::to_owned);
        bail!("warden answered {code}: {why}")
    }
}

pub async fn main(args: MissionArgs) -> anyhow::Result<ExitCode> {
    let client = Client {
        http: reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .build()
            .context("building the HTTP client")?,
        url: args.url.clone(),
        token: args.token.clone(),
    };
    match args.command {
        MissionCommand::List { active, limit } => {
            let (_, body) = client
                .ok(
                    reqwest::Method::GET,
                    &format!("/api/v1/missions?active={active}&limit={limit}"),
                )
                .await?;
            if args.json {
                println!("{body}");
            } else {
                print_list(&body);
            }
        }
        MissionCommand::Show { mission_id } => {
            let (_, body) = client
                .ok(reqwest::Method::GET, &mission_path(&mission_id))
                .await?;
            if args.json {
                println!("{body}");
            } else {
                print_status(&body);
            }
        }
        MissionCommand::Abort {
            mission_id,
            no_wait,
            timeout,
        } => return abort(&client, &mission_id, no_wait, timeout, args.json).await,
    }
    Ok(ExitCode::SUCCESS)
}

/// The mission's route; its id percent-encoded (ids are the
/// orchestrator's and may hold any character).
fn mission_path(id: &str) -> String {
    let mut path = "/api/v1/missions/".to_owned();
    for b in id.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            path.push(char::from(b));
        } else {
            path.push_str(&format!("%{b:02X}"));
        }
    }
    path
}

async fn abort(
    client: &Client,
    id: &str,
    no_wait: bool,
    timeout: f64,
    json: bool,
) -> anyhow::Result<ExitCode> {
    if !(timeout.is_finite() && timeout > 0.0) {
        bail!("--timeout must be a positive number of seconds");
    }
    let path = mission_path(id);
    let (code, body) = client.ok(reqwest::Method::DELETE, &path).await?;
    if code == 200 || no_wait {
        // Already over (200), or the caller does not wait.
        if json {
            println!("{body}");
        } else if code == 200 {
            println!("mission {id} had already ended: {}", body["state"]);
        } else {
            println!("mission {id}: stopping its processes");
        }
        return Ok(ExitCode::SUCCESS);
    }
    if !json {
        eprintln!("mission {id}: stopping its processes…");
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs_f64(timeout);
    loop {
        let (_, st) = client.ok(reqwest::Method::GET, &path).await?;
        let state = st["state"].as_str().unwrap_or_default();
        if matches!(state, "aborted" | "done" | "failed") {
            if json {
                println!("{st}");
            } else {
                println!("mission {id}: {state}");
            }
            return Ok(ExitCode::SUCCESS);
        }
        if tokio::time::Instant::now() >= deadline {
            eprintln!(
                "mission {id} is still {state} after {timeout} s; its processes may be ignoring SIGTERM until the grace period ends"
            );
            return Ok(ExitCode::from(2));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn print_list(body: &Value) {
    let missions = body["missions"].as_array().cloned().unwrap_or_default();
    if missions.is_empty() {
        println!("no missions");
        return;
    }
    println!(
        "{:<28} {:<14} {:<24} OBJECTIVE",
        "MISSION", "STATE", "CREATED"
    );
    for m in missions {
        let objective: String = m["objective"]
            .as_str()
            .unwrap_or_default()
            .chars()
            .take(60)
            .collect();
        println!(
            "{:<28} {:<14} {:<24} {}",
            m["mission_id"].as_str().unwrap_or_default(),
            m["state"].as_str().unwrap_or_default(),
            m["created_at"].as_str().unwrap_or_default(),
            objective.replace('\n', " ")
        );
    }
}

fn print_status(st: &Value) {
    println!(
        "mission    {}",
        st["mission_id"].as_str().unwrap_or_default()
    );
    println!("state      {}", st["state"].as_str().unwrap_or_default());
    println!(
        "created    {}",
        st["created_at"].as_str().unwrap_or_default()
    );
    println!(
        "updated    {}",
        st["updated_at"].as_str().unwrap_or_default()
    );
    if let Some(t) = st["completed_at"].as_str() {
        println!("completed  {t}");
    }
    if let Some(c) = st["exit_code"].as_i64() {
        println!("exit code  {c}");
    }
    if let Some(e) = st["error"].as_str() {
        println!("error      {e}");
    }
    println!("events:");
    for e in st["recent_events"].as_array().into_iter().flatten() {
        println!(
            "  {}  {:<24} {}",
            e["ts"].as_str().unwrap_or_default(),
            e["event"].as_str().unwrap_or_default(),
            e["data"]
        );
    }
}
