//! The confined tier, for real: each escape denied by the kernel when
//! confined and allowed when not, setup failures reported as such, the
//! certificate bound to this binary, and the tier advertised only with it.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::{Value, json};

use super::harness::*;

/// A temp dir with a workspace `ws` and a sibling `outside` beside it.
struct Dirs {
    root: tempfile::TempDir,
}

impl Dirs {
    fn new() -> Self {
        let root = tempfile::tempdir().unwrap();
        for d in ["ws", "outside"] {
            std::fs::create_dir(root.path().join(d)).unwrap();
        }
        std::fs::write(root.path().join("outside/secret.txt"), "secret").unwrap();
        Self { root }
    }

    fn path(&self) -> &Path {
        self.root.path()
    }

    fn ws(&self) -> PathBuf {
        self.root.path().join("ws")
    }

    fn outside(&self, name: &str) -> String {
        self.root
            .path()
            .join("outside")
            .join(name)
            .display()
            .to_string()
    }
}

/// A write the kernel refused: the read-only mount answers first where
/// there is one, Landlock elsewhere.
fn refused_write(stderr: &str) -> bool {
    stderr.contains("Read-only file system") || stderr.contains("Permission denied")
}

/// `warden run --json [--confine PROFILE] --cwd ws -- argv`; returns the
/// outcome line and the run's stderr.
fn run(dirs: &Dirs, profile: Option<&str>, argv: &[&str]) -> (Value, String) {
    stream_and_outcome(&run_output(dirs, profile, argv), "stderr")
}

/// Like [`run`], with the run's stdout.
fn run_stdout(dirs: &Dirs, profile: Option<&str>, argv: &[&str]) -> (Value, String) {
    stream_and_outcome(&run_output(dirs, profile, argv), "stdout")
}

fn run_output(dirs: &Dirs, profile: Option<&str>, argv: &[&str]) -> Output {
    run_output_with(dirs, profile, &[], argv)
}

/// [`run_output`] with more `warden run` flags (`--timeout 0.5`, …).
fn run_output_with(dirs: &Dirs, profile: Option<&str>, flags: &[&str], argv: &[&str]) -> Output {
    let mut cmd = warden(dirs.path());
    cmd.args(["run", "--json"])
        .args(flags)
        .arg("--cwd")
        .arg(dirs.ws());
    if let Some(p) = profile {
        cmd.args(["--confine", p]);
    }
    cmd.arg("--")
        .args(argv)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn outcome_of(out: &Output) -> (Value, String) {
    stream_and_outcome(out, "stderr")
}

/// The outcome of a `warden run --json` and the text of one of its streams.
fn stream_and_outcome(out: &Output, stream: &str) -> (Value, String) {
    let mut text = String::new();
    let mut outcome = Value::Null;
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        match v["type"].as_str() {
            Some("output") if v["stream"] == stream => {
                text.push_str(v["text"].as_str().unwrap_or(""))
            }
            Some("outcome") => outcome = v["outcome"].clone(),
            _ => {}
        }
    }
    assert!(!outcome.is_null(), "no outcome: {out:?}");
    (outcome, text)
}

const COMPLETED: fn() -> Value = || json!({"status": "completed"});

fn exit_code(code: i32) -> Value {
    json!({"status": "failed", "kind": "application", "exit_code": code})
}

#[test]
fn confined_runs_cannot_write_outside_the_workspace_and_edit_may_write_inside() {
    let dirs = Dirs::new();
    let escape = format!("echo x > {}", dirs.outside("new.txt"));
    // The baseline proves the write is possible at all.
    assert_eq!(run(&dirs, None, &["sh", "-c", &escape]).0, COMPLETED());
    std::fs::remove_file(dirs.outside("new.txt")).unwrap();

    let (outcome, stderr) = run(&dirs, Some("edit"), &["sh", "-c", &escape]);
    assert_eq!(outcome, exit_code(2));
    assert!(refused_write(&stderr), "{stderr}");
    assert!(!Path::new(&dirs.outside("new.txt")).exists());

    let read = format!("cat {}", dirs.outside("secret.txt"));
    let (outcome, stderr) = run(&dirs, Some("edit"), &["sh", "-c", &read]);
    assert_eq!(outcome, exit_code(1));
    assert!(stderr.contains("Permission denied"), "{stderr}");

    let (outcome, _) = run(&dirs, Some("edit"), &["sh", "-c", "echo ok > inside.txt"]);
    assert_eq!(outcome, COMPLETED());
    assert_eq!(
        std::fs::read_to_string(dirs.ws().join("inside.txt")).unwrap(),
        "ok\n"
    );

    // `test` and `readonly` keep the workspace read-only but give a scratch.
    for profile in ["test", "readonly"] {
        let (outcome, stderr) = run(
            &dirs,
            Some(profile),
            // Builtins only: `test` allows no new process.
            &[
                "sh",
                "-c",
                "echo x > $TMPDIR/s && read l < inside.txt && echo y > inside.txt",
            ],
        );
        assert_eq!(outcome, exit_code(2), "{profile}");
        assert!(refused_write(&stderr), "{profile}: {stderr}");
    }
}

