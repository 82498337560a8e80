//! What `/proc` says about one process: whether it still runs, and whether
//! it carries a run's marker.
//!
//! Both are read while the process changes under us, so the answer can be
//! "not yet": inside `execve` its new environment is not laid out, and on its
//! way out its memory is gone (and its files may already be closed) before it
//! becomes a zombie. Such a process is [`Marked::InsideExec`] or
//! [`Marked::Exiting`]; looking again shortly answers.

use std::io::Read;

/// Kernel task flags (`/proc/<pid>/stat` field 9).
const PF_EXITING: u32 = 0x4;
const PF_KTHREAD: u32 = 0x0020_0000;

/// The first read of an environment; a larger one is read again whole.
const ENV_READ: usize = 64 * 1024;

/// What `/proc/<pid>/stat` says about a process (proc_pid_stat(5)).
pub(crate) struct Stat {
    /// The state letter (`Z` zombie, `X` being reaped) of the main thread,
    /// or of the thread whose directory was read.
    pub(crate) state: u8,
    pub(crate) pgrp: i32,
    flags: u32,
    /// Live threads, the main one included even once it exited.
    threads: u32,
    /// Where its code starts: 0 while it has no memory, and inside `execve`
    /// until the new image is laid out (set after its environment is).
    start_code: u64,
    /// The size of its environment (0 when empty, or hidden from us).
    env_size: u64,
}

impl Stat {
    /// Gone for good: being reaped, or a zombie with no thread left. A
    /// process whose main thread exited while others run shows `Z` but is
    /// not dead.
    pub(crate) fn dead(&self) -> bool {
        self.state == b'X' || (self.state == b'Z' && self.threads <= 1)
    }

    fn exiting(&self) -> bool {
        self.flags & PF_EXITING != 0
    }

    fn kernel_thread(&self) -> bool {
        self.flags & PF_KTHREAD != 0
    }
}

/// `/proc/<pid>/stat`, or `None` once the process is gone.
pub(crate) fn stat(pid: i32) -> Option<Stat> {
    stat_at(&format!("/proc/{pid}"))
}

fn stat_at(dir: &str) -> Option<Stat> {
    let s = std::fs::read(format!("{dir}/stat")).ok()?;
    // The command name may hold spaces and parentheses: fields start after the last ')'.
    let close = s.iter().rposition(|&b| b == b')')?;
    let rest = std::str::from_utf8(s.get(close + 2..)?).ok()?;
    let fields: Vec<&str> = rest.split_ascii_whitespace().collect();
    let field = |n: usize| fields.get(n - 3).copied();
    let number = |n: usize| field(n).and_then(|f| f.parse::<u64>().ok()).unwrap_or(0);
    Some(Stat {
        state: *field(3)?.as_bytes().first()?,
        pgrp: field(5)?.parse().ok()?,
        flags: field(9)?.parse().ok()?,
        threads: field(20)?.parse().ok()?,
        start_code: number(26),
        env_size: number(51).saturating_sub(number(50)),
    })
}

/// Whether a process carries a run's marker.
#[derive(Debug, PartialEq)]
pub(crate) enum Marked {
    Yes,
    /// It does not, or it cannot be read (a non-dumpable process such as
    /// ssh-agent, a setuid one), or it was replaced (`env -i`, or a program
    /// that writes over its environment to retitle itself).
    No,
    /// Cannot be told yet: inside `execve`, its new environment not laid out.
    InsideExec,
    /// Cannot be told yet: exiting, its environment gone.
    Exiting,
}

/// Whether process `pid`, whose [`stat`] is `stat`, carries `marker`
/// (`NAME=value`) in its environment.
pub(crate) fn marked(pid: i32, stat: &Stat, marker: &[u8]) -> Marked {
    if stat.state == b'Z' && stat.threads > 1 {
        // Its main thread exited; its memory is read through a live thread.
        through_threads(pid, marker)
    } else {
        marked_at(&format!("/proc/{pid}"), marker)
    }
}

/// Reads the marker through the threads of a process whose main thread
/// exited; one that vanishes meanwhile is passed over.
fn through_threads(pid: i32, marker: &[u8]) -> Marked {
    let tids: Vec<i32> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|dir| {
            dir.flatten()
                .filter_map(|e| e.file_name().to_str()?.parse().ok())
                .filter(|&tid| tid != pid)
                .collect()
        })
        .unwrap_or_default();
    for tid in tids {
        let dir = format!("/proc/{pid}/task/{tid}");
        match marked_at(&dir, marker) {
            Marked::No if stat_at(&dir).is_none_or(|s| s.dead()) => continue,
            told => return told,
        }
    }
    match stat(pid) {
        Some(s) if s.state == b'Z' && s.threads > 1 => Marked::Exiting,
        _ => Marked::No,
    }
}

fn marked_at(dir: &str, marker: &[u8]) -> Marked {
    // Twice: a read may come on the image an execve just replaced.
    for _ in 0..2 {
        let readable = match read_environ(dir) {
            Ok(env) if !env.is_empty() => {
                let carries = env.split(|&b| b == 0).any(|kv| kv == marker);
                return if carries { Marked::Yes } else { Marked::No };
            }
            Ok(_) => true,
            Err(_) => false,
        };
        match stat_at(dir) {
            None => return Marked::No,
            Some(s) if s.kernel_thread() || s.dead() => return Marked::No,
            Some(s) if s.exiting() => return Marked::Exiting,
            Some(_) if !readable => return Marked::No,
            Some(s) if s.start_code == 0 => return Marked::InsideExec,
            // Laid out with nothing in it: `env -i`.
            Some(s) if s.env_size == 0 => return Marked::No,
            // Laid out with something in it, yet read empty: read too early.
            Some(_) => {}
        }
    }
    Marked::InsideExec
}

