//! The servers under test, each started here on loopback and stopped after.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{Context, bail};

/// Which server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum PeerKind {
    /// `warden serve` (release build beside this binary), echo runtime, store on disk.
    Warden,
    /// The official Rust SDK (`a2a-server-lf`), in-memory task store.
    RustSdk,
    /// The official Python SDK (`a2a-sdk`), in-memory task store, uvicorn.
    PythonSdk,
}

impl PeerKind {
    pub fn name(self) -> &'static str {
        match self {
            Self::Warden => "warden",
            Self::RustSdk => "rust-sdk",
            Self::PythonSdk => "python-sdk",
        }
    }

    /// Where its JSON-RPC endpoint is.
    pub fn rpc_path(self) -> &'static str {
        "/"
    }
}

/// A running server.
pub struct Peer {
    pub kind: PeerKind,
    pub addr: SocketAddr,
    child: Child,
    /// warden's data directory and workspace, removed when dropped.
    home: Option<tempfile::TempDir>,
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The instances warden serves for the benchmark.
const WARDEN_CONFIG: &str = r#"
[[a2a.instances]]
name = "default"
runtime = "echo"

[[a2a.instances]]
name = "proc"
runtime = "command"
argv = ["/bin/echo", "{text}"]
timeout_seconds = 30
"#;

impl Peer {
    pub fn start(kind: PeerKind) -> anyhow::Result<Self> {
        let mut home = None;
        let mut cmd = match kind {
            PeerKind::Warden => {
                let bin = std::env::current_exe()?.with_file_name("warden");
                if !bin.is_file() {
                    bail!(
                        "{} not found: cargo build --release -p warden -p warden-bench",
                        bin.display()
                    );
                }
                // The store goes where WARDEN_BENCH_DIR says (the disk under test).
                let dir = match std::env::var_os("WARDEN_BENCH_DIR") {
                    Some(d) => tempfile::tempdir_in(d)?,
                    None => tempfile::tempdir()?,
                };
                std::fs::write(dir.path().join("warden.toml"), WARDEN_CONFIG)?;
                let mut c = Command::new(bin);
                c.args(["serve", "--listen", "127.0.0.1:0"])
                    .env("WARDEN_HOME", dir.path())
                    .env("WARDEN_LOG", "warn")
                    .current_dir(dir.path());
                home = Some(dir);
                c
            }
            PeerKind::RustSdk => {
                let manifest = repo().join("benches/a2a-rust-sdk/Cargo.toml");
                eprintln!("building the Rust SDK peer (the first build takes minutes)…");
                let built = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
                    .args(["build", "--release", "--quiet", "--manifest-path"])
                    .arg(&manifest)
                    .status()
                    .context("cargo build of benches/a2a-rust-sdk")?;
                if !built.success() {
                    bail!("building {} failed", manifest.display());
                }
                let mut c = Command::new(
                    repo().join("benches/a2a-rust-sdk/target/release/a2a-rust-sdk-echo"),
                );
                c.args(["--listen", "127.0.0.1:0", "--artifact"]);
                c
            }
            PeerKind::PythonSdk => {
                let python = std::env::var_os("WARDEN_BENCH_PYTHON")
                    .map(PathBuf::from)
                    .unwrap_or_else(|| repo().join(".venv-bench/bin/python"));
                if !python.is_file() {
                    bail!(
                        "{} not found: run scripts/bench-a2a.sh (it creates .venv-bench with a2a-sdk[http-server]) or set WARDEN_BENCH_PYTHON",
                        python.display()
                    );
                }
                // The script binds the port it is given; find a free one.
                let port = std::net::TcpListener::bind("127.0.0.1:0")?
                    .local_addr()?
                    .port();
                let mut c = Command::new(python);
                c.arg(repo().join("benches/a2a_python_echo.py"))
                    .args(["--port", &port.to_string()]);
                c
            }
        };
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .with_context(|| format!("starting {}", kind.name()))?;
        let addr = read_address(&mut child, kind)?;
        Ok(Self {
            kind,
            addr,
            child,
            home,
        })
    }

    /// warden's workspace (its working directory).
    pub fn workspace(&self) -> Option<&Path> {
        self.home.as_ref().map(tempfile::TempDir::path)
    }

    /// CPU time the server (and its reaped children) used so far.
    pub fn cpu(&self) -> anyhow::Result<Duration> {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.child.id()))?;
        let fields: Vec<&str> = stat
            .rsplit_once(") ")
            .map(|(_, rest)| rest.split(' ').collect())
            .unwrap_or_default();
        // utime, stime, cutime, cstime: fields 14-17, in USER_HZ (100/s on Linux).
        let ticks: u64 = fields
            .get(11..15)
            .context("short /proc stat")?
            .iter()
            .map(|f| f.parse::<u64>().unwrap_or(0))
            .sum();
        Ok(Duration::from_millis(ticks * 10))
    }

    /// How many tasks warden's store holds (`ListTasks`' `totalSize`).
    pub fn total_tasks(&self) -> anyhow::Result<u64> {
        let body = r#"{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{"pageSize":1}}"#;
        let answer = super::load::post_once(self.addr, "/", body)?;
        let v: serde_json::Value = serde_json::from_str(&answer)?;
        v["result"]["totalSize"]
            .as_str()
            .and_then(|s| s.parse().ok())
            .or_else(|| v["result"]["totalSize"].as_u64())
            .with_context(|| format!("ListTasks answered {answer}"))
    }
}

/// SIGTERM (warden shuts down as in service), then waits: no server is left
/// running, whichever way the benchmark ends.
impl Drop for Peer {
    fn drop(&mut self) {
        if let Ok(pid) = i32::try_from(self.child.id()) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGTERM,
            );
        }
        let _ = self.child.wait();
    }
}

/// Waits (up to 60 s) for the server's `… listening on http://ADDR` line.
fn read_address(child: &mut Child, kind: PeerKind) -> anyhow::Result<SocketAddr> {
    let stdout = child.stdout.take().context("stdout")?;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut reader = BufReader::new(stdout);
        let mut line = String::new();
        while reader.read_line(&mut line).is_ok_and(|n| n > 0) {
            if let Some(addr) = line
                .trim()
                .rsplit_once("http://")
                .map(|(_, a)| a.to_owned())
            {
                let _ = tx.send(addr);
                break;
            }
            line.clear();
        }
        // Keep draining so the server never blocks on a full pipe.
        let mut sink = Vec::new();
        let _ = std::io::Read::read_to_end(&mut reader, &mut sink);
    });
    let addr = rx
        .recv_timeout(Duration::from_secs(60))
        .with_context(|| format!("{} did not report its address within 60 s", kind.name()))?;
    addr.trim_end_matches('/')
        .parse()
        .with_context(|| format!("{} reported {addr:?}", kind.name()))
}
