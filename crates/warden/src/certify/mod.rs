//! Certification of the confined tier: deterministic escape probes with no
//! model and no network beyond a loopback listener the certifier opens.
//!
//! Each probe runs twice, unconfined (the baseline, which must succeed, or
//! the probe proves nothing) and confined (which must be refused, or for the
//! controls, allowed). The certificate binds the results to this binary's
//! SHA-256, the kernel release and the Landlock ABI, and expires after two
//! hours; the confined tier is advertised only while one is valid.

mod probe;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use anyhow::Context;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use warden_core::Timestamp;
use warden_core::confine::{Policy, Profile};
use warden_exec::confine::Support;

use probe::Action;
pub use probe::{Observed, ProbeArgs, main as probe_main};

/// How long a certificate stays valid.
pub const VALIDITY: Duration = Duration::from_secs(2 * 3600);

/// What a probe must observe when confined.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Expect {
    Denied,
    /// A control: proves the sandbox is not simply refusing everything.
    Allowed,
}

/// One probe's evidence.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbeResult {
    pub name: String,
    pub profile: Profile,
    pub action: Action,
    pub expect: Expect,
    pub baseline: Observed,
    pub confined: Observed,
    pub passed: bool,
}

/// The stored proof that this binary confines runs on this kernel.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Certificate {
    pub binary: PathBuf,
    pub binary_sha256: String,
    pub kernel_release: String,
    pub landlock_abi: Option<u32>,
    pub created_at: Timestamp,
    pub expires_at: Timestamp,
    /// Every probe passed.
    pub passed: bool,
    pub probes: Vec<ProbeResult>,
    /// System calls the seccomp filter is configured to refuse in every
    /// profile (configuration, not observation: the probes observe
    /// `unshare`, `ptrace` and Unix sockets among them).
    pub filter_refuses: Vec<String>,
}

/// Where the certificate lives.
pub fn certificate_path(home: &Path) -> PathBuf {
    home.join("confinement").join("certificate.json")
}

/// SHA-256 of the running binary (computed once).
pub fn binary_sha256() -> anyhow::Result<&'static str> {
    static HASH: OnceLock<String> = OnceLock::new();
    if let Some(h) = HASH.get() {
        return Ok(h);
    }
    let exe = std::env::current_exe().context("locating the warden binary")?;
    // Streamed: the binary is large and the server's memory stays small.
    let mut file =
        std::fs::File::open(&exe).with_context(|| format!("reading {}", exe.display()))?;
    let mut hasher = Sha256::new();
    std::io::copy(&mut file, &mut hasher).with_context(|| format!("reading {}", exe.display()))?;
    Ok(HASH.get_or_init(|| hex::encode(hasher.finalize())))
}

impl Certificate {
    /// Why this certificate does not vouch for the running binary on this
    /// kernel now; `Ok` when it does.
    pub fn check(&self, now: Timestamp) -> Result<(), String> {
        let sha = binary_sha256().map_err(|e| format!("{e:#}"))?;
        if self.binary_sha256 != sha {
            return Err(format!(
                "the certificate is for binary {} (sha256 {}), not the running one (sha256 {sha})",
                self.binary.display(),
                self.binary_sha256
            ));
        }
        let support = Support::probe();
        if self.kernel_release != support.kernel_release
            || self.landlock_abi != support.landlock_abi
        {
            return Err(format!(
                "the certificate is for kernel {} with Landlock ABI {:?}; this is {} with {:?}",
                self.kernel_release,
                self.landlock_abi,
                support.kernel_release,
                support.landlock_abi
            ));
        }
        if now >= self.expires_at {
            return Err(format!("the certificate expired at {}", self.expires_at));
        }
        if !self.passed {
            let failed: Vec<&str> = self
                .probes
                .iter()
                .filter(|p| !p.passed)
                .map(|p| p.name.as_str())
                .collect();
            return Err(format!("probes failed: {}", failed.join(", ")));
        }
        Ok(())
    }
}

/// Loads the stored certificate and checks it.
pub fn current(home: &Path) -> Result<Certificate, String> {
    let path = certificate_path(home);
    let text = std::fs::read(&path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => "no certificate (run `warden certify`)".to_owned(),
        _ => format!("reading {}: {e}", path.display()),
    })?;
    let cert: Certificate =
        serde_json::from_slice(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    cert.check(Timestamp::now())?;
    Ok(cert)
}

