//! stdin delivery and PTY runs.

use warden_core::{Outcome, StdinMode, Terminal};
use warden_exec::{RunEvent, Stream};

use super::harness::*;

#[tokio::test(flavor = "multi_thread")]
async fn stdin_is_closed_by_default() {
    let sup = supervisor(1000);
    let (chunks, outcome) = finish(start(&sup, &sh("read x || echo eof"))).await;
    assert_eq!(outcome, Outcome::Completed);
    assert_eq!(text(&chunks, Stream::Stdout), "eof\n");
}

#[tokio::test(flavor = "multi_thread")]
async fn open_stdin_delivers_an_answer() {
    let sup = supervisor(1000);
    let mut s = sh("echo ready; read x; echo got $x");
    s.stdin = StdinMode::Open;
    let mut run = start(&sup, &s);
    let mut stdin = run.take_stdin().unwrap();
    assert!(matches!(run.next().await, Some(RunEvent::Output(_))));
    stdin.write_all(b"yes\n").await.unwrap();
    let (chunks, outcome) = finish(run).await;
    assert_eq!(outcome, Outcome::Completed);
    assert_eq!(text(&chunks, Stream::Stdout), "got yes\n");
}

#[tokio::test(flavor = "multi_thread")]
async fn pty_mode_is_a_terminal_and_takes_input() {
    let sup = supervisor(1000);
    let mut s = sh(
        "test -t 0 && test -t 1 && echo tty; printf 'Continue? [y/N] '; read a; echo \"answer=$a\"; exit 2",
    );
    s.terminal = Terminal::Pty;
    s.stdin = StdinMode::Open;
    let mut run = start(&sup, &s);
    let mut stdin = run.take_stdin().unwrap();
    let mut seen = String::new();
    while !seen.contains("[y/N]") {
        match run.next().await {
            Some(RunEvent::Output(c)) => seen.push_str(&String::from_utf8_lossy(&c.data)),
            other => panic!("unexpected {other:?} after {seen:?}"),
        }
    }
    assert!(seen.starts_with("tty\r\n"), "{seen:?}");
    stdin.write_all(b"y\n").await.unwrap();
    let (chunks, outcome) = finish(run).await;
    assert_eq!(outcome, Outcome::exit_code(2));
    assert!(text(&chunks, Stream::Stdout).contains("answer=y"));
}

#[tokio::test(flavor = "multi_thread")]
async fn pty_mode_times_out_like_pipes() {
    let sup = supervisor(200);
    let mut s = sh("sleep 1000");
    s.terminal = Terminal::Pty;
    s.timeout = std::time::Duration::from_millis(300);
    let (_, outcome) = finish(start(&sup, &s)).await;
    assert_eq!(outcome, Outcome::TimedOut);
}

/// A write the program never reads must not stall the supervisor: the PTY
/// master is non-blocking, so the deadline still fires on a one-thread runtime.
#[test]
fn a_stuck_pty_write_does_not_block_the_deadline() {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let outcome = rt.block_on(async {
            let sup = supervisor(200);
            let mut s = sh("exec sleep 1000");
            s.terminal = Terminal::Pty;
            s.stdin = StdinMode::Open;
            s.timeout = std::time::Duration::from_millis(500);
            let mut run = start(&sup, &s);
            let mut stdin = run.take_stdin().unwrap();
            tokio::spawn(async move {
                let _ = stdin.write_all(&b"y\n".repeat(1 << 20)).await;
            });
            finish(run).await.1
        });
        let _ = tx.send(outcome);
    });
    let outcome = rx
        .recv_timeout(std::time::Duration::from_secs(20))
        .expect("the runtime was blocked by a PTY write");
    assert_eq!(outcome, Outcome::TimedOut);
}
