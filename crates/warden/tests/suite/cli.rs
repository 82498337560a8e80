//! `warden run`.

use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};

use super::harness::*;

fn run(args: &[&str]) -> (i32, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let out = warden(dir.path())
        .arg("run")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

#[test]
fn failure_prints_output_and_exit_code() {
    let (code, stdout, stderr) = run(&["--", "sh", "-c", "echo hi; exit 3"]);
    assert_eq!((code, stdout.as_str()), (3, "hi\n"));
    assert_eq!(stderr, "warden: failed (exit code 3)\n");
}

#[test]
fn json_mode_prints_events_then_the_outcome() {
    let (code, stdout, _) = run(&["--json", "--", "sh", "-c", "echo hi; exit 3"]);
    assert_eq!(code, 3);
    let lines: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        lines,
        vec![
            json!({"type": "output", "seq": 0, "stream": "stdout", "text": "hi\n"}),
            json!({"type": "outcome", "state": "failed", "exit_code": 3,
                   "outcome": {"status": "failed", "kind": "application", "exit_code": 3}}),
        ]
    );
}

#[test]
fn each_outcome_has_its_exit_code() {
    let (code, _, stderr) = run(&["--", "no-such-program-warden"]);
    assert_eq!(code, 125);
    assert!(stderr.contains("program_not_found"), "{stderr}");
    let (code, _, _) = run(&["--timeout", "0.3", "--grace", "0.2", "--", "sleep", "100"]);
    assert_eq!(code, 124);
    let (code, stdout, _) = run(&["--max-output", "1K", "--", "yes"]);
    assert_eq!((code, stdout.len()), (123, 1024));
    // No grace at all still keeps every byte of output and the true outcome.
    let (code, stdout, stderr) = run(&["--grace", "0", "--", "sh", "-c", "echo hi; echo err >&2"]);
    assert_eq!(
        (code, stdout.as_str(), stderr.as_str()),
        (0, "hi\n", "err\n")
    );
    let (code, _, _) = run(&["--", "sh", "-c", "kill -9 $$"]);
    assert_eq!(code, 137);
    let (code, stdout, _) = run(&[
        "--pty",
        "--",
        "sh",
        "-c",
        "test -t 0 && test -t 1 && echo tty",
    ]);
    assert_eq!((code, stdout.as_str()), (0, "tty\r\n"));
}

#[test]
fn bad_flags_are_refused_before_anything_runs() {
    let (code, _, stderr) = run(&["--timeout", "0", "--", "true"]);
    assert_ne!(code, 0);
    assert!(
        stderr.contains("--timeout must be a positive number"),
        "{stderr}"
    );
    let (code, _, stderr) = run(&["--max-output", "lots", "--", "true"]);
    assert_eq!(code, 2);
    assert!(stderr.contains("not a byte count"), "{stderr}");
    let (code, _, stderr) = run(&["--max-output", "4G", "--", "true"]);
    assert_ne!(code, 0);
    assert!(stderr.contains("max_output"), "{stderr}");
    let (code, _, stderr) = run(&["--cwd", "/no/such/dir", "--", "true"]);
    assert_eq!(code, 125);
    assert!(stderr.contains("bad_cwd"), "{stderr}");
}

#[tokio::test]
async fn sigint_cancels_and_leaves_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = tokio::process::Command::from({
        let mut c = warden(dir.path());
        c.args([
            "run",
            "--grace",
            "0.3",
            "--",
            "sh",
            "-c",
            "(trap '' TERM; exec sleep 1000) & echo $!; wait",
        ]);
        c
    })
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let mut stdout = tokio::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    tokio::time::timeout(
        Duration::from_secs(10),
        tokio::io::AsyncBufReadExt::read_line(&mut stdout, &mut line),
    )
    .await
    .unwrap()
    .unwrap();
    let grandchild: i64 = line.trim().parse().unwrap();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id().unwrap() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let status = tokio::time::timeout(Duration::from_secs(10), child.wait())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(status.code(), Some(130));
    assert!(
        !alive(grandchild),
        "grandchild {grandchild} outlived warden run"
    );
}

#[test]
fn an_escapee_with_an_empty_environment_dies_with_its_run() {
    // `env -i` drops the run marker; as the only live run, the escapee is
    // still recognised as this run's once it is re-parented to warden.
    let (code, stdout, stderr) = run(&[
        "--grace",
        "0.3",
        "--",
        "sh",
        "-c",
        "( setsid env -i /bin/sh -c 'echo $$; exec /bin/sleep 1000' & ) | head -n1",
    ]);
    assert_eq!(code, 0, "{stderr}");
    let escapee: i64 = stdout.trim().parse().unwrap();
    assert!(!alive(escapee), "escapee {escapee} outlived its run");
}

/// The child is spawned on std's posix_spawn path (clone with CLONE_VM |
/// CLONE_VFORK), which a `pre_exec` hook would turn into a plain fork.
#[test]
fn children_are_spawned_without_a_fork() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("trace");
    let status = std::process::Command::new("strace")
        .args(["-f", "-e", "trace=clone,clone3,fork,vfork", "-o"])
        .arg(&trace)
        .args([BIN, "run", "--", "/bin/true"])
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .current_dir(dir.path())
        .status()
        .expect("strace is needed for this test (apt-get install strace)");
    assert!(status.success());
    let trace = std::fs::read_to_string(trace).unwrap();
    let spawns: Vec<&str> = trace
        .lines()
        .filter(|l| !l.contains("CLONE_THREAD") && !l.contains("resumed>"))
        .filter(|l| l.contains("clone") || l.contains("fork"))
        .collect();
    assert_eq!(spawns.len(), 1, "{trace}");
    assert!(spawns[0].contains("CLONE_VM|CLONE_VFORK"), "{}", spawns[0]);
}