/// Runs every probe and stores the certificate (passed or not). Blocking:
/// it starts about fifty short processes.
pub fn certify(home: &Path) -> anyhow::Result<Certificate> {
    let exe = std::env::current_exe().context("locating the warden binary")?;
    let sha = binary_sha256()?.to_owned();
    let support = Support::probe();
    let root = tempfile::Builder::new()
        .prefix("warden-certify-")
        .tempdir()
        .context("creating the probe directory")?;
    let fx = Fixture::create(root.path())?;
    let listener =
        std::net::TcpListener::bind("127.0.0.1:0").context("opening the loopback listener")?;
    let addr = listener.local_addr()?.to_string();
    let udp =
        std::net::UdpSocket::bind("127.0.0.1:0").context("opening the loopback UDP socket")?;
    let udp_addr = udp.local_addr()?.to_string();

    let mut probes = Vec::new();
    for (name, profile, action, expect) in fx.probes(&addr, &udp_addr) {
        let baseline = run_probe(&exe, None, &fx, &action)?;
        cleanup(&action);
        let mut policy = Policy::for_profile(profile, fx.ws.clone());
        // The probe program is this binary: it may be read and run, nothing
        // else of its directory.
        policy.read_only.push(exe.clone());
        let confined = run_probe(&exe, Some(&policy), &fx, &action)?;
        cleanup(&action);
        let passed = baseline.allowed
            && match expect {
                Expect::Allowed => confined.allowed,
                Expect::Denied => is_refusal(&confined),
            };
        probes.push(ProbeResult {
            name: name.to_owned(),
            profile,
            action,
            expect,
            baseline,
            confined,
            passed,
        });
    }
    drop((listener, udp));
    let created_at = Timestamp::now();
    let cert = Certificate {
        binary: exe,
        binary_sha256: sha,
        kernel_release: support.kernel_release,
        landlock_abi: support.landlock_abi,
        created_at,
        expires_at: Timestamp::from_millis(
            created_at.as_millis() + u64::try_from(VALIDITY.as_millis()).unwrap_or(u64::MAX),
        ),
        passed: probes.iter().all(|p| p.passed),
        probes,
        filter_refuses: warden_exec::confine::denied_calls()
            .into_iter()
            .map(String::from)
            .collect(),
    };
    store(home, &cert)?;
    Ok(cert)
}

/// The errors by which the kernel refuses what a policy forbids. Anything
/// else (a missing file, a probe that crashed or never reported) proves
/// nothing and fails the probe.
const REFUSALS: [&str; 5] = ["EACCES", "EPERM", "EROFS", "EXDEV", "ENETUNREACH"];

fn is_refusal(o: &Observed) -> bool {
    !o.allowed && o.error.as_deref().is_some_and(|e| REFUSALS.contains(&e))
}

fn store(home: &Path, cert: &Certificate) -> anyhow::Result<()> {
    let path = certificate_path(home);
    let dir = path.parent().unwrap_or(home);
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let tmp = path.with_extension(format!(
        "json.{}.{}.tmp",
        std::process::id(),
        warden_core::RunId::new()
    ));
    std::fs::write(&tmp, serde_json::to_vec_pretty(cert)?)
        .with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, &path).with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

/// Removes what a successful write or link left, so the next run of the
/// probe meets the same state.
fn cleanup(action: &Action) {
    match action {
        Action::Write { path } | Action::Hardlink { link: path, .. } => {
            let _ = std::fs::remove_file(path);
        }
        _ => {}
    }
}

