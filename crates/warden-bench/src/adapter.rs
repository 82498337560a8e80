//! `adapter`: an `adapter-command/v1` task end to end — `SendMessage` until
//! the task is `completed`, for a runner that exits at once — against the
//! same `node runner.mjs` run directly by a shell loop; then how long a
//! prompt takes from the runner printing it to the task being
//! `input-required` (`hitl-prompt/v1`).

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail};
use serde_json::{Value, json};

use crate::a2a::load::post_once;
use crate::a2a::peers::{Peer, PeerKind};
use crate::percentile;

const RUNNER: &str = ".aiwg/ops/adapters/sandbox-agent-runner/runner.mjs";
const URI: &str = "https://agentic-sandbox.aiwg.io/extensions/adapter-command/v1";
const HITL: &str = "https://agentic-sandbox.aiwg.io/extensions/hitl-prompt/v1";

/// Exits at once; with `ask`, prints a prompt carrying the wall-clock time
/// it was printed at (ms since the epoch) and waits for the answer.
const RUNNER_MJS: &str = r#"
import { readFileSync } from 'node:fs';
const req = JSON.parse(readFileSync(process.argv[process.argv.indexOf('--request') + 1], 'utf8'));
if (req.action === 'ask') {
  process.stdout.write(`at ${performance.timeOrigin + performance.now()} continue? [y/N] `);
  process.stdin.once('data', () => process.exit(0));
}
"#;

fn workspace(dir: &Path) -> anyhow::Result<()> {
    let runner = dir.join(RUNNER);
    std::fs::create_dir_all(runner.parent().context("runner dir")?)?;
    std::fs::write(&runner, RUNNER_MJS)?;
    std::fs::create_dir_all(dir.join(".aiwg/ops/runs"))?;
    std::fs::write(dir.join(".aiwg/ops/runs/now.json"), r#"{"action":"now"}"#)?;
    std::fs::write(dir.join(".aiwg/ops/runs/ask.json"), r#"{"action":"ask"}"#)?;
    Ok(())
}

fn send(request: &str, text_line: bool) -> String {
    let mut env = json!({
        "adapter": "sandbox-agent-runner",
        "mode": "plan",
        "command": ["node", RUNNER, "--request", request],
    });
    if text_line {
        env["input_mode"] = json!("text-line");
    }
    json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {
        "messageId": "b", "role": "ROLE_USER", "parts": [{"text": "bench"}],
        "metadata": {URI: env}}}})
    .to_string()
}

fn state(answer: &str) -> anyhow::Result<(Value, String)> {
    let v: Value = serde_json::from_str(answer).with_context(|| format!("answer {answer}"))?;
    let t = v["result"]["task"].clone();
    let s = t["status"]["state"].as_str().unwrap_or("").to_owned();
    Ok((t, s))
}

fn now_ms() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64() * 1e3)
        .unwrap_or(0.0)
}

/// `node runner.mjs` `n` times from a shell loop, in the environment
/// warden gives its children (PATH, HOME, LANG, TERM): variables such as
/// NODE_EXTRA_CA_CERTS would otherwise slow node down and flatter warden.
fn direct_loop(ws: &Path, n: usize, request: &str) -> anyhow::Result<()> {
    let script =
        format!("for i in $(seq {n}); do node {RUNNER} --request {request} || exit 1; done");
    let mut cmd = Command::new("sh");
    cmd.arg("-c").arg(&script).current_dir(ws).env_clear();
    for var in ["PATH", "HOME", "LANG", "TERM"] {
        if let Some(v) = std::env::var_os(var) {
            cmd.env(var, v);
        }
    }
    if !cmd.status()?.success() {
        bail!("node {RUNNER} failed when run directly");
    }
    Ok(())
}

