//! A2A instances whose runtime is a command: configured in warden.toml,
//! run through the supervisor, streamed while they run, cancelled for real.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};

use super::harness::*;

const TOKEN: &str = "a2a-test-token-0123456789";

/// A server hosting `instances` (TOML `[[a2a.instances]]` blocks).
fn serve(dir: &Path, instances: &str) -> Server {
    write_config(dir, &format!("[runs]\ngrace_seconds = 0.5\n\n{instances}"));
    Server::start(dir)
}

fn instance(name: &str, argv: &[&str]) -> String {
    format!(
        "[[a2a.instances]]\nname = \"{name}\"\nruntime = \"command\"\nargv = {}\n",
        serde_json::to_string(argv).unwrap()
    )
}

fn send(id: i64, method: &str, text: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": {"message": {
        "messageId": format!("m{id}"), "role": "ROLE_USER", "parts": [{"text": text}]
    }}})
}

async fn call(server: &Server, path: &str, body: Value) -> Value {
    let resp = server
        .client
        .post(server.url(path))
        .header("A2A-Version", "1.0")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    resp.json().await.unwrap()
}

async fn open_stream(server: &Server, path: &str, body: Value) -> Sse {
    let resp = server
        .client
        .post(server.url(path))
        .header("A2A-Version", "1.0")
        .json(&body)
        .send()
        .await
        .unwrap();
    Sse::new(resp)
}

