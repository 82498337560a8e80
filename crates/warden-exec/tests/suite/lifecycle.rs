//! Outcomes, deadlines, cancellation and the no-orphans guarantee.

use std::time::{Duration, Instant};

use warden_core::{FailureKind, Outcome, RunSpec};
use warden_exec::{SpawnError, Stream, Supervisor};

use super::harness::*;
use super::proc_alive::alive;

#[tokio::test(flavor = "multi_thread")]
async fn exit_zero_completes_with_output() {
    let sup = supervisor(1000);
    let (chunks, outcome) = finish(start(&sup, &sh("echo hi"))).await;
    assert_eq!(outcome, Outcome::Completed);
    assert_eq!(text(&chunks, Stream::Stdout), "hi\n");
}

#[tokio::test(flavor = "multi_thread")]
async fn non_zero_exit_is_an_application_failure() {
    let sup = supervisor(1000);
    let (chunks, outcome) = finish(start(&sup, &sh("echo oops >&2; exit 3"))).await;
    assert_eq!(outcome, Outcome::exit_code(3));
    assert_eq!(text(&chunks, Stream::Stderr), "oops\n");
}

#[tokio::test(flavor = "multi_thread")]
async fn death_by_signal_is_an_application_failure() {
    let sup = supervisor(1000);
    let (_, outcome) = finish(start(&sup, &sh("kill -9 $$"))).await;
    assert_eq!(outcome, Outcome::signal(9));
}

#[tokio::test(flavor = "multi_thread")]
async fn unstartable_runs_name_the_cause() {
    let sup = supervisor(1000);
    let err = sup
        .spawn("x", &spec(&["no-such-program-warden"]))
        .unwrap_err();
    assert!(matches!(err, SpawnError::ProgramNotFound(_)), "{err}");
    assert_eq!(
        err.outcome(),
        Outcome::Failed(FailureKind::Infrastructure {
            reason: "program_not_found".into(),
            detail: Some("program not found: no-such-program-warden".into()),
        })
    );
    let mut bad_cwd = spec(&["true"]);
    bad_cwd.cwd = "/no/such/dir".into();
    let err = sup.spawn("x", &bad_cwd).unwrap_err();
    assert_eq!(err.reason(), "bad_cwd");
    let err = sup.spawn("x", &spec(&["/etc/passwd"])).unwrap_err();
    assert_eq!(err.reason(), "permission_denied");
}

