//! Hidden commands for packaging: `a2a man` (the manual pages, generated
//! from the clap definitions by `clap_mangen`) and `a2a healthcheck` (a
//! `GET /healthz` probe for a container's HEALTHCHECK, where there is no
//! curl). `scripts/release.sh` and the `Containerfile` use them.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Args;

use crate::error::{CliError, exit};

/// `a2a man`: the manual page of `a2a` on standard output, or with `--dir`
/// one page per command (`a2a.1`, `a2a-serve.1`, `a2a-task-get.1`...).
#[derive(Args, Debug)]
pub struct ManArgs {
    /// Write every page (a2a.1 and one per subcommand) into this directory.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

/// `a2a healthcheck`: exit 0 when `/healthz` answers 2xx (the URL and the
/// status on stdout), 1 otherwise (the URL and why on stderr).
#[derive(Args, Debug)]
pub struct HealthcheckArgs {
    /// The URL to probe [default: http://127.0.0.1:$A2A_SERVE_PORT/healthz,
    /// port 8080 when the variable is not set].
    #[arg(long, value_name = "URL")]
    pub url: Option<String>,
    /// How long to wait for the answer.
    #[arg(long, default_value = "5s", value_parser = crate::parse_duration, value_name = "DURATION")]
    pub timeout: Duration,
}

pub fn man(cmd: clap::Command, args: &ManArgs) -> Result<u8, CliError> {
    match &args.dir {
        Some(dir) => {
            std::fs::create_dir_all(dir).map_err(|e| io_error(dir, &e))?;
            write_pages(cmd, dir, "a2a")?;
            Ok(exit::OK)
        }
        None => {
            let mut page = Vec::new();
            clap_mangen::Man::new(cmd)
                .render(&mut page)
                .map_err(|e| CliError::internal(format!("cannot render the manual page: {e}")))?;
            let mut out = std::io::stdout().lock();
            out.write_all(&page)
                .and_then(|()| out.flush())
                .map_err(|e| CliError::internal(format!("cannot write the manual page: {e}")))?;
            Ok(exit::OK)
        }
    }
}

/// One page for `cmd` (named `name`) and, recursively, for each visible
/// subcommand (`name-sub`).
fn write_pages(cmd: clap::Command, dir: &Path, name: &str) -> Result<(), CliError> {
    let cmd = cmd.display_name(name).bin_name(name.replace('-', " "));
    let mut page = Vec::new();
    clap_mangen::Man::new(cmd.clone())
        .render(&mut page)
        .map_err(|e| CliError::internal(format!("cannot render the manual page: {e}")))?;
    let path = dir.join(format!("{name}.1"));
    std::fs::write(&path, page).map_err(|e| io_error(&path, &e))?;
    for sub in cmd.get_subcommands() {
        if sub.is_hide_set() || sub.get_name() == "help" {
            continue;
        }
        write_pages(sub.clone(), dir, &format!("{name}-{}", sub.get_name()))?;
    }
    Ok(())
}

fn io_error(path: &Path, e: &std::io::Error) -> CliError {
    CliError::internal(format!("cannot write {}: {e}", path.display()))
}

/// The default probe URL: the port `a2a serve` reads from the environment.
fn default_url() -> String {
    let port = std::env::var("A2A_SERVE_PORT")
        .ok()
        .and_then(|p| p.trim().parse::<u16>().ok())
        .unwrap_or(8080);
    format!("http://127.0.0.1:{port}/healthz")
}

pub async fn healthcheck(args: &HealthcheckArgs) -> Result<u8, CliError> {
    let url = args.url.clone().unwrap_or_else(default_url);
    agentwire_client::install_crypto_provider();
    let http = reqwest::Client::builder()
        .timeout(args.timeout)
        .build()
        .map_err(|e| CliError::internal(format!("cannot build the HTTP client: {e}")))?;
    match http.get(&url).send().await {
        Ok(r) if r.status().is_success() => {
            println!("{url}: {}", r.status());
            Ok(exit::OK)
        }
        Ok(r) => {
            eprintln!("{url}: {}", r.status());
            Ok(exit::FAILURE)
        }
        Err(e) => {
            let why = if e.is_timeout() {
                format!(
                    "no answer within {}",
                    humantime::format_duration(args.timeout)
                )
            } else if e.is_connect() {
                "nothing answers there (is `a2a serve` running on that port?)".to_owned()
            } else {
                format!("no answer ({e})")
            };
            eprintln!("{url}: {why}");
            Ok(exit::FAILURE)
        }
    }
}
