//! The hidden commands that packaging uses (`scripts/release.sh`, the
//! `Containerfile`): `a2a man` renders the manual page, or with `--dir`
//! writes one page per visible command and subcommand; `a2a healthcheck`
//! exits 0 against a live `a2a serve` and 1, with a sentence, against a
//! port where nothing listens.

mod common;

use std::collections::BTreeSet;

use common::{Env, Serving};

/// The visible commands `a2a --help` lists (without `help`).
fn commands(env: &Env, args: &[&str]) -> BTreeSet<String> {
    let mut a = args.to_vec();
    a.push("--help");
    let out = env.run(&a);
    out.expect(0);
    out.stdout
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(str::to_owned)
        .collect()
}

#[test]
fn man_renders_the_page_and_one_per_command() {
    let env = Env::new();
    let out = env.run(&["man"]);
    out.expect(0);
    assert!(out.stdout.contains(".TH a2a 1"), "{}", out.stdout);
    assert!(out.stdout.contains("serve"), "the page lists the commands");

    let dir = env.home().join("man").join("man1");
    out_ok(&env, &["man", "--dir", dir.to_str().expect("a UTF-8 path")]);
    let written: BTreeSet<String> = std::fs::read_dir(&dir)
        .expect("the pages' directory")
        .map(|e| {
            e.expect("an entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    assert!(commands(&env, &[]).len() > 10);
    let mut expected = BTreeSet::new();
    pages(&env, &mut vec!["a2a".to_owned()], &mut expected);
    // Nothing missing, nothing more (the hidden commands have no page).
    assert_eq!(written, expected);
    assert!(written.contains("a2a-task-get.1") && written.contains("a2a-ledger-accept.1"));
    assert!(!written.contains("a2a-man.1") && !written.contains("a2a-healthcheck.1"));
    let page = std::fs::read_to_string(dir.join("a2a-task-get.1")).expect("a page");
    assert!(
        page.contains(".TH") && page.contains("a2a task get"),
        "{page}"
    );
}

/// The page names `a2a man --dir` should write for the command `path`
/// and, recursively, its visible subcommands.
fn pages(env: &Env, path: &mut Vec<String>, into: &mut BTreeSet<String>) {
    into.insert(format!("{}.1", path.join("-")));
    let args: Vec<&str> = path[1..].iter().map(String::as_str).collect();
    for sub in commands(env, &args) {
        path.push(sub);
        pages(env, path, into);
        path.pop();
    }
}

fn out_ok(env: &Env, args: &[&str]) {
    env.run(args).expect(0);
}

#[test]
fn healthcheck_answers_for_a_live_server_and_says_why_for_a_dead_port() {
    let env = Env::new();
    let serving = Serving::start(&env, &["--agent", "echo"]);
    let url = format!("{}/healthz", serving.base());
    let out = env.run(&["healthcheck", "--url", &url]);
    out.expect(0);
    assert!(
        out.stdout.contains(&url) && out.stdout.contains("200"),
        "{}",
        out.stdout
    );

    // The default URL: the port `a2a serve` reads from A2A_SERVE_PORT.
    let port = serving
        .base()
        .rsplit(':')
        .next()
        .expect("a port")
        .to_owned();
    let with_port = Env::new().with_env("A2A_SERVE_PORT", &port);
    with_port.run(&["healthcheck"]).expect(0);
    drop(serving);

    // A port where nothing listens.
    let dead = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("a port")
        .local_addr()
        .expect("its address")
        .port();
    let url = format!("http://127.0.0.1:{dead}/healthz");
    let out = env.run(&["healthcheck", "--url", &url, "--timeout", "10s"]);
    out.expect(1);
    assert!(out.stdout.is_empty(), "{}", out.stdout);
    assert!(
        out.stderr.contains(&url) && out.stderr.contains("nothing answers there"),
        "{}",
        out.stderr
    );
}
