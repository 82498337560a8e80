//! SSE: ids are event sequences, and a reconnect with Last-Event-ID misses
//! nothing and repeats nothing.

use std::time::Duration;

use futures_util::StreamExt;
use serde_json::{Value, json};

use super::harness::*;

/// One parsed SSE event.
#[derive(Debug, Clone, PartialEq)]
struct Sse {
    id: u64,
    event: String,
    data: Value,
}

/// Reads events until `n` have arrived or the stream ends.
async fn read_events(server: &Server, path: &str, last_id: Option<u64>, n: usize) -> Vec<Sse> {
    let mut req = server.client.get(server.url(path));
    if let Some(id) = last_id {
        req = req.header("Last-Event-ID", id.to_string());
    }
    let resp = req.send().await.unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    let mut stream = resp.bytes_stream();
    let mut buf = String::new();
    let mut out = Vec::new();
    let read = async {
        while out.len() < n {
            let Some(chunk) = stream.next().await else {
                break;
            };
            buf.push_str(std::str::from_utf8(&chunk.unwrap()).unwrap());
            while let Some(end) = buf.find("\n\n") {
                let block: String = buf.drain(..end + 2).collect();
                let (mut id, mut event, mut data) = (None, String::new(), String::new());
                for line in block.lines() {
                    if let Some(v) = line.strip_prefix("id: ") {
                        id = Some(v.parse().unwrap());
                    } else if let Some(v) = line.strip_prefix("event: ") {
                        event = v.to_owned();
                    } else if let Some(v) = line.strip_prefix("data: ") {
                        data.push_str(v);
                    }
                }
                if let Some(id) = id {
                    out.push(Sse {
                        id,
                        event,
                        data: serde_json::from_str(&data).unwrap(),
                    });
                }
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(30), read)
        .await
        .expect("SSE stream stalled");
    out
}

#[tokio::test]
async fn resume_with_last_event_id_misses_and_repeats_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let run = server
        .start_run(json!({"argv": ["sh", "-c", "for i in 1 2 3 4 5 6; do echo line$i; sleep 0.05; done; exit 4"]}))
        .await;
    let path = format!("/api/v1/runs/{}/events", run["id"].as_str().unwrap());

    // First connection: take three events, then drop it mid-run.
    let first = read_events(&server, &path, None, 3).await;
    assert_eq!(first.len(), 3);
    assert_eq!(first[0].event, "run.created");
    // Reconnect from the last id seen; the stream ends after run.finished.
    let rest = read_events(&server, &path, Some(first[2].id), usize::MAX).await;
    let resumed: Vec<Sse> = first.iter().cloned().chain(rest).collect();

    // A fresh full replay is the reference.
    let full = read_events(&server, &path, None, usize::MAX).await;
    assert_eq!(resumed, full);
    let ids: Vec<u64> = full.iter().map(|e| e.id).collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "{ids:?}");
    assert_eq!(full.last().unwrap().event, "run.finished");
    assert_eq!(
        full.last().unwrap().data["outcome"],
        json!({"status": "failed", "kind": "application", "exit_code": 4})
    );
    let text: String = full
        .iter()
        .filter(|e| e.event == "run.output")
        .map(|e| e.data["text"].as_str().unwrap())
        .collect();
    assert_eq!(text, "line1\nline2\nline3\nline4\nline5\nline6\n");

    // Resuming after the end yields nothing and closes.
    let after_end = read_events(&server, &path, Some(full.last().unwrap().id), usize::MAX).await;
    assert_eq!(after_end, vec![]);
    // A malformed Last-Event-ID is refused.
    let bad = server
        .client
        .get(server.url(&path))
        .header("Last-Event-ID", "abc")
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), 400);
}