pub fn run(runs: usize) -> anyhow::Result<()> {
    let warden = Peer::start(PeerKind::Warden)?;
    let ws = warden.workspace().context("warden workspace")?.to_owned();
    workspace(&ws)?;
    let request = ".aiwg/ops/runs/now.json";
    // Warm both paths (node's own caches, the page cache).
    for _ in 0..5 {
        post_once(warden.addr, "/", &send(request, false))?;
    }
    direct_loop(&ws, 5, request)?;

    // Interleave rounds so drift on a shared machine hits both sides alike.
    let rounds = 10;
    let per_round = runs.div_ceil(rounds);
    let (mut via_warden, mut direct) = (Vec::new(), Duration::ZERO);
    for _ in 0..rounds {
        for _ in 0..per_round {
            let start = Instant::now();
            let (_, s) = state(&post_once(warden.addr, "/", &send(request, false))?)?;
            via_warden.push(start.elapsed());
            if s != "TASK_STATE_COMPLETED" {
                bail!("the adapter task ended {s}");
            }
        }
        let start = Instant::now();
        direct_loop(&ws, per_round, request)?;
        direct += start.elapsed();
    }
    let n = (per_round * rounds) as f64;
    let mean_warden = via_warden.iter().sum::<Duration>().as_secs_f64() / n;
    let mean_direct = direct.as_secs_f64() / n;
    via_warden.sort_unstable();
    let ratio = mean_warden / mean_direct;
    println!(
        "adapter: {} tasks of a runner that exits at once, interleaved in {rounds} rounds with the same runner run by a shell loop",
        per_round * rounds
    );
    println!(
        "  SendMessage → completed   {:>7.2} ms mean (p50 {:.2}, p99 {:.2})",
        mean_warden * 1e3,
        percentile(&via_warden, 50.0).as_secs_f64() * 1e3,
        percentile(&via_warden, 99.0).as_secs_f64() * 1e3
    );
    println!(
        "  node runner.mjs directly  {:>7.2} ms mean",
        mean_direct * 1e3
    );
    println!(
        "  ratio {ratio:.2}× (target ≤ 1.20×: {})",
        if ratio <= 1.2 { "met" } else { "MISSED" }
    );

    // Prompt latency: printed (runner's clock) → input-required answered.
    let mut latencies = Vec::new();
    let prompts = runs;
    for _ in 0..prompts {
        let body = send(".aiwg/ops/runs/ask.json", true);
        let answer =
            crate::a2a::load::post_once_with(warden.addr, "/", &body, &[("a2a-extensions", HITL)])?;
        let seen = now_ms();
        let (task, s) = state(&answer)?;
        if s != "TASK_STATE_INPUT_REQUIRED" {
            bail!("expected input-required, got {s}: {answer}");
        }
        let env = &task["status"]["message"]["metadata"][HITL];
        let printed: f64 = env["prompt"]
            .as_str()
            .and_then(|p| p.split_whitespace().nth(1))
            .and_then(|t| t.parse().ok())
            .context("prompt without its time")?;
        latencies.push(Duration::from_secs_f64(((seen - printed) / 1e3).max(0.0)));
        let reply = json!({"jsonrpc": "2.0", "id": 2, "method": "SendMessage", "params": {"message": {
            "messageId": "r", "role": "ROLE_USER", "taskId": task["id"], "parts": [{"text": "y"}],
            "metadata": {HITL: {"prompt_id": env["prompt_id"], "text": "y"}}}}});
        let (_, s) = state(&post_once(warden.addr, "/", &reply.to_string())?)?;
        if s != "TASK_STATE_COMPLETED" {
            bail!("the answered task ended {s}");
        }
    }
    latencies.sort_unstable();
    let p50 = percentile(&latencies, 50.0);
    let p99 = percentile(&latencies, 99.0);
    println!(
        "  prompt printed → input-required seen by the client, {prompts} prompts: p50 {:.2} ms, p99 {:.2} ms (target < 10 ms: {})",
        p50.as_secs_f64() * 1e3,
        p99.as_secs_f64() * 1e3,
        if p99 < Duration::from_millis(10) {
            "met"
        } else {
            "MISSED"
        }
    );
    Ok(())
}
