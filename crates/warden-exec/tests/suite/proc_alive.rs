//! Whether a process is alive, read from `/proc` on its own (not through
//! the supervisor's code, which is what the tests check). Shared with the
//! warden crate's tests.

/// Whether a live process has this pid: not one being reaped (`X`), nor a
/// zombie (`Z`) unless threads other than its exited main one still run.
pub fn alive(pid: i32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    let Some((_, rest)) = stat.rsplit_once(") ") else {
        return false;
    };
    // Fields from the third (state); the 20th is the number of threads.
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let threads: u32 = fields.get(17).and_then(|t| t.parse().ok()).unwrap_or(1);
    match fields.first() {
        Some(&"X") => false,
        Some(&"Z") => threads > 1,
        Some(_) => true,
        None => false,
    }
}
