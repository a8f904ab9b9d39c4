//! The README as a newcomer follows it: a new project that depends on
//! `agentwire` by path (the dependencies of "Install", as written there)
//! builds the agent of "Writing an agent" and runs its in-process test
//! (`bind(...).spawn()`), offline, with the versions of this workspace's
//! `Cargo.lock`, and the build prints no warning (none from this project's
//! crates either, such as a deprecated API of a dependency).
//!
//! And every page whose Rust code a reader may copy (README.md, docs/*.md)
//! is compiled as a doctest of this crate (listed in `src/lib.rs`).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use pulldown_cmark::{CodeBlockKind, Event, Parser, Tag, TagEnd};

/// A first build of the new project compiles the project's crates again
/// (their dependencies are shared with the workspace's target directory).
const BUILD_LIMIT: Duration = Duration::from_secs(30 * 60);

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("the workspace root")
}

/// The fenced blocks of a Markdown text: (info string, text).
fn blocks(markdown: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut current: Option<(String, String)> = None;
    for event in Parser::new(markdown) {
        match event {
            Event::Start(Tag::CodeBlock(CodeBlockKind::Fenced(info))) => {
                current = Some((info.to_string(), String::new()));
            }
            Event::Text(t) => {
                if let Some((_, text)) = current.as_mut() {
                    text.push_str(&t);
                }
            }
            Event::End(TagEnd::CodeBlock) => out.extend(current.take()),
            _ => {}
        }
    }
    out
}

fn is_rust(info: &str) -> bool {
    info.split(|c: char| c == ',' || c.is_whitespace())
        .next()
        .is_some_and(|lang| lang == "rust")
}

/// The block of `lang` holding every piece of `needles`.
fn block_with(markdown: &str, lang: &str, needles: &[&str]) -> String {
    blocks(markdown)
        .into_iter()
        .find(|(info, text)| {
            info.split(|c: char| c == ',' || c.is_whitespace()).next() == Some(lang)
                && needles.iter().all(|n| text.contains(n))
        })
        .map(|(_, text)| text)
        .unwrap_or_else(|| panic!("README.md has no `{lang}` block with {needles:?}"))
}

/// A doctest's code as a program has it: its hidden lines (`# ...`) shown.
fn unhide(code: &str) -> String {
    code.lines()
        .map(|l| {
            let t = l.trim_start();
            if t == "#" {
                ""
            } else if let Some(rest) = t.strip_prefix("# ") {
                rest
            } else {
                l
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

#[test]
fn every_page_with_rust_code_is_a_doctest() {
    let root = root();
    let lib = std::fs::read_to_string(root.join("crates/agentwire/src/lib.rs")).expect("lib.rs");
    let mut pages = vec![root.join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .expect("docs/")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    pages.extend(docs);
    let mut missing = Vec::new();
    for page in pages {
        let text = std::fs::read_to_string(&page).expect("a page");
        let rel = page
            .strip_prefix(&root)
            .unwrap_or(&page)
            .display()
            .to_string();
        if blocks(&text).iter().any(|(info, _)| is_rust(info))
            && !lib.contains(&format!("include_str!(\"../../../{rel}\")"))
        {
            missing.push(rel);
        }
    }
    assert!(
        missing.is_empty(),
        "pages with Rust code not compiled as doctests (add them to crates/agentwire/src/lib.rs): {missing:?}"
    );
}

#[test]
fn a_new_project_builds_and_tests_the_readme_agent_without_warnings() {
    let root = root();
    let readme = std::fs::read_to_string(root.join("README.md")).expect("README.md");
    let deps = block_with(&readme, "toml", &["agentwire = { path = "]);
    let agent = block_with(&readme, "rust", &["struct Echo", "#[tokio::main]"]);
    let test = block_with(&readme, "rust", &[".spawn()", "#[tokio::test]"]);

    // The dependencies as the README writes them, with the path of this
    // clone.
    let facade = root.join("crates/agentwire");
    let deps = deps.replace(
        "../agentwire/crates/agentwire",
        &facade.display().to_string(),
    );
    assert!(deps.contains(&facade.display().to_string()), "{deps}");

    let dir = tempfile::tempdir().expect("a temporary directory");
    let project = dir.path().join("my-agent");
    std::fs::create_dir_all(project.join("src")).expect("src/");
    std::fs::create_dir_all(project.join("tests")).expect("tests/");
    // The profile of the workspace, so that the dependencies it built are
    // reused; `[workspace]` keeps the project on its own.
    let manifest = format!(
        "[package]\nname = \"my-agent\"\nversion = \"0.1.0\"\nedition = \"2024\"\n\n\
         {deps}\n\
         [workspace]\n\n\
         [profile.dev]\ndebug = \"line-tables-only\"\n\n\
         [profile.dev.package.\"*\"]\ndebug = false\n"
    );
    std::fs::write(project.join("Cargo.toml"), manifest).expect("Cargo.toml");
    std::fs::write(project.join("src/main.rs"), unhide(&agent)).expect("main.rs");
    std::fs::write(project.join("tests/echo.rs"), unhide(&test)).expect("tests/echo.rs");
    // The versions this workspace is tested with (offline: all in the
    // local registry cache).
    std::fs::copy(root.join("Cargo.lock"), project.join("Cargo.lock")).expect("Cargo.lock");

    // The workspace's target directory: <target>/<profile>/deps/<this test>.
    let exe = std::env::current_exe().expect("this test's path");
    let target = exe
        .ancestors()
        .nth(3)
        .expect("the target directory")
        .to_path_buf();
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.args(["test", "--offline", "--color", "never"])
        .current_dir(&project)
        .env("CARGO_TARGET_DIR", &target)
        .env("CARGO_TERM_COLOR", "never")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // What `cargo test` set for this test is not the new project's.
    for (k, _) in std::env::vars_os() {
        let k = k.to_string_lossy().into_owned();
        if k.starts_with("CARGO_PKG_")
            || k.starts_with("CARGO_CRATE_")
            || k.starts_with("CARGO_BIN_")
            || k == "CARGO_MANIFEST_DIR"
            || k == "CARGO_MANIFEST_PATH"
            || k == "CARGO_PRIMARY_PACKAGE"
        {
            cmd.env_remove(&k);
        }
    }
    let mut child = cmd.spawn().expect("run cargo");
    let (mut out, mut err) = (
        child.stdout.take().expect("stdout"),
        child.stderr.take().expect("stderr"),
    );
    let out = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for cargo") {
            break status;
        }
        if started.elapsed() > BUILD_LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the new project did not build in {BUILD_LIMIT:?}");
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let (out, err) = (
        out.join().unwrap_or_default(),
        err.join().unwrap_or_default(),
    );
    assert!(
        status.success(),
        "cargo test in the new project failed:\n{err}\n{out}"
    );
    assert!(
        out.contains("test echo_repeats_the_text ... ok"),
        "the README's test did not run:\n{out}"
    );
    let warnings: Vec<&str> = err.lines().filter(|l| l.starts_with("warning")).collect();
    assert!(
        warnings.is_empty(),
        "the new project's build printed warnings:\n{err}"
    );
}
