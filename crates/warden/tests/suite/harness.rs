//! Starts the real binary on port 0 with a temp WARDEN_HOME and a cleared
//! environment, and talks HTTP to it. Waits have deadlines; nothing sleeps
//! a fixed time.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

pub const BIN: &str = env!("CARGO_BIN_EXE_warden");

/// A `warden` command with only PATH and HOME in its environment.
pub fn warden(dir: &Path) -> Command {
    let mut c = Command::new(BIN);
    c.env_clear()
        .env(
            "PATH",
            std::env::var_os("PATH").unwrap_or_else(|| "/usr/bin:/bin".into()),
        )
        .env("HOME", dir)
        .current_dir(dir);
    c
}

/// A running `warden serve`, killed when dropped.
pub struct Server {
    pub child: Child,
    pub base: String,
    pub client: reqwest::Client,
}

impl Server {
    /// Starts a server whose data lives in `dir/.warden`.
    pub fn start(dir: &Path) -> Self {
        Self::start_with(dir, &[])
    }

    pub fn start_with(dir: &Path, env: &[(&str, &str)]) -> Self {
        let log = std::fs::File::create(
            dir.join(format!("serve-{}.log", Instant::now().elapsed().as_nanos())),
        )
        .unwrap();
        let mut cmd = warden(dir);
        cmd.args(["serve", "--listen", "127.0.0.1:0"])
            .env("WARDEN_HOME", dir.join(".warden"))
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log);
        let mut child = cmd.spawn().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("server did not report its address in 30 s");
        let base = line
            .trim()
            .strip_prefix("warden listening on ")
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
            .to_owned();
        Self {
            child,
            base,
            client: reqwest::Client::new(),
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    pub async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        let r = self
            .client
            .post(self.url(path))
            .json(&body)
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    pub async fn get(&self, path: &str) -> (u16, Value) {
        let r = self.client.get(self.url(path)).send().await.unwrap();
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    /// An HTTP+JSON A2A request, with `A2A-Version` when given.
    pub async fn rest(
        &self,
        method: reqwest::Method,
        path: &str,
        version: Option<&str>,
        body: Option<Value>,
    ) -> (u16, Value) {
        let mut req = self.client.request(method, self.url(path));
        if let Some(v) = version {
            req = req.header("A2A-Version", v);
        }
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp = req.send().await.unwrap();
        let status = resp.status().as_u16();
        (status, resp.json().await.unwrap_or(Value::Null))
    }

    /// Starts a run and returns its JSON (asserting 201).
    pub async fn start_run(&self, body: Value) -> Value {
        let (status, run) = self.post("/api/v1/runs", body).await;
        assert_eq!(status, 201, "{run}");
        run
    }

    /// Polls the run until it has ended, for at most `limit`.
    pub async fn wait_ended(&self, id: &str, limit: Duration) -> Value {
        let deadline = Instant::now() + limit;
        loop {
            let (_, run) = self.get(&format!("/api/v1/runs/{id}")).await;
            if !matches!(run["state"].as_str(), Some("starting" | "running")) {
                return run;
            }
            assert!(
                Instant::now() < deadline,
                "run {id} still {} after {limit:?}",
                run["state"]
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[path = "../../../warden-exec/tests/suite/proc_alive.rs"]
mod proc_alive;

/// Whether a live process has this pid (see `proc_alive`).
pub fn alive(pid: i64) -> bool {
    i32::try_from(pid).is_ok_and(proc_alive::alive)
}

/// Waits until `pid` is gone (or a zombie), for at most `limit`.
pub async fn wait_gone(pid: i64, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    while alive(pid) {
        if Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    true
}

/// Writes `dir/.warden/warden.toml`, which [`Server::start`] then reads.
pub fn write_config(dir: &Path, toml: &str) {
    std::fs::create_dir_all(dir.join(".warden")).unwrap();
    std::fs::write(dir.join(".warden/warden.toml"), toml).unwrap();
}

/// Reads an SSE response one event at a time.
pub struct Sse {
    body: std::pin::Pin<
        Box<dyn futures_util::Stream<Item = reqwest::Result<axum::body::Bytes>> + Send>,
    >,
    /// Bytes: a character may be split across chunks.
    buf: Vec<u8>,
}

impl Sse {
    pub fn new(resp: reqwest::Response) -> Self {
        assert_eq!(resp.headers()["content-type"], "text/event-stream");
        Self {
            body: Box::pin(resp.bytes_stream()),
            buf: Vec::new(),
        }
    }

    /// The next event with an id and its JSON data; `None` when the stream
    /// closed. Panics if nothing comes within 20 s.
    pub async fn next(&mut self) -> Option<(u64, Value)> {
        use futures_util::StreamExt;
        let read = async {
            loop {
                while let Some(end) = self.buf.windows(2).position(|w| w == b"\n\n") {
                    let bytes: Vec<u8> = self.buf.drain(..end + 2).collect();
                    let block = String::from_utf8(bytes).unwrap();
                    let id = block.lines().find_map(|l| l.strip_prefix("id: "));
                    let data: String = block
                        .lines()
                        .filter_map(|l| l.strip_prefix("data: "))
                        .collect();
                    if let Some(id) = id {
                        return Some((id.parse().unwrap(), serde_json::from_str(&data).unwrap()));
                    }
                }
                let chunk = self.body.next().await?.unwrap();
                self.buf.extend_from_slice(&chunk);
            }
        };
        tokio::time::timeout(Duration::from_secs(20), read)
            .await
            .expect("no SSE event or close within 20 s")
    }
}
