//! The load generator: N keep-alive HTTP/1.1 connections, each sending one
//! request after another for a fixed time, on one thread of its own so the
//! server under test keeps the other core. Every answer is checked.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;

/// One kind of request and how to tell a good answer.
#[derive(Debug, Clone)]
pub struct Workload {
    /// Path on the server, e.g. `/` or `/agents/proc/`.
    pub path: String,
    /// The JSON-RPC body; `{n}` is replaced by a request counter.
    pub body: String,
    /// A good answer contains this.
    pub expect: &'static str,
}

/// What a load run measured.
#[derive(Debug, Clone)]
pub struct Measured {
    pub requests: u64,
    pub failures: u64,
    pub elapsed: Duration,
    /// Sorted latencies.
    pub latencies: Vec<Duration>,
    /// The first failed answer, for the report.
    pub first_failure: Option<String>,
}

impl Measured {
    pub fn rate(&self) -> f64 {
        self.requests as f64 / self.elapsed.as_secs_f64()
    }
}

/// Sends `work` over `connections` connections to `addr` for `duration`.
pub fn run(
    addr: SocketAddr,
    work: &Workload,
    connections: usize,
    duration: Duration,
) -> anyhow::Result<Measured> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("load generator runtime")?;
    rt.block_on(async {
        let deadline = Instant::now() + duration;
        let start = Instant::now();
        let mut tasks = Vec::with_capacity(connections);
        for c in 0..connections {
            let work = work.clone();
            tasks.push(tokio::spawn(async move {
                connection(addr, &work, c, deadline).await
            }));
        }
        let mut total = Measured {
            requests: 0,
            failures: 0,
            elapsed: Duration::ZERO,
            latencies: Vec::new(),
            first_failure: None,
        };
        for t in tasks {
            let m = t.await.context("load task")??;
            total.requests += m.requests;
            total.failures += m.failures;
            total.latencies.extend(m.latencies);
            total.first_failure = total.first_failure.or(m.first_failure);
        }
        total.elapsed = start.elapsed();
        total.latencies.sort_unstable();
        Ok(total)
    })
}

async fn connection(
    addr: SocketAddr,
    work: &Workload,
    index: usize,
    deadline: Instant,
) -> anyhow::Result<Measured> {
    let stream = tokio::net::TcpStream::connect(addr)
        .await
        .with_context(|| format!("connect {addr}"))?;
    stream.set_nodelay(true)?;
    let (mut sender, conn) = http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(conn);
    let mut m = Measured {
        requests: 0,
        failures: 0,
        elapsed: Duration::ZERO,
        latencies: Vec::with_capacity(100_000),
        first_failure: None,
    };
    let mut n = 0u64;
    while Instant::now() < deadline {
        n += 1;
        let body = work.body.replace("{n}", &format!("{index}-{n}"));
        let req = Request::post(work.path.as_str())
            .header("host", addr.to_string())
            .header("content-type", "application/json")
            .header("a2a-version", "1.0")
            .body(Full::new(Bytes::from(body)))?;
        let sent = Instant::now();
        sender
            .ready()
            .await
            .context("connection closed by the server")?;
        let resp = sender.send_request(req).await?;
        let status = resp.status();
        let bytes = resp.into_body().collect().await?.to_bytes();
        m.latencies.push(sent.elapsed());
        m.requests += 1;
        let ok = status.is_success()
            && std::str::from_utf8(&bytes).is_ok_and(|s| s.contains(work.expect));
        if !ok {
            m.failures += 1;
            if m.first_failure.is_none() {
                m.first_failure = Some(format!(
                    "{status}: {}",
                    String::from_utf8_lossy(&bytes[..bytes.len().min(300)])
                ));
            }
        }
    }
    if m.requests == 0 {
        bail!("connection {index} sent nothing before the deadline");
    }
    Ok(m)
}

/// One POST, answered in full (for setup and checks, not measured).
pub fn post_once(addr: SocketAddr, path: &str, body: &str) -> anyhow::Result<String> {
    post_once_with(addr, path, body, &[])
}

/// [`post_once`] with extra headers.
pub fn post_once_with(
    addr: SocketAddr,
    path: &str,
    body: &str,
    headers: &[(&str, &str)],
) -> anyhow::Result<String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("runtime")?;
    rt.block_on(async {
        let stream = tokio::net::TcpStream::connect(addr).await?;
        let (mut sender, conn) = http1::handshake(TokioIo::new(stream)).await?;
        tokio::spawn(conn);
        let mut req = Request::post(path)
            .header("host", addr.to_string())
            .header("content-type", "application/json")
            .header("a2a-version", "1.0");
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let req = req.body(Full::new(Bytes::from(body.to_owned())))?;
        let resp = sender.send_request(req).await?;
        let bytes = resp.into_body().collect().await?.to_bytes();
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    })
}