/// Runs one probe, confined when `policy` is given.
fn run_probe(
    exe: &Path,
    policy: Option<&Policy>,
    fx: &Fixture,
    action: &Action,
) -> anyhow::Result<Observed> {
    let mut cmd = Command::new(exe);
    if let Some(policy) = policy {
        cmd.arg("sandbox-exec")
            .arg("--policy")
            .arg(serde_json::to_string(policy)?)
            .arg("--")
            .arg(exe);
    }
    cmd.arg("sandbox-probe")
        .args(action.argv())
        .current_dir(&fx.ws)
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", &fx.home)
        .env("TMPDIR", &fx.tmp);
    let out = cmd
        .output()
        .with_context(|| format!("running probe {:?}", action.argv()))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    match stdout.lines().last().map(serde_json::from_str::<Observed>) {
        Some(Ok(o)) if out.status.success() => Ok(o),
        _ => Ok(Observed {
            allowed: false,
            error: Some(format!(
                "the probe did not report ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            )),
        }),
    }
}

/// The directories and files the probes aim at.
struct Fixture {
    ws: PathBuf,
    sibling: PathBuf,
    home: PathBuf,
    tmp: PathBuf,
    install: PathBuf,
}

/// Credential files the probes plant in a stand-in home directory.
const CREDENTIALS: [(&str, &str); 8] = [
    ("credential_ssh_key", ".ssh/id_ed25519"),
    ("credential_gitconfig", ".gitconfig"),
    ("credential_netrc", ".netrc"),
    ("credential_aws", ".aws/credentials"),
    (
        "credential_gcloud",
        ".config/gcloud/application_default_credentials.json",
    ),
    ("credential_azure", ".azure/msal_token_cache.json"),
    ("credential_docker", ".docker/config.json"),
    ("credential_kube", ".kube/config"),
];

impl Fixture {
    fn create(root: &Path) -> anyhow::Result<Self> {
        let fx = Self {
            ws: root.join("workspace"),
            sibling: root.join("sibling"),
            home: root.join("home"),
            tmp: root.join("tmp"),
            install: install_dir(root),
        };
        for d in [&fx.ws, &fx.sibling, &fx.home, &fx.tmp] {
            std::fs::create_dir_all(d)?;
        }
        std::fs::write(fx.sibling.join("secret.txt"), "secret")?;
        std::fs::write(fx.ws.join("file.txt"), "workspace file")?;
        std::os::unix::fs::symlink("../sibling/secret.txt", fx.ws.join("link-out"))?;
        std::os::unix::fs::symlink("../sibling", fx.ws.join("dir-out"))?;
        for (_, rel) in CREDENTIALS {
            let p = fx.home.join(rel);
            if let Some(parent) = p.parent() {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::write(&p, "not a real credential")?;
        }
        Ok(fx)
    }

    fn probes(&self, addr: &str, udp: &str) -> Vec<(&'static str, Profile, Action, Expect)> {
        use Expect::{Allowed, Denied};
        use Profile::{Edit, Readonly, Test};
        let read = |path: PathBuf| Action::Read { path };
        let write = |path: PathBuf| Action::Write { path };
        let secret = self.sibling.join("secret.txt");
        let mut probes = vec![
            (
                "workspace_read",
                Test,
                read(self.ws.join("file.txt")),
                Allowed,
            ),
            (
                "workspace_write_edit",
                Edit,
                write(self.ws.join("new.txt")),
                Allowed,
            ),
            ("scratch_write", Test, Action::WriteScratch, Allowed),
            ("background_process_edit", Edit, Action::Spawn, Allowed),
            (
                "workspace_write_test",
                Test,
                write(self.ws.join("new.txt")),
                Denied,
            ),
            (
                "workspace_write_readonly",
                Readonly,
                write(self.ws.join("new.txt")),
                Denied,
            ),
            (
                "background_process_readonly",
                Readonly,
                Action::Spawn,
                Allowed,
            ),
            (
                "workspace_chmod_readonly",
                Readonly,
                Action::Chmod {
                    path: self.ws.join("file.txt"),
                },
                Denied,
            ),
            ("sibling_read", Edit, read(secret.clone()), Denied),
            (
                "sibling_write",
                Edit,
                write(self.sibling.join("new.txt")),
                Denied,
            ),
            (
                "dotdot_read",
                Edit,
                read(self.ws.join("../sibling/secret.txt")),
                Denied,
            ),
            (
                "dotdot_write",
                Edit,
                write(self.ws.join("../sibling/new.txt")),
                Denied,
            ),
            ("symlink_read", Edit, read(self.ws.join("link-out")), Denied),
            (
                "symlink_write",
                Edit,
                write(self.ws.join("dir-out/new.txt")),
                Denied,
            ),
            (
                "hardlink_out",
                Edit,
                Action::Hardlink {
                    target: secret,
                    link: self.ws.join("hardlink.txt"),
                },
                Denied,
            ),
        ];
        for (name, rel) in CREDENTIALS {
            probes.push((name, Edit, read(self.home.join(rel)), Denied));
        }
        probes.extend([
            (
                "tcp_connect_loopback",
                Edit,
                Action::Connect {
                    addr: addr.to_owned(),
                },
                Denied,
            ),
            ("tcp_listen_loopback", Edit, Action::Listen, Denied),
            (
                "udp_send_loopback",
                Edit,
                Action::UdpSend {
                    addr: udp.to_owned(),
                },
                Denied,
            ),
            ("background_process_test", Test, Action::Spawn, Denied),
            (
                "chmod_outside",
                Edit,
                Action::Chmod {
                    path: self.sibling.join("secret.txt"),
                },
                Denied,
            ),
            ("namespace_escape", Edit, Action::Unshare, Denied),
            ("ptrace", Edit, Action::Ptrace, Denied),
            ("unix_socket", Edit, Action::UnixSocket, Denied),
            (
                "package_install_write",
                Edit,
                write(
                    self.install
                        .join(format!("warden-probe-{}", std::process::id())),
                ),
                Denied,
            ),
        ]);
        probes
    }
}

/// The install directory a package manager would write to: the system's
/// (`/usr/local/lib`) when this user may write there, else the user's own
/// (`~/.local/lib` of the stand-in home).
fn install_dir(root: &Path) -> PathBuf {
    let system = PathBuf::from("/usr/local/lib");
    let test = system.join(format!(".warden-certify-{}", std::process::id()));
    if std::fs::write(&test, b"").is_ok() {
        let _ = std::fs::remove_file(&test);
        return system;
    }
    let user = root.join("home/.local/lib/python3/site-packages");
    let _ = std::fs::create_dir_all(&user);
    user
}
