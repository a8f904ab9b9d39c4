//! `a2a serve` on every network interface (`--host 0.0.0.0`): it warns that
//! every task is served to anyone, and its agent card never advertises the
//! unspecified address (which no client can call): it advertises a
//! reachable one, or `--public-url`, and says to pass `--public-url`. And
//! the connection limits are options of `a2a serve`.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use common::*;

/// Bound on every wait.
const LIMIT: Duration = Duration::from_secs(30);

/// The agent card served on 127.0.0.1:`port`, as JSON.
fn card(port: u16) -> serde_json::Value {
    let mut tcp = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    tcp.set_read_timeout(Some(LIMIT)).unwrap();
    write!(
        tcp,
        "GET /.well-known/agent-card.json HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    tcp.read_to_string(&mut answer).expect("the card");
    let (_, body) = answer.split_once("\r\n\r\n").expect("a body");
    serde_json::from_str(body).expect("card JSON")
}

fn interface_urls(card: &serde_json::Value) -> Vec<String> {
    card["supportedInterfaces"]
        .as_array()
        .expect("interfaces")
        .iter()
        .map(|i| i["url"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[test]
fn every_interface_without_authentication_warns_and_never_advertises_0_0_0_0() {
    let env = Env::new();
    let serving = Serving::start(&env, &["--host", "0.0.0.0"]);
    let port = serving.port();
    assert!(
        !serving.stdout.contains("http://0.0.0.0"),
        "no unspecified address to call: {}",
        serving.stdout
    );
    let urls = interface_urls(&card(port));
    let err = serving.stop();
    assert!(!urls.is_empty());
    for url in &urls {
        assert!(
            !url.contains("0.0.0.0") && !url.contains("[::]"),
            "the card advertises a callable address: {url}"
        );
        assert!(url.contains(&format!(":{port}")), "{url}");
    }
    assert!(
        err.contains("warning:") && err.contains("anyone") && err.contains("authentication"),
        "a warning that every task is served to anyone: {err}"
    );
    assert!(
        err.contains("--public-url"),
        "a hint to pass --public-url: {err}"
    );
}

#[test]
fn every_interface_with_a_public_url_advertises_it() {
    let env = Env::new();
    let serving = Serving::start(
        &env,
        &[
            "--host",
            "0.0.0.0",
            "--public-url",
            "https://agent.example.com",
        ],
    );
    let urls = interface_urls(&card(serving.port()));
    let err = serving.stop();
    assert!(
        urls.iter()
            .all(|u| u.contains("agent.example.com") && !u.contains("0.0.0.0")),
        "{urls:?}"
    );
    assert!(err.contains("anyone"), "still warned: {err}");
    assert!(
        !err.contains("pass --public-url"),
        "no hint when it is given: {err}"
    );
}

#[test]
fn loopback_is_served_without_a_warning() {
    let env = Env::new();
    let serving = Serving::start(&env, &[]);
    let err = serving.stop();
    assert!(!err.contains("anyone"), "{err}");
}

#[test]
fn connection_limits_are_options_of_serve() {
    let env = Env::new();
    let help = env.run(&["serve", "--help"]);
    let help = help.stdout.as_str();
    for option in [
        "--request-head-timeout",
        "--body-read-timeout",
        "--idle-timeout",
        "--max-connections",
        "--max-connections-per-address",
    ] {
        assert!(help.contains(option), "{option} in the help:\n{help}");
        let var = format!(
            "A2A_SERVE_{}",
            option
                .trim_start_matches("--")
                .replace('-', "_")
                .to_uppercase()
        );
        assert!(help.contains(&var), "{var} in the help");
    }

    // A client that sends half a request head is disconnected after the
    // timeout given.
    let serving = Serving::start(&env, &["--request-head-timeout", "1s"]);
    let mut tcp = TcpStream::connect(("127.0.0.1", serving.port())).unwrap();
    tcp.set_read_timeout(Some(LIMIT)).unwrap();
    tcp.write_all(b"POST / HTTP/1.1\r\nhost: x\r\ncont")
        .unwrap();
    let mut rest = Vec::new();
    let closed = tcp.read_to_end(&mut rest);
    let _ = serving.stop();
    assert!(
        closed.is_ok() || closed.is_err_and(|e| e.kind() == std::io::ErrorKind::ConnectionReset),
        "disconnected by the server, not by the test's wait"
    );
}