#[test]
fn confined_runs_cannot_reach_a_loopback_listener_that_answers_unconfined() {
    let dirs = Dirs::new();
    let python = PYTHON;
    assert!(Path::new(python).exists(), "this test needs {python}");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let script = format!(
        "import socket; socket.create_connection(('127.0.0.1', {}), timeout=5)",
        listener.local_addr().unwrap().port()
    );
    assert_eq!(run(&dirs, None, &[python, "-c", &script]).0, COMPLETED());
    let (outcome, stderr) = run(&dirs, Some("edit"), &[python, "-c", &script]);
    assert_eq!(outcome, exit_code(1));
    assert!(stderr.contains("PermissionError"), "{stderr}");
    // Unix sockets too: a host daemon's socket is out of reach.
    let unix = "import socket; socket.socket(socket.AF_UNIX)";
    let (outcome, stderr) = run(&dirs, Some("edit"), &[python, "-c", unix]);
    assert_eq!(outcome, exit_code(1));
    assert!(stderr.contains("Operation not permitted"), "{stderr}");
}

#[test]
fn the_test_profile_refuses_new_processes_and_every_profile_refuses_namespaces() {
    let dirs = Dirs::new();
    assert_eq!(
        run(&dirs, Some("edit"), &["sh", "-c", "/bin/true && /bin/true"]).0,
        COMPLETED()
    );
    let (outcome, stderr) = run(&dirs, Some("test"), &["sh", "-c", "/bin/true; exit 9"]);
    // dash gives up on a script whose fork failed, with exit code 2.
    assert_eq!(outcome, exit_code(2));
    assert!(stderr.contains("Cannot fork"), "{stderr}");
    // The baseline may create a user namespace; a confined run may not.
    assert_eq!(run(&dirs, None, &["unshare", "-r", "true"]).0, COMPLETED());
    for profile in ["edit", "test", "readonly"] {
        let (outcome, stderr) = run(&dirs, Some(profile), &["unshare", "-r", "true"]);
        assert_eq!(outcome, exit_code(1), "{profile}");
        assert!(
            stderr.contains("Operation not permitted"),
            "{profile}: {stderr}"
        );
    }
}

const PYTHON: &str = "/usr/bin/python3";

#[test]
fn metadata_outside_the_writable_trees_cannot_change() {
    // Landlock does not govern chmod or utimes; the read-only mounts do.
    let dirs = Dirs::new();
    let secret = dirs.outside("secret.txt");
    let script = format!("chmod 600 {secret} && touch -d 2001-01-01 {secret}");
    assert_eq!(run(&dirs, None, &["sh", "-c", &script]).0, COMPLETED());
    let (outcome, stderr) = run(
        &dirs,
        Some("edit"),
        &["sh", "-c", &format!("chmod 644 {secret}")],
    );
    assert_eq!(outcome, exit_code(1));
    assert!(stderr.contains("Read-only file system"), "{stderr}");
    let (outcome, stderr) = run(
        &dirs,
        Some("edit"),
        &["sh", "-c", &format!("touch {secret}")],
    );
    assert_eq!(outcome, exit_code(1));
    assert!(stderr.contains("Read-only file system"), "{stderr}");
    let mode = std::fs::metadata(&secret).unwrap();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&mode.permissions()) & 0o777,
        0o600
    );
    // Inside an `edit` workspace metadata may change.
    let (outcome, _) = run(&dirs, Some("edit"), &["sh", "-c", "touch f && chmod 700 f"]);
    assert_eq!(outcome, COMPLETED());
}

