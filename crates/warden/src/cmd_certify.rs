//! `warden certify`: prove the confined tier on this host and store the
//! certificate under `WARDEN_HOME`.

use std::process::ExitCode;

use crate::certify::{self, Expect};
use crate::cli::CertifyArgs;

pub async fn main(args: CertifyArgs) -> anyhow::Result<ExitCode> {
    let home = args
        .home
        .unwrap_or_else(|| std::path::PathBuf::from(".warden"));
    if args.check {
        return Ok(match certify::current(&home) {
            Ok(cert) => {
                println!(
                    "valid: certificate for sha256 {} until {}",
                    cert.binary_sha256, cert.expires_at
                );
                ExitCode::SUCCESS
            }
            Err(why) => {
                println!("not valid: {why}");
                ExitCode::from(1)
            }
        });
    }
    let h = home.clone();
    let cert = tokio::task::spawn_blocking(move || certify::certify(&h)).await??;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&cert)?);
    } else {
        for p in &cert.probes {
            let want = match p.expect {
                Expect::Denied => "denied",
                Expect::Allowed => "allowed",
            };
            let got = |o: &certify::Observed| match (&o.allowed, &o.error) {
                (true, _) => "allowed".to_owned(),
                (false, Some(e)) => format!("denied ({e})"),
                (false, None) => "denied".to_owned(),
            };
            println!(
                "{} {:<28} {:<9} unconfined: {:<18} confined: {} (want {want})",
                if p.passed { "ok  " } else { "FAIL" },
                p.name,
                p.profile.as_str(),
                got(&p.baseline),
                got(&p.confined),
            );
        }
        println!(
            "\n{} of {} probes passed; kernel {}, Landlock ABI {}, binary sha256 {}",
            cert.probes.iter().filter(|p| p.passed).count(),
            cert.probes.len(),
            cert.kernel_release,
            cert.landlock_abi
                .map_or_else(|| "none".to_owned(), |v| v.to_string()),
            cert.binary_sha256,
        );
        let path = certify::certificate_path(&home);
        if cert.passed {
            println!(
                "certificate stored in {} (valid until {})",
                path.display(),
                cert.expires_at
            );
        } else {
            println!(
                "the confined tier is NOT certified on this host; evidence stored in {}",
                path.display()
            );
        }
    }
    Ok(if cert.passed {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
