//! Interop with the official A2A Python SDK: its client drives a real
//! warden over JSON-RPC and HTTP+JSON, blocking and streaming, in protocol
//! 1.0 and (through the SDK's compat transports) 0.3
//! (`tests/interop/a2a_client.py`). `scripts/test.sh` installs the SDK.

use std::path::PathBuf;
use std::process::Command;

use super::harness::*;

fn python() -> PathBuf {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let python = std::env::var_os("WARDEN_INTEROP_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join(".venv-interop/bin/python"));
    let ok = Command::new(&python)
        .args(["-c", "import a2a.client"])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        ok,
        "the official A2A Python SDK is needed for interop tests and was not found at {}: \
         run ./scripts/test.sh (it installs a2a-sdk into .venv-interop) or set WARDEN_INTEROP_PYTHON",
        python.display()
    );
    python
}

#[tokio::test(flavor = "multi_thread")]
async fn python_sdk_client_sends_streams_gets_lists_and_cancels() {
    let python = python();
    let script =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/interop/a2a_client.py");
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let out = tokio::task::spawn_blocking({
        let base = server.base.clone();
        move || Command::new(python).arg(script).arg(base).output().unwrap()
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "interop failed:\n{stdout}\n{stderr}");
    assert_eq!(stdout.matches("ok: ").count(), 8, "{stdout}");
}