#[test]
fn a_confined_run_cannot_type_into_a_terminal_or_use_the_x32_abi() {
    let dirs = Dirs::new();
    // TIOCSTI on a file that is no terminal: the kernel says ENOTTY, so an
    // EPERM can only be the filter's (also with high bits set in the
    // request, which the kernel ignores).
    let inject = "import fcntl, os, termios\n\
                  fd = os.open('/dev/null', os.O_RDWR)\n\
                  for req in (termios.TIOCSTI, termios.TIOCSTI | (1 << 32)):\n\
                  \x20   try: fcntl.ioctl(fd, req, b'x')\n\
                  \x20   except OSError as e: print(os.strerror(e.errno))";
    let (_, host) = run_stdout(&dirs, None, &[PYTHON, "-c", inject]);
    assert_eq!(host, "Inappropriate ioctl for device\n".repeat(2));
    let (_, confined) = run_stdout(&dirs, Some("edit"), &[PYTHON, "-c", inject]);
    assert_eq!(confined, "Operation not permitted\n".repeat(2));
    // socket() through the x32 system call numbers: refused by the filter
    // whatever the kernel would have said; open_tree_attr refused; numbers
    // past the last reviewed call answer ENOSYS.
    let calls = "import ctypes, os\n\
                 l = ctypes.CDLL(None, use_errno=True)\n\
                 for nr in (0x40000000 | 41, 467, 470):\n\
                 \x20   l.syscall(nr, 0, 0, 0); print(os.strerror(ctypes.get_errno()))";
    let (_, out) = run_stdout(&dirs, Some("edit"), &[PYTHON, "-c", calls]);
    assert_eq!(
        out,
        "Operation not permitted\nOperation not permitted\nFunction not implemented\n"
    );
}

#[test]
fn the_target_runs_without_capabilities() {
    // Root outside is not root inside: no capability survives the exec, so
    // nothing the filter lets through can remount the read-only view.
    let dirs = Dirs::new();
    let (outcome, out) = run_stdout(
        &dirs,
        Some("edit"),
        &["sh", "-c", "grep ^CapEff /proc/self/status"],
    );
    assert_eq!(outcome, COMPLETED());
    assert_eq!(out, "CapEff:\t0000000000000000\n");
}

#[test]
fn warden_s_own_endings_stand_for_confined_runs() {
    let dirs = Dirs::new();
    // The output cap kills at once with SIGKILL: the helper never writes
    // its record, and the cap, not a setup failure, is the outcome.
    let out = run_output_with(&dirs, Some("edit"), &["--max-output", "1K"], &["yes"]);
    assert_eq!(outcome_of(&out).0, json!({"status": "output_limit"}));
    // A program that ignores SIGTERM, past its deadline.
    let out = run_output_with(
        &dirs,
        Some("edit"),
        &["--timeout", "0.5", "--grace", "0.2"],
        &["sh", "-c", "trap '' TERM; while :; do sleep 1; done"],
    );
    assert_eq!(outcome_of(&out).0, json!({"status": "timed_out"}));
}

#[test]
fn exit_codes_and_signals_pass_through_the_helper() {
    let dirs = Dirs::new();
    assert_eq!(
        run(&dirs, Some("edit"), &["sh", "-c", "exit 7"]).0,
        exit_code(7)
    );
    // SIGSEGV and SIGPIPE too, which the helper's own runtime handles or
    // ignores: the helper dies of the target's signal.
    for (name, number) in [("TERM", 15), ("SEGV", 11), ("PIPE", 13), ("BUS", 7)] {
        assert_eq!(
            run(
                &dirs,
                Some("edit"),
                &["sh", "-c", &format!("kill -{name} $$")]
            )
            .0,
            json!({"status": "failed", "kind": "application", "signal": number}),
            "{name}"
        );
    }
}