#[tokio::test(flavor = "multi_thread")]
async fn deadline_kills_a_grandchild_that_ignores_sigterm() {
    let sup = supervisor(300);
    let mut s = sh("(trap '' TERM; exec sleep 1000) & echo $!; wait");
    s.timeout = Duration::from_millis(500);
    let started = Instant::now();
    let (chunks, outcome) = finish(start(&sup, &s)).await;
    assert_eq!(outcome, Outcome::TimedOut);
    // SIGTERM could not end the grandchild; only the SIGKILL after the grace period did.
    assert!(
        started.elapsed() >= Duration::from_millis(800),
        "{:?}",
        started.elapsed()
    );
    let grandchild = first_pid(&chunks);
    assert!(
        !alive(grandchild),
        "grandchild {grandchild} outlived its run"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn leftovers_of_a_finished_leader_are_killed() {
    let sup = supervisor(300);
    ends_leaving_nothing(&sup, &sh("sleep 1000 & echo $!"), Outcome::Completed).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn setsid_escapee_dies_when_the_leader_exits() {
    let sup = supervisor(300);
    // The escapee prints its pid only after setsid(), then its parent exits,
    // so it is re-parented to us outside the run's process group.
    let s = sh("( setsid sh -c 'echo $$; exec sleep 1000' & ) | head -n1");
    ends_leaving_nothing(&sup, &s, Outcome::Completed).await;
}

/// Runs `spec` to `expected`; the process whose pid it printed first (one it
/// left behind) must be gone by then.
async fn ends_leaving_nothing(sup: &Supervisor, spec: &RunSpec, expected: Outcome) {
    let (chunks, outcome) = finish(start(sup, spec)).await;
    assert_eq!(outcome, expected);
    let left = first_pid(&chunks);
    assert!(!alive(left), "process {left} outlived its run");
}

/// Writes `script` to `dir` and, `times` over, runs a leader that starts
/// `interpreter script ready-file` in a session of its own, holding none of
/// the run's output, and exits once it made the file. Another run is live
/// meanwhile, so the escapee is known by its marker alone; it must be gone
/// when each run ends. The script is run by its interpreter, not made
/// executable: writing a program while other tests fork can leave it busy
/// (ETXTBSY).
async fn escapees_die_with_their_runs(interpreter: &str, script: &str, times: usize) {
    let sup = supervisor(300);
    let other = start(&sup, &sh("exec sleep 60"));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("escapee");
    std::fs::write(&path, script).unwrap();
    for i in 0..times {
        let ready = dir.path().join(format!("ready-{i}"));
        let s = sh(&format!(
            "setsid {interpreter} {} {r} </dev/null >/dev/null 2>&1 & echo $!; until [ -e {r} ]; do :; done",
            path.display(),
            r = ready.display()
        ));
        ends_leaving_nothing(&sup, &s, Outcome::Completed).await;
    }
    other.canceller().cancel();
    assert_eq!(finish(other).await.1, Outcome::Cancelled);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_escapee_caught_inside_execve_is_found_all_the_same() {
    // A process inside execve has no environment to read for a moment; one
    // that does nothing but exec itself must still be found every time. It
    // stops once the test's directory is gone, should it outlive its run.
    let script = "[ -d \"${1%/*}\" ] || exit\n: >\"$1\"\nexec sh \"$0\" \"$1\"\n";
    escapees_die_with_their_runs("sh", script, 30).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_escapee_whose_main_thread_exited_is_found_and_killed() {
    // Its main thread shows as a zombie while another thread runs on: it is
    // alive, and still the run's. It stops once the test's directory is gone,
    // should it outlive its run.
    let ctypes = std::process::Command::new("python3")
        .args(["-c", "import ctypes"])
        .status();
    assert!(
        ctypes.is_ok_and(|s| s.success()),
        "this test needs python3 with ctypes on PATH"
    );
    let script = "import ctypes, os, sys, threading, time
def run():
    while open('/proc/self/stat').read().rsplit(') ', 1)[1][0] != 'Z':
        time.sleep(0.001)
    open(sys.argv[1], 'w').close()
    while os.path.isdir(os.path.dirname(sys.argv[1])):
        time.sleep(0.1)
threading.Thread(target=run).start()
ctypes.CDLL(None).pthread_exit(None)
";
    escapees_die_with_their_runs("python3", script, 1).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn setsid_escapee_dies_at_the_deadline() {
    let sup = supervisor(300);
    let mut s =
        sh("setsid sh -c 'echo $$; trap \"\" TERM; exec sleep 1000' | head -n1; sleep 1000");
    s.timeout = Duration::from_millis(500);
    ends_leaving_nothing(&sup, &s, Outcome::TimedOut).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn cancel_terminates_the_group() {
    let sup = supervisor(1000);
    let run = start(&sup, &sh("echo $$; exec sleep 1000"));
    let canceller = run.canceller();
    let mut run = run;
    let first = run.next().await.unwrap();
    canceller.cancel();
    let (_, outcome) = finish(run).await;
    assert_eq!(outcome, Outcome::Cancelled);
    let warden_exec::RunEvent::Output(c) = first else {
        panic!("expected output")
    };
    let pid: i32 = String::from_utf8(c.data).unwrap().trim().parse().unwrap();
    assert!(!alive(pid));
}

#[tokio::test(flavor = "multi_thread")]
async fn cancel_after_exit_does_not_rewrite_the_outcome() {
    let sup = supervisor(1000);
    let run = start(&sup, &sh("exit 4"));
    let canceller = run.canceller();
    let (_, outcome) = finish(run).await;
    canceller.cancel();
    assert_eq!(outcome, Outcome::exit_code(4));
}

#[tokio::test(flavor = "multi_thread")]
async fn sigkill_is_not_starved_by_a_flood_of_output() {
    let sup = supervisor(300);
    let mut s = sh("trap '' TERM; exec yes");
    s.timeout = Duration::from_millis(300);
    s.max_output = 1 << 30;
    let started = Instant::now();
    let (_, outcome) = finish(start(&sup, &s)).await;
    assert_eq!(outcome, Outcome::TimedOut);
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "took {:?}",
        started.elapsed()
    );
}

/// With other runs live, an orphan is the run's if it is in the run's
/// process group, even without the marker; the escapee below it is found
/// through it.
#[tokio::test(flavor = "multi_thread")]
async fn unmarked_escapee_under_an_unmarked_group_member_dies() {
    let sup = supervisor(300);
    let other = start(&sup, &sh("exec sleep 1000"));
    let dir = tempfile::tempdir().unwrap();
    let mut s = sh(concat!(
        "( exec env -i /bin/sh -c 'setsid /bin/sh -c \"echo \\$\\$ > pid; exec /bin/sleep 1000\" & exec /bin/sleep 1000' ) & ",
        "while [ ! -s pid ]; do sleep 0.01; done; cat pid"
    ));
    s.cwd = dir.path().to_path_buf();
    ends_leaving_nothing(&sup, &s, Outcome::Completed).await;
    other.canceller().cancel();
    assert_eq!(finish(other).await.1, Outcome::Cancelled);
}