/// A process's environment in one read where it fits: the file reads the
/// memory the process had when it was opened, and after an `execve` that
/// memory is gone and the rest of a read in parts is cut off.
fn read_environ(dir: &str) -> std::io::Result<Vec<u8>> {
    let once = |size: usize| -> std::io::Result<Vec<u8>> {
        let mut env = vec![0; size];
        let n = std::fs::File::open(format!("{dir}/environ"))?.read(&mut env)?;
        env.truncate(n);
        Ok(env)
    };
    let env = once(ENV_READ)?;
    if env.len() < ENV_READ {
        return Ok(env);
    }
    let size = stat_at(dir).map_or(0, |s| s.env_size as usize);
    once(size.max(ENV_READ) * 2)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    /// [`marked`] with the process's stat read now.
    fn marked_now(pid: i32, marker: &[u8]) -> Marked {
        stat(pid).map_or(Marked::No, |s| marked(pid, &s, marker))
    }

    /// A child killed and reaped when the test ends, passed or not.
    pub(crate) struct Reaped(pub(crate) std::process::Child);

    impl Drop for Reaped {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    /// Spawns `sh -c script` (the script is also its `$0`) with `NAME=value`
    /// from `marker` and waits until it reads as marked.
    fn marked_child(script: &str, marker: &str) -> Reaped {
        let (name, value) = marker.split_once('=').unwrap();
        let child = Reaped(
            std::process::Command::new("sh")
                .args(["-c", script, script])
                .env(name, value)
                .spawn()
                .unwrap(),
        );
        let until = Instant::now() + Duration::from_secs(5);
        while marked_now(child.0.id() as i32, marker.as_bytes()) != Marked::Yes {
            assert!(Instant::now() < until, "never read the marker");
        }
        child
    }

    #[test]
    fn a_process_inside_execve_is_never_taken_for_unmarked() {
        // A shell that execs itself forever spends part of its time with its
        // new environment not laid out yet.
        let child = marked_child("exec sh -c \"$0\" \"$0\"", "WARDEN_TEST_MARK=exec");
        let pid = child.0.id() as i32;
        let mut unsettled = 0;
        let until = Instant::now() + Duration::from_secs(2);
        while Instant::now() < until && unsettled < 50 {
            match marked_now(pid, b"WARDEN_TEST_MARK=exec") {
                Marked::Yes => {}
                Marked::InsideExec => unsettled += 1,
                other => panic!("a re-exec'ing process read as {other:?}"),
            }
        }
        assert!(unsettled > 0, "never caught inside execve");
    }

    #[test]
    fn a_process_whose_main_thread_exited_is_alive_and_marked() {
        // python3 ends its main thread with pthread_exit; a second one runs on.
        let script = "exec python3 -c 'import ctypes, threading, time
threading.Thread(target=time.sleep, args=(100,)).start()
ctypes.CDLL(None).pthread_exit(None)'";
        let child = marked_child(script, "WARDEN_TEST_MARK=threads");
        let pid = child.0.id() as i32;
        let until = Instant::now() + Duration::from_secs(5);
        while stat(pid).unwrap().state != b'Z' {
            assert!(
                Instant::now() < until,
                "the main thread never exited (is python3 with ctypes on PATH?)"
            );
        }
        assert!(!stat(pid).unwrap().dead());
        assert_eq!(marked_now(pid, b"WARDEN_TEST_MARK=threads"), Marked::Yes);
    }

    #[test]
    fn an_empty_environment_is_unmarked_once_its_program_runs() {
        let child = Reaped(
            std::process::Command::new("sleep")
                .arg("100")
                .env_clear()
                .spawn()
                .unwrap(),
        );
        let pid = child.0.id() as i32;
        let until = Instant::now() + Duration::from_secs(5);
        let mut last = marked_now(pid, b"X=1");
        while last != Marked::No && Instant::now() < until {
            last = marked_now(pid, b"X=1");
        }
        assert_eq!(last, Marked::No);
        assert_eq!(marked_now(pid, b"X=1"), Marked::No);
    }

    #[test]
    fn a_large_environment_is_read_whole() {
        // Three variables of most of ENV_READ each (one may not pass 128 KiB),
        // sorted before the marker.
        let big = "x".repeat(ENV_READ - 100);
        let child = Reaped(
            std::process::Command::new("sleep")
                .arg("100")
                .envs((1..=3).map(|i| (format!("WARDEN_TEST_BIG{i}"), &big)))
                .env("WARDEN_TEST_MARK", "big")
                .spawn()
                .unwrap(),
        );
        let pid = child.0.id() as i32;
        let until = Instant::now() + Duration::from_secs(5);
        while marked_now(pid, b"WARDEN_TEST_MARK=big") != Marked::Yes {
            assert!(
                Instant::now() < until,
                "the marker after a large variable was never read"
            );
        }
    }
}