#[test]
fn a_deadline_ends_every_process_of_a_confined_run() {
    let dirs = Dirs::new();
    let mark = format!("{}.25", std::process::id());
    let script = format!("sleep {mark} & sleep {mark}");
    let out = run_output_with(
        &dirs,
        Some("edit"),
        &["--timeout", "0.5", "--grace", "0.2"],
        &["sh", "-c", &script],
    );
    assert_eq!(outcome_of(&out).0, json!({"status": "timed_out"}));
    // The outcome is reported only once the whole run is gone.
    let left: Vec<String> = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| std::fs::read(e.ok()?.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| c.contains(&mark))
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[test]
fn setup_failures_are_infrastructure_failures_not_exit_codes() {
    let dirs = Dirs::new();
    // A program the host can run but the policy cannot read.
    let tool = dirs.path().join("outside/tool");
    std::fs::write(&tool, "#!/bin/sh\necho ran\n").unwrap();
    Command::new("chmod").arg("+x").arg(&tool).status().unwrap();
    let tool = tool.display().to_string();
    assert_eq!(run(&dirs, None, &[&tool]).0, COMPLETED());
    let (outcome, _) = run(&dirs, Some("edit"), &[&tool]);
    assert_eq!(outcome["kind"], "infrastructure", "{outcome}");
    assert_eq!(outcome["reason"], "permission_denied", "{outcome}");
    assert!(
        outcome["detail"]
            .as_str()
            .unwrap()
            .contains("readable paths"),
        "{outcome}"
    );
}

/// Runs `script` in a user namespace where creating user namespaces is
/// switched off: a kernel without the feature, as far as warden can tell.
fn without_user_namespaces(dirs: &Dirs, script: &str) -> Output {
    Command::new("unshare")
        .args(["-Ur", "sh", "-c"])
        .arg(format!(
            "echo 0 > /proc/sys/user/max_user_namespaces && {script}"
        ))
        .current_dir(dirs.ws())
        .env("W", BIN)
        .output()
        .unwrap()
}

#[test]
fn a_policy_the_kernel_cannot_enforce_fails_closed_naming_the_feature() {
    let dirs = Dirs::new();
    let out = without_user_namespaces(&dirs, "\"$W\" sandbox-exec --profile edit -- /bin/echo ran");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(125), "{stderr}");
    assert!(out.stdout.is_empty(), "the program must not run");
    assert!(stderr.contains("user namespaces are disabled"), "{stderr}");

    let out = without_user_namespaces(&dirs, "\"$W\" run --json --confine edit -- /bin/echo ran");
    let (outcome, _) = outcome_of(&out);
    assert_eq!(outcome["reason"], "confinement_unavailable", "{outcome}");
    assert!(
        outcome["detail"]
            .as_str()
            .unwrap()
            .contains("user namespaces are disabled"),
        "{outcome}"
    );
}

