//! Configuration (CLI SPEC 8.3): `A2ACLI_*` settings from the environment,
//! a local `.env` (found by walking up from the working directory, or the
//! file named by `--config`) and the global `~/.config/a2a-cli/.env`.
//!
//! Precedence, highest first: flag, environment variable, local file,
//! global file, built-in default. Files never override the environment:
//! their values are only put in the process environment where it has none,
//! before the command line is parsed, so clap's own `flag > env` order
//! completes the chain. The tool stores configuration only; it never
//! records a task or context id.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::error::CliError;

/// Where a setting's value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// An explicit flag.
    Flag,
    /// A real environment variable.
    Env,
    /// A `.env` file.
    File(PathBuf),
    /// The built-in default.
    Default,
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Flag => f.write_str("flag"),
            Source::Env => f.write_str("environment"),
            Source::File(p) => write!(f, "file {}", p.display()),
            Source::Default => f.write_str("default"),
        }
    }
}

/// What loading the configuration files did.
#[derive(Debug, Clone, Default)]
pub struct Loaded {
    /// Variables set from a file, and which file.
    pub from_files: BTreeMap<String, PathBuf>,
    /// The local file (explicit `--config` or found `.env`), if any.
    pub local: Option<PathBuf>,
    /// The global file, if it exists.
    pub global: Option<PathBuf>,
    /// Warnings to print (world-readable secrets...).
    pub warnings: Vec<String>,
}

/// Variables holding secrets: never shown by `config show`, and files
/// holding them should not be readable by others.
pub const SECRET_VARS: &[&str] = &["A2ACLI_BEARER", "A2ACLI_API_KEY", "A2ACLI_SVC_PARAM"];

/// The directory of the global configuration.
pub fn global_dir() -> Option<PathBuf> {
    if let Some(x) = std::env::var_os("XDG_CONFIG_HOME").filter(|v| !v.is_empty()) {
        return Some(PathBuf::from(x).join("a2a-cli"));
    }
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config").join("a2a-cli"))
}

/// The command's data directory (the ledger, installed models):
/// `$XDG_DATA_HOME/a2a-cli`, else `~/.local/share/a2a-cli`.
pub fn data_dir() -> Option<PathBuf> {
    if let Some(x) = std::env::var_os("XDG_DATA_HOME").filter(|v| !v.is_empty()) {
        return Some(PathBuf::from(x).join("a2a-cli"));
    }
    std::env::var_os("HOME").map(|h| {
        PathBuf::from(h)
            .join(".local")
            .join("share")
            .join("a2a-cli")
    })
}

/// The directory of cached agent cards.
pub fn cache_dir() -> Option<PathBuf> {
    if let Some(x) = std::env::var_os("XDG_CACHE_HOME").filter(|v| !v.is_empty()) {
        return Some(PathBuf::from(x).join("a2a-cli").join("cards"));
    }
    std::env::var_os("HOME").map(|h| {
        PathBuf::from(h)
            .join(".cache")
            .join("a2a-cli")
            .join("cards")
    })
}

/// The `--config` value of the command line, if any (read before clap
/// parses, since the files must be loaded first).
pub fn explicit_config(args: &[OsString]) -> Option<PathBuf> {
    let mut it = args.iter().skip(1);
    while let Some(a) = it.next() {
        let s = a.to_string_lossy();
        if s == "--" {
            break;
        }
        if s == "--config" {
            return it.next().map(PathBuf::from);
        }
        if let Some(v) = s.strip_prefix("--config=") {
            return Some(PathBuf::from(v));
        }
    }
    std::env::var_os("A2ACLI_CONFIG")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

fn find_local_env() -> Option<PathBuf> {
    let mut dir = std::env::current_dir().ok()?;
    loop {
        let candidate = dir.join(".env");
        if candidate.is_file() {
            return Some(candidate);
        }
        if !dir.pop() {
            return None;
        }
    }
}

/// Loads the local and global files into the environment (without
/// overriding it). Must run before any other thread starts.
pub fn load(args: &[OsString]) -> Result<Loaded, CliError> {
    let mut loaded = Loaded::default();
    let local = match explicit_config(args) {
        Some(p) => {
            if !p.is_file() {
                return Err(CliError::usage(format!(
                    "--config {}: no such file",
                    p.display()
                )));
            }
            Some(p)
        }
        None => find_local_env(),
    };
    let global = global_dir().map(|d| d.join(".env")).filter(|p| p.is_file());
    for path in local.iter().chain(global.iter()) {
        let entries = dotenvy::from_path_iter(path).map_err(|e| {
            CliError::usage(format!(
                "cannot read configuration file {}: {e}",
                path.display()
            ))
        })?;
        let mut has_secret = false;
        for entry in entries {
            let (key, value) = entry
                .map_err(|e| CliError::usage(format!("invalid line in {}: {e}", path.display())))?;
            if !key.starts_with("A2ACLI_") {
                continue;
            }
            has_secret |= SECRET_VARS.contains(&key.as_str());
            if std::env::var_os(&key).is_some() {
                continue; // the environment (or an earlier, local file) wins
            }
            // SAFETY: called from `main` before the async runtime or any
            // other thread exists, so nothing reads the environment
            // concurrently.
            unsafe { std::env::set_var(&key, &value) };
            loaded.from_files.insert(key, path.clone());
        }
        if has_secret && world_readable(path) {
            loaded.warnings.push(format!(
                "{} holds credentials and is readable by other users: run chmod 600 {}",
                path.display(),
                path.display()
            ));
        }
    }
    loaded.local = local;
    loaded.global = global;
    Ok(loaded)
}

#[cfg(unix)]
fn world_readable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.permissions().mode() & 0o077 != 0)
}

#[cfg(not(unix))]
fn world_readable(_path: &Path) -> bool {
    false
}

/// Shows a value, hiding secrets.
pub fn display_value(var: &str, value: &str) -> String {
    if SECRET_VARS.contains(&var) && !value.is_empty() {
        "<redacted>".into()
    } else {
        value.to_owned()
    }
}