/// `kind:detail` of a 1.0 stream event, for comparing sequences.
fn shape(event: &Value) -> String {
    let r = &event["result"];
    if let Some(t) = r.get("task") {
        return format!("task:{}", t["status"]["state"].as_str().unwrap());
    }
    if let Some(s) = r.get("statusUpdate") {
        return format!("status:{}", s["status"]["state"].as_str().unwrap());
    }
    let a = &r["artifactUpdate"];
    format!(
        "artifact:{}:{}:{}:{}",
        a["artifact"]["name"].as_str().unwrap(),
        a["artifact"]["parts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["text"].as_str().unwrap())
            .collect::<String>(),
        a["append"].as_bool().unwrap_or(false),
        a["lastChunk"].as_bool().unwrap_or(false),
    )
}

fn mkfifo(path: &Path) {
    assert!(Command::new("mkfifo").arg(path).status().unwrap().success());
}

/// Polls for `path` to hold a complete line, for at most 20 s.
async fn read_when_written(path: &Path) -> String {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(s) = std::fs::read_to_string(path)
            && s.ends_with('\n')
        {
            return s;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{path:?} never written"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn core_streaming_command_output_arrives_while_it_runs_to_every_subscriber() {
    let dir = tempfile::tempdir().unwrap();
    let gate = dir.path().join("gate");
    mkfifo(&gate);
    // Prints the user's text, waits for the test to open the gate, prints more.
    let server = serve(
        dir.path(),
        &instance(
            "agent",
            &[
                "sh",
                "-c",
                "printf '%s\\n' \"$1\"; read go < gate; echo \"after $go\"; echo oops >&2",
                "sh",
                "{text}",
            ],
        ),
    );
    let mut first = open_stream(
        &server,
        "/agents/agent/",
        send(1, "SendStreamingMessage", "it's $HOME; no shell"),
    )
    .await;
    let mut seen = vec![];
    while seen.len() < 3 {
        seen.push(first.next().await.unwrap());
    }
    let shapes: Vec<String> = seen.iter().map(|(_, e)| shape(e)).collect();
    assert_eq!(
        shapes,
        [
            "task:TASK_STATE_SUBMITTED",
            "status:TASK_STATE_WORKING",
            "artifact:stdout:it's $HOME; no shell\n:false:false",
        ]
    );
    let task = seen[0].1["result"]["task"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        seen[2].1["result"]["artifactUpdate"]["artifact"]["artifactId"],
        format!("{task}-stdout")
    );
    // Two more subscribers join while the process waits at the gate: one
    // from now, one resuming after the first event.
    let sub =
        json!({"jsonrpc": "2.0", "id": 2, "method": "SubscribeToTask", "params": {"id": task}});
    let mut second = open_stream(&server, "/agents/agent/", sub.clone()).await;
    let (_, head) = second.next().await.unwrap();
    assert_eq!(shape(&head), "task:TASK_STATE_WORKING");
    let resp = server
        .client
        .post(server.url("/agents/agent/"))
        .header("A2A-Version", "1.0")
        .header("Last-Event-ID", seen[0].0.to_string())
        .json(&sub)
        .send()
        .await
        .unwrap();
    let mut third = Sse::new(resp);

    std::fs::write(&gate, "go\n").unwrap();
    let mut rest = vec![];
    while let Some(e) = first.next().await {
        rest.push(e);
    }
    let mut tail: Vec<String> = rest.iter().map(|(_, e)| shape(e)).collect();
    // Two pipes: which of the two lines is read first is not fixed.
    tail[..2].sort();
    assert_eq!(
        tail,
        [
            "artifact:stderr:oops\n:false:false",
            "artifact:stdout:after go\n:true:false",
            "artifact:stdout::true:true",
            "artifact:stderr::true:true",
            "status:TASK_STATE_COMPLETED",
        ]
    );
    let mut second_rest = vec![];
    while let Some(e) = second.next().await {
        second_rest.push(e);
    }
    let results = |events: &[(u64, Value)]| -> Vec<(u64, Value)> {
        events
            .iter()
            .map(|(id, e)| (*id, e["result"].clone()))
            .collect()
    };
    assert_eq!(
        results(&second_rest),
        results(&rest),
        "a live subscriber gets the same events"
    );
    let mut third_all = vec![];
    while let Some(e) = third.next().await {
        third_all.push(e);
    }
    let third_ids: Vec<u64> = third_all.iter().map(|(id, _)| *id).collect();
    let want: Vec<u64> = seen[1..].iter().chain(&rest).map(|(id, _)| *id).collect();
    assert_eq!(third_ids, want, "a resuming subscriber gets what it missed");

    let done = call(
        &server,
        "/agents/agent/",
        json!({"jsonrpc": "2.0", "id": 3, "method": "GetTask", "params": {"id": task}}),
    )
    .await;
    let t = &done["result"];
    assert_eq!(t["status"]["state"], "TASK_STATE_COMPLETED");
    let meta = &t["status"]["message"]["metadata"];
    assert_eq!(meta["outcome"]["status"], "completed", "{t}");
    let run = meta["runId"].as_str().unwrap();
    assert_eq!(
        t["artifacts"][0]["parts"],
        json!([{"text": "it's $HOME; no shell\n"}, {"text": "after go\n"}])
    );
    // The run behind the task is an ordinary recorded run.
    let (_, record) = server.get(&format!("/api/v1/runs/{run}")).await;
    assert_eq!(record["state"], "completed", "{record}");
}

#[tokio::test]
async fn core_cancel_001_canceled_only_once_the_process_group_is_gone() {
    let dir = tempfile::tempdir().unwrap();
    // Ignores SIGTERM, so only the SIGKILL after the grace period ends it;
    // the background sleep inherits that and must go too.
    let server = serve(
        dir.path(),
        &instance(
            "stubborn",
            &[
                "sh",
                "-c",
                "trap '' TERM; sleep 1000 & echo \"$$ $!\" > pids; wait",
            ],
        ),
    );
    let sent = call(
        &server,
        "/agents/stubborn/",
        json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {
            "message": {"messageId": "c1", "role": "ROLE_USER", "parts": [{"text": "x"}]},
            "configuration": {"returnImmediately": true}
        }}),
    )
    .await;
    let task = sent["result"]["task"]["id"].as_str().unwrap().to_owned();
    let pids: Vec<i64> = read_when_written(&dir.path().join("pids"))
        .await
        .split_whitespace()
        .map(|p| p.parse().unwrap())
        .collect();
    assert!(pids.iter().all(|p| alive(*p)));
    let cancel = json!({"jsonrpc": "2.0", "id": 2, "method": "CancelTask", "params": {"id": task}});
    let canceled = call(&server, "/agents/stubborn/", cancel.clone()).await;
    assert_eq!(
        canceled["result"]["status"]["state"], "TASK_STATE_CANCELED",
        "{canceled}"
    );
    for pid in &pids {
        assert!(!alive(*pid), "process {pid} outlived the cancel");
    }
    assert_eq!(
        canceled["result"]["status"]["message"]["metadata"]["outcome"]["status"],
        "cancelled"
    );
    let again = call(&server, "/agents/stubborn/", cancel).await;
    assert_eq!(again["error"]["code"], -32002, "{again}");
}