#[test]
fn a_workspace_holding_the_home_directory_is_refused() {
    let dirs = Dirs::new();
    // The harness sets HOME to the temp dir: it is inside the workspace.
    let out = warden(dirs.path())
        .args(["run", "--confine", "edit", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("contains the home directory"),
        "{out:?}"
    );
}

fn certify(home: &Path, extra: &[&str]) -> Output {
    warden(home.parent().unwrap())
        .args(["certify", "--home"])
        .arg(home)
        .args(extra)
        .output()
        .unwrap()
}

#[test]
fn certification_proves_each_probe_against_a_baseline_and_binds_the_binary() {
    let dirs = Dirs::new();
    let home = dirs.path().join(".warden");
    let out = certify(&home, &["--json"]);
    assert!(out.status.success(), "{out:?}");
    let cert: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(cert["passed"], true, "{cert:#}");
    let probes = cert["probes"].as_array().unwrap();
    for p in probes {
        assert_eq!(p["baseline"]["allowed"], true, "{p}");
        if p["expect"] == "allowed" {
            assert_eq!(p["confined"]["allowed"], true, "{p}");
        } else {
            // Refused by the kernel, not failing for another reason.
            let err = p["confined"]["error"].as_str().unwrap_or_default();
            assert!(
                ["EACCES", "EPERM", "EROFS", "EXDEV", "ENETUNREACH"].contains(&err),
                "{p}"
            );
        }
        assert_eq!(p["passed"], true, "{p}");
    }
    let names: Vec<&str> = probes.iter().map(|p| p["name"].as_str().unwrap()).collect();
    for want in [
        "sibling_read",
        "sibling_write",
        "dotdot_read",
        "symlink_read",
        "symlink_write",
        "hardlink_out",
        "credential_ssh_key",
        "credential_gitconfig",
        "credential_netrc",
        "credential_aws",
        "tcp_connect_loopback",
        "udp_send_loopback",
        "background_process_test",
        "chmod_outside",
        "namespace_escape",
        "ptrace",
        "unix_socket",
        "workspace_write_readonly",
        "package_install_write",
        "workspace_write_edit",
        "scratch_write",
    ] {
        assert!(names.contains(&want), "missing probe {want}: {names:?}");
    }
    let sha = Command::new("sha256sum").arg(BIN).output().unwrap();
    let sha = String::from_utf8_lossy(&sha.stdout);
    assert_eq!(
        cert["binary_sha256"],
        sha.split_whitespace().next().unwrap()
    );
    assert_eq!(cert["landlock_abi"].as_u64().map(|v| v >= 6), Some(true));
    let created = humantime::parse_rfc3339(cert["created_at"].as_str().unwrap()).unwrap();
    let expires = humantime::parse_rfc3339(cert["expires_at"].as_str().unwrap()).unwrap();
    assert_eq!(expires.duration_since(created).unwrap().as_secs(), 7200);

    // The stored certificate checks out for this binary …
    let out = certify(&home, &["--check"]);
    assert!(out.status.success(), "{out:?}");
    // … and not once it names another binary, or has expired.
    let path = home.join("confinement/certificate.json");
    let stored: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let mut other = stored.clone();
    other["binary_sha256"] = json!("0".repeat(64));
    std::fs::write(&path, other.to_string()).unwrap();
    let out = certify(&home, &["--check"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("not the running one"),
        "{out:?}"
    );
    let mut expired = stored;
    expired["expires_at"] = json!("2020-01-01T00:00:00.000Z");
    std::fs::write(&path, expired.to_string()).unwrap();
    let out = certify(&home, &["--check"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("expired"),
        "{out:?}"
    );
}

fn confined_instance(dirs: &Dirs, profile: &str) -> String {
    format!(
        "[[a2a.instances]]\nname = \"boxed\"\nruntime = \"command\"\nargv = [\"sh\", \"-c\", \"{{text}}\"]\nworkspace = \"{}\"\ntier = \"confined\"\nprofile = \"{profile}\"\n",
        dirs.ws().display()
    )
}

async fn send_text(server: &Server, text: &str) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {
        "message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": text}]}
    }});
    let resp = server
        .client
        .post(server.url("/agents/boxed"))
        .header("A2A-Version", "1.0")
        .json(&body)
        .send()
        .await
        .unwrap();
    resp.json::<Value>().await.unwrap()["result"]["task"].clone()
}

fn stderr_of(task: &Value) -> String {
    task["artifacts"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|a| a["name"] == "stderr")
        .flat_map(|a| a["parts"].as_array().unwrap().iter())
        .filter_map(|p| p["text"].as_str())
        .collect()
}

#[tokio::test]
async fn a_confined_instance_is_advertised_with_its_certificate_and_held_by_it() {
    let dirs = Dirs::new();
    write_config(dirs.path(), &confined_instance(&dirs, "edit"));
    let server = Server::start(dirs.path());
    // The server certified before listening: the tier is proven now.
    let (status, iso) = server.get("/api/v1/isolation").await;
    assert_eq!(status, 200);
    assert_eq!(iso["confined"]["state"], "certified", "{iso}");
    assert_eq!(iso["host"]["available"], true);
    let (_, card) = server
        .get("/agents/boxed/.well-known/agent-card.json")
        .await;
    let ext: Vec<&Value> = card["capabilities"]["extensions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["uri"] == "https://warden.dev/extensions/isolation/v1")
        .collect();
    assert_eq!(ext.len(), 1, "{card}");
    assert_eq!(ext[0]["params"]["tier"], "confined");
    assert_eq!(ext[0]["params"]["profile"], "edit");
    assert_eq!(
        ext[0]["params"]["certifiedUntil"],
        iso["confined"]["expires_at"]
    );

    let task = send_text(&server, "echo in > done.txt").await;
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{task}");
    assert!(dirs.ws().join("done.txt").exists());
    let escape = format!("echo x > {}", dirs.outside("escaped.txt"));
    let task = send_text(&server, &escape).await;
    assert_eq!(task["status"]["state"], "TASK_STATE_FAILED", "{task}");
    assert!(refused_write(&stderr_of(&task)), "{task}");
    assert!(!Path::new(&dirs.outside("escaped.txt")).exists());

    // A host-tier instance's card says nothing about isolation.
    let (_, card) = server.get("/.well-known/agent-card.json").await;
    assert!(!card.to_string().contains("isolation/v1"), "{card}");
}

#[test]
fn an_instance_that_could_write_warden_s_own_state_is_refused_at_start() {
    let dirs = Dirs::new();
    let cases = [
        // The workspace holds WARDEN_HOME (dir/.warden) and the config.
        (
            format!(
                "[[a2a.instances]]\nname = \"boxed\"\nruntime = \"command\"\nargv = [\"true\"]\nworkspace = \"{}\"\ntier = \"confined\"\n",
                dirs.path().display()
            ),
            "warden's own home or config",
        ),
        // No workspace: never the server's directory by default.
        (
            "[[a2a.instances]]\nname = \"boxed\"\nruntime = \"command\"\nargv = [\"true\"]\ntier = \"confined\"\n".to_owned(),
            "needs workspace",
        ),
    ];
    for (toml, want) in cases {
        write_config(dirs.path(), &toml);
        let out = warden(dirs.path())
            .args(["serve", "--listen", "127.0.0.1:0"])
            .env("WARDEN_HOME", dirs.path().join(".warden"))
            // Not the temp dir, so the home-directory guard stays out of it.
            .env("HOME", "/nonexistent-home")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(want), "{stderr}");
    }
}

/// Whether `docker info` or `podman info` answers on this machine.
fn container_engine_answers() -> bool {
    ["docker", "podman"].iter().any(|e| {
        Command::new(e)
            .arg("info")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    })
}

#[test]
fn the_container_tier_is_a_start_up_error_when_no_engine_answers() {
    if container_engine_answers() {
        eprintln!("skipped: a container engine answered, so the tier is available here");
        return;
    }
    let dirs = Dirs::new();
    write_config(
        dirs.path(),
        &format!(
            "[[a2a.instances]]\nname = \"boxed\"\nruntime = \"command\"\nargv = [\"true\"]\nworkspace = \"{}\"\ntier = \"container\"\ncontainer_image = \"debian:12\"\n",
            dirs.ws().display()
        ),
    );
    let out = warden(dirs.path())
        .args(["serve", "--listen", "127.0.0.1:0"])
        .env("WARDEN_HOME", dirs.path().join(".warden"))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(
            "tier = \"container\" is unavailable on this host: no container engine answered"
        ),
        "{stderr}"
    );
}

#[tokio::test]
async fn container_tier_runs_commands_without_network_on_a_read_only_root() {
    if !container_engine_answers() {
        eprintln!(
            "skipped: no container engine answered (docker info / podman info), so the container tier cannot run here"
        );
        return;
    }
    let image = std::env::var("WARDEN_TEST_CONTAINER_IMAGE").unwrap_or("debian:12-slim".into());
    let present = ["docker", "podman"].iter().any(|e| {
        Command::new(e)
            .args(["image", "inspect", &image])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    });
    if !present {
        eprintln!(
            "skipped: image {image} is not present locally (warden never pulls); set WARDEN_TEST_CONTAINER_IMAGE"
        );
        return;
    }
    let dirs = Dirs::new();
    write_config(
        dirs.path(),
        &format!(
            "[[a2a.instances]]\nname = \"boxed\"\nruntime = \"command\"\nargv = [\"sh\", \"-c\", \"{{text}}\"]\nworkspace = \"{}\"\ntier = \"container\"\ncontainer_image = \"{image}\"\n",
            dirs.ws().display()
        ),
    );
    let server = Server::start(dirs.path());
    let (_, iso) = server.get("/api/v1/isolation").await;
    assert_eq!(iso["container"]["available"], true, "{iso}");
    let task = send_text(&server, "echo in > done.txt").await;
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{task}");
    assert!(dirs.ws().join("done.txt").exists());
    let task = send_text(&server, "touch /usr/escaped").await;
    assert_eq!(task["status"]["state"], "TASK_STATE_FAILED", "{task}");
    assert!(stderr_of(&task).contains("Read-only file system"), "{task}");
}

/// Waits for `mission`'s terminal event at the peer; its events, in order.
async fn mission_end(peer: &aiwg_peer::Peer, mission: &str) -> Vec<(String, Value)> {
    let frames = peer
        .wait_for(std::time::Duration::from_secs(30), mission, |f| {
            f.iter().any(|r| {
                r.frame["mission_id"] == mission
                    && ["mission.completed", "mission.failed", "mission.aborted"]
                        .contains(&r.frame["event"].as_str().unwrap_or_default())
            })
        })
        .await;
    frames
        .into_iter()
        .filter(|r| r.frame["mission_id"] == mission)
        .map(|r| {
            (
                r.frame["event"].as_str().unwrap().to_owned(),
                r.frame["data"].clone(),
            )
        })
        .collect()
}