#[tokio::test]
async fn core_send_exit_status_decides_the_task() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(
        dir.path(),
        &format!(
            "{}{}",
            instance(
                "fails",
                &["sh", "-c", "echo \"bad: $1\" >&2; exit 3", "sh", "{text}"]
            ),
            instance("missing", &["/nonexistent/agent", "{text}"]),
        ),
    );
    let failed = call(&server, "/agents/fails/", send(1, "SendMessage", "x")).await;
    let t = &failed["result"]["task"];
    assert_eq!(t["status"]["state"], "TASK_STATE_FAILED", "{failed}");
    assert_eq!(
        t["status"]["message"]["metadata"]["outcome"],
        json!({"status": "failed", "kind": "application", "exit_code": 3})
    );
    assert_eq!(t["artifacts"][0]["name"], "stderr");
    assert_eq!(t["artifacts"][0]["parts"][0]["text"], "bad: x\n");

    let unstartable = call(&server, "/agents/missing/", send(2, "SendMessage", "x")).await;
    let t = &unstartable["result"]["task"];
    assert_eq!(t["status"]["state"], "TASK_STATE_FAILED", "{unstartable}");
    let outcome = &t["status"]["message"]["metadata"]["outcome"];
    assert_eq!(outcome["kind"], "infrastructure", "{t}");
    let text = t["status"]["message"]["parts"][0]["text"].as_str().unwrap();
    assert!(text.contains("/nonexistent/agent"), "{text}");

    // A command takes text; a message without any is refused, and nothing is stored.
    let no_text = call(
        &server,
        "/agents/fails/",
        json!({"jsonrpc": "2.0", "id": 3, "method": "SendMessage", "params": {"message": {
            "messageId": "d1", "role": "ROLE_USER", "parts": [{"data": {"a": 1}}]
        }}}),
    )
    .await;
    assert_eq!(no_text["error"]["code"], -32602, "{no_text}");
    let list = call(
        &server,
        "/agents/fails/",
        json!({"jsonrpc": "2.0", "id": 4, "method": "ListTasks", "params": {}}),
    )
    .await;
    assert_eq!(list["result"]["tasks"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn a2a_token_guards_every_route_but_the_card() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start_with(dir.path(), &[("WARDEN_A2A_TOKEN", TOKEN)]);
    let (status, card) = server.get("/.well-known/agent-card.json").await;
    assert_eq!(status, 200);
    assert_eq!(
        card["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["scheme"],
        "Bearer"
    );
    assert_eq!(card["security"], json!([{"bearer": []}]));
    let wrong_token = format!("Bearer {TOKEN}x");
    for (path, auth) in [
        ("/", None),
        ("/", Some(wrong_token.as_str())),
        ("/agents/default/", Some("Basic eDp5")),
        ("/v1/message:send", None),
        ("/message:send", Some(wrong_token.as_str())),
    ] {
        let mut req = server
            .client
            .post(server.url(path))
            .json(&send(1, "SendMessage", "x"));
        if let Some(a) = auth {
            req = req.header("Authorization", a);
        }
        let refused = req.send().await.unwrap();
        assert_eq!(refused.status(), 401, "{path} {auth:?}");
        assert_eq!(refused.headers()["www-authenticate"], "Bearer");
    }
    let (status, _) = server.get("/tasks").await;
    assert_eq!(status, 401);
    // The scheme name is case-insensitive; the token is not.
    let ok = server
        .client
        .post(server.url("/"))
        .header("A2A-Version", "1.0")
        .header("Authorization", format!("bearer {TOKEN}"))
        .json(&send(2, "SendMessage", "x"))
        .send()
        .await
        .unwrap();
    let body: Value = ok.json().await.unwrap();
    assert_eq!(
        body["result"]["task"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
}

#[test]
fn instance_config_mistakes_stop_the_server_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    for (toml, says) in [
        (
            "[[a2a.instances]]\nname = \"a\"\nargv = [\"x\"]\n",
            "set runtime = \"command\"",
        ),
        (
            "[[a2a.instances]]\nname = \"a\"\nruntime = \"command\"\n",
            "needs argv",
        ),
        (
            "[[a2a.instances]]\nname = \"a\"\nruntime = \"command\"\nargv = [\"{text}\"]\n",
            "argv[0]",
        ),
        ("[[a2a.instances]]\nname = \"A B\"\n", "instance name"),
    ] {
        write_config(dir.path(), toml);
        let mut cmd = warden(dir.path());
        cmd.args(["serve", "--listen", "127.0.0.1:0"])
            .env("WARDEN_HOME", dir.path().join(".warden"));
        let (ok, err) = refused_start(cmd);
        assert!(!ok && err.contains(says), "{toml}: {err}");
    }
    // Beyond loopback the A2A surface needs a token, not just the operator's.
    write_config(dir.path(), "");
    let mut cmd = warden(dir.path());
    cmd.args(["serve", "--listen", "0.0.0.0:0"])
        .env("WARDEN_HOME", dir.path().join(".warden"))
        .env("WARDEN_OPERATOR_TOKEN", TOKEN);
    let (ok, err) = refused_start(cmd);
    assert!(!ok && err.contains("WARDEN_A2A_TOKEN"), "{err}");
}

/// Runs a `warden serve` that should refuse to start; one that starts
/// anyway is killed after 20 s and the test fails rather than hangs.
fn refused_start(mut cmd: Command) -> (bool, String) {
    let mut child = cmd
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("warden serve started although its configuration is invalid");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    (status.success(), err)
}

#[tokio::test]
async fn the_body_cap_is_configurable() {
    let dir = tempfile::tempdir().unwrap();
    write_config(dir.path(), "[a2a]\nmax_body_bytes = 2048\n");
    let server = Server::start(dir.path());
    let small = call(&server, "/", send(1, "SendMessage", &"x".repeat(1000))).await;
    assert_eq!(
        small["result"]["task"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
    let big = server
        .client
        .post(server.url("/"))
        .header("A2A-Version", "1.0")
        .json(&send(2, "SendMessage", &"x".repeat(3000)))
        .send()
        .await
        .unwrap();
    assert_eq!(big.status(), 413);
    let err: Value = big.json().await.unwrap();
    assert!(
        err["error"]["message"]
            .as_str()
            .unwrap()
            .contains("a2a.max_body_bytes"),
        "{err}"
    );
}