/// A server with the confined instance `boxed` (profile `edit`),
/// registered with a fresh AIWG peer and connected; its executor id.
async fn confined_missions(env: &[(&str, &str)]) -> (aiwg_peer::Peer, Dirs, Server, String) {
    let peer = aiwg_peer::Peer::start().await.unwrap();
    let dirs = Dirs::new();
    write_config(dirs.path(), &confined_instance(&dirs, "edit"));
    let endpoint = peer.base();
    let mut all = vec![("AIWG_SERVE_ENDPOINT", endpoint.as_str())];
    all.extend_from_slice(env);
    let server = Server::start_with(dirs.path(), &all);
    peer.wait_for(std::time::Duration::from_secs(30), "the resync", |f| {
        f.iter().any(|r| r.frame["event"] == "executor.resync")
    })
    .await;
    let exec = std::fs::read_to_string(dirs.path().join(".warden/identity"))
        .unwrap()
        .trim()
        .to_owned();
    (peer, dirs, server, exec)
}

#[tokio::test]
async fn a_mission_in_a_confined_instance_starts_when_its_program_runs_and_is_held_by_the_policy() {
    let (peer, dirs, server, exec) = confined_missions(&[]).await;
    // Certified before it listened: the tier is claimed at registration.
    let caps = peer.registrations()[0]["capabilities"].clone();
    assert!(
        caps.as_array()
            .unwrap()
            .contains(&json!("isolation:confined")),
        "{caps}"
    );
    let body = |id: &str, objective: &str| {
        json!({"mission_id": id, "objective": objective, "completion": "exit 0",
               "executor_filter": {"agent_id": "boxed"}})
    };
    let (code, answer) = peer
        .dispatch(
            &server.base,
            &exec,
            "s",
            body("m-in", "echo in > mission.txt; echo wrote"),
        )
        .await;
    assert_eq!(code, 202, "{answer}");
    let events = mission_end(&peer, "m-in").await;
    let names: Vec<&str> = events.iter().map(|(e, _)| e.as_str()).collect();
    assert_eq!(names.first(), Some(&"mission.assigned"));
    assert_eq!(names.get(1), Some(&"mission.started"), "{events:?}");
    assert_eq!(names.last(), Some(&"mission.completed"), "{events:?}");
    assert!(dirs.ws().join("mission.txt").exists());
    // `started` was reported once the sandbox had exec'd the program.
    let run = std::fs::read_dir(dirs.path().join(".warden/missions"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    assert_eq!(
        std::fs::read_to_string(run.join("program.started")).unwrap(),
        "started\n"
    );

    let escape = format!("echo x > {}", dirs.outside("mission-escape.txt"));
    peer.dispatch(&server.base, &exec, "s", body("m-out", &escape))
        .await;
    let events = mission_end(&peer, "m-out").await;
    let (last, data) = events.last().unwrap();
    assert_eq!(last, "mission.failed", "{events:?}");
    assert_eq!(data["reason"], "non_zero_exit", "{data}");
    assert!(!Path::new(&dirs.outside("mission-escape.txt")).exists());
    assert_eq!(peer.violations(), Vec::<String>::new());
}

#[tokio::test]
async fn a_confined_mission_whose_sandbox_cannot_start_its_program_is_never_started() {
    // No `sh` on this PATH: the sandbox cannot find the mission's program.
    let (peer, _dirs, server, exec) = confined_missions(&[("PATH", "/nonexistent")]).await;
    let body = json!({"mission_id": "m-nosh", "objective": "true", "completion": "exit 0",
                      "executor_filter": {"agent_id": "boxed"}});
    let (code, answer) = peer.dispatch(&server.base, &exec, "s", body).await;
    assert_eq!(code, 500, "{answer}");
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("program_not_found"), "{answer}");
    let events = mission_end(&peer, "m-nosh").await;
    let names: Vec<&str> = events.iter().map(|(e, _)| e.as_str()).collect();
    assert_eq!(names, ["mission.assigned", "mission.failed"], "{events:?}");
    assert!(
        events[1].1["error"]
            .as_str()
            .is_some_and(|e| e.contains("program_not_found")),
        "{events:?}"
    );
    assert_eq!(peer.violations(), Vec::<String>::new());
}
