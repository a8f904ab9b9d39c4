//! `a2a auth login|status|logout` against a real OpenID provider (npm
//! `oidc-provider`, interop/oidc/provider.mjs) on loopback, and an
//! `a2a serve --auth-oidc ISSUER` that checks the tokens it issues. The
//! device flow's browser side (the verification page, the login and consent
//! forms of the provider's development interactions) is driven over HTTP by
//! [`Browser`], with a cookie jar of its own.
//! Needs node and `npm ci` in interop/oidc: ignored by default, run by
//! .ci/run (`cargo test -p agentwire-cli --test auth_login -- --ignored`).

mod common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use common::*;

const LIMIT: Duration = Duration::from_secs(30);

/// A child process killed on drop.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts a child and waits for the stdout line containing `marker`.
fn start(mut cmd: Command, marker: &'static str) -> (Proc, String) {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut child = cmd.spawn().expect("start the process");
    let out = child.stdout.take().expect("stdout");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if line.contains(marker) {
                let _ = tx.send(line);
            }
        }
    });
    let proc = Proc(child);
    let line = rx
        .recv_timeout(LIMIT)
        .unwrap_or_else(|_| panic!("no {marker:?} line within {LIMIT:?}"));
    (proc, line)
}

fn oidc_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../interop/oidc")
}

/// The provider and its issuer URL.
fn provider() -> (Proc, String) {
    provider_with(&[])
}

/// The provider with these environment variables (A2A_TOKEN_TTL...).
fn provider_with(vars: &[(&str, &str)]) -> (Proc, String) {
    let dir = oidc_dir();
    assert!(
        dir.join("node_modules").exists(),
        "run `npm ci` in interop/oidc first"
    );
    let mut cmd = Command::new("node");
    cmd.arg("provider.mjs").current_dir(&dir);
    for (k, v) in vars {
        cmd.env(k, v);
    }
    let (p, line) = start(cmd, "ISSUER ");
    let issuer = line.trim_start_matches("ISSUER ").trim().to_owned();
    (p, issuer)
}

/// `a2a serve --auth-oidc ISSUER` and its `127.0.0.1:PORT`.
fn serve(env: &Env, issuer: &str) -> (Proc, String) {
    serve_with(env, issuer, &[])
}

/// The same with more options.
fn serve_with(env: &Env, issuer: &str, more: &[&str]) -> (Proc, String) {
    let mut cmd = Command::new(assert_cmd::cargo::cargo_bin("a2a"));
    for (k, _) in std::env::vars() {
        if k.starts_with("A2ACLI_") || k.starts_with("A2A_") || k == "RUST_LOG" {
            cmd.env_remove(k);
        }
    }
    cmd.args([
        "serve",
        "--store",
        "memory",
        "--port",
        "0",
        "--auth-oidc",
        issuer,
    ])
    .args(more)
    .env("HOME", env.home())
    .current_dir(env.cwd());
    let (p, line) = start(cmd, "agent card:");
    let url = line.split_whitespace().last().expect("a URL");
    let addr = url
        .trim_start_matches("http://")
        .split('/')
        .next()
        .expect("host:port")
        .to_owned();
    (p, addr)
}

#[test]
#[ignore = "needs node and `npm ci` in interop/oidc (run by .ci/run)"]
fn client_credentials_login_then_send_on_every_binding_status_logout() {
    // No D-Bus session here: the OS keyring is not reachable, the tokens
    // fall back to 0600 files.
    let env = Env::new().with_env("DBUS_SESSION_BUS_ADDRESS", "unix:path=/nonexistent/bus");
    let (_provider, issuer) = provider();
    let (_server, addr) = serve(&env, &issuer);

    // Without a token the agent refuses (exit 4).
    env.run(&["send", "-a", &addr, "hello"]).expect(4);

    let out = env.run(&[
        "auth",
        "login",
        "-a",
        &addr,
        "--client-id",
        "a2a-service",
        "--client-secret",
        "service-secret",
        "--scope",
        "a2a",
        "-o",
        "json",
    ]);
    out.expect(0);
    assert!(
        !out.stdout.contains("eyJ"),
        "the token was printed: {}",
        out.stdout
    );
    let v = out.json();
    assert_eq!(v["grant"], "client_credentials");

    for b in ["JSONRPC", "HTTP+JSON", "GRPC"] {
        env.run(&["send", "-a", &addr, "--transport", b, "hello"])
            .expect(0);
    }

    let out = env.run(&["auth", "status", "-o", "json"]);
    out.expect(0);
    assert!(
        !out.stdout.contains("eyJ"),
        "status printed a token: {}",
        out.stdout
    );
    let v = out.json();
    assert_eq!(v["agents"].as_array().map(Vec::len), Some(1), "{v}");
    assert_eq!(v["storage"]["kind"], "file", "{v}");
    assert!(
        v["storage"]["why"]
            .as_str()
            .is_some_and(|n| n.contains("no OS keyring is reachable")),
        "{v}"
    );
    assert_eq!(v["agents"][0]["storage"], "file", "{v}");
    let files = token_files(env.home());
    assert_eq!(files.len(), 1, "{files:?}");
    assert!(
        std::fs::read_to_string(&files[0]).is_ok_and(|t| t.contains("eyJ")),
        "the token is in its file"
    );
    let text = env.run(&["auth", "status"]);
    text.expect(0);
    assert!(text.stdout.starts_with("Storage: "), "{}", text.stdout);
    assert!(!text.stdout.contains("eyJ"), "{}", text.stdout);

    env.run(&["auth", "logout", "-a", &addr]).expect(0);
    let v = env.run(&["auth", "status", "-o", "json"]).json();
    assert_eq!(v["agents"].as_array().map(Vec::len), Some(0), "{v}");
    env.run(&["send", "-a", &addr, "hello"]).expect(4);
}

/// A D-Bus session bus with a real Secret Service (gnome-keyring-daemon,
/// its login keyring created and unlocked), ended when dropped: the shell
/// under `dbus-run-session` waits on its stdin, closed on drop.
struct SecretService {
    child: Child,
    address: String,
}

impl SecretService {
    /// `None` (with the reason printed) when dbus-run-session or
    /// gnome-keyring-daemon is not installed.
    fn start(home: &Path) -> Option<Self> {
        for tool in ["dbus-run-session", "gnome-keyring-daemon"] {
            if Command::new("sh")
                .args(["-c", &format!("command -v {tool}")])
                .output()
                .map_or(true, |o| !o.status.success())
            {
                eprintln!(
                    "SKIPPED: {tool} is not installed (Debian packages dbus and gnome-keyring; .ci/run installs them)"
                );
                return None;
            }
        }
        let script = r#"echo "BUS $DBUS_SESSION_BUS_ADDRESS"
printf 'test-password' | gnome-keyring-daemon --unlock --components=secrets >/dev/null
echo READY
read -r _"#;
        let mut child = Command::new("dbus-run-session")
            .args(["--", "sh", "-c", script])
            .env("HOME", home)
            .env_remove("XDG_RUNTIME_DIR")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start dbus-run-session");
        let out = child.stdout.take().expect("stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let mut address = None;
        loop {
            let line = rx
                .recv_timeout(LIMIT)
                .expect("the session bus and gnome-keyring-daemon start");
            if let Some(a) = line.strip_prefix("BUS ") {
                address = Some(a.trim().to_owned());
            }
            if line == "READY" {
                break;
            }
        }
        Some(Self {
            child,
            address: address.expect("the bus address"),
        })
    }
}

impl Drop for SecretService {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while std::time::Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
#[ignore = "needs node and `npm ci` in interop/oidc, dbus and gnome-keyring (run by .ci/run)"]
fn client_credentials_login_keeps_the_token_in_the_os_keyring() {
    let base = Env::new();
    let Some(bus) = SecretService::start(base.home()) else {
        return;
    };
    let env = base.with_env("DBUS_SESSION_BUS_ADDRESS", &bus.address);
    let (_provider, issuer) = provider();
    let (_server, addr) = serve(&env, &issuer);
    env.run(&["send", "-a", &addr, "hello"]).expect(4);

    let out = env.run(&[
        "auth",
        "login",
        "-a",
        &addr,
        "--client-id",
        "a2a-service",
        "--client-secret",
        "service-secret",
        "--scope",
        "a2a",
        "-o",
        "json",
    ]);
    out.expect(0);
    assert_eq!(out.json()["storage"], "keyring", "{}", out.stdout);

    // The file keeps what status shows, not the token.
    let files = token_files(env.home());
    assert_eq!(files.len(), 1, "{files:?}");
    let text = std::fs::read_to_string(&files[0]).expect("the token file");
    assert!(!text.contains("eyJ"), "the token is in the file: {text}");
    assert!(text.contains("inKeyring"), "{text}");

    // A call carries the token from the keyring.
    env.run(&["send", "-a", &addr, "hello"]).expect(0);

    let v = env.run(&["auth", "status", "-o", "json"]).json();
    assert_eq!(v["storage"]["kind"], "keyring", "{v}");
    assert_eq!(v["agents"][0]["storage"], "keyring", "{v}");
    let t = env.run(&["auth", "status"]);
    t.expect(0);
    assert!(t.stdout.starts_with("Storage: keyring"), "{}", t.stdout);
    assert!(!t.stdout.contains("eyJ"), "{}", t.stdout);

    // Forced file store: the keyring token is still read (its file says
    // where it is).
    env.run_with(&["send", "-a", &addr, "hello"], |c| {
        c.env("A2ACLI_TOKEN_STORE", "file");
    })
    .expect(0);

    // Logout removes it from the keyring: a new file pointing there finds
    // nothing, and the call is refused again.
    env.run(&["auth", "logout", "-a", &addr]).expect(0);
    assert!(token_files(env.home()).is_empty());
    std::fs::create_dir_all(files[0].parent().expect("dir")).expect("dir");
    std::fs::write(&files[0], &text).expect("put the file back");
    let v = env.run(&["auth", "status", "-o", "json"]).json();
    assert_eq!(v["agents"].as_array().map(Vec::len), Some(0), "{v}");
    env.run(&["send", "-a", &addr, "hello"]).expect(4);
}

// ----- the device flow ---------------------------------------------------

/// The browser side of the device flow, over HTTP: follows redirects by
/// hand so that every `Set-Cookie` lands in its jar (names and values; the
/// provider's cookies have distinct names, so paths need no tracking).
struct Browser {
    http: reqwest::Client,
    jar: BTreeMap<String, String>,
    base: reqwest::Url,
}

/// What one page answered.
struct Page {
    status: u16,
    location: Option<String>,
    body: String,
}

impl Browser {
    fn new(base: &str) -> Self {
        agentwire_client::install_crypto_provider();
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(LIMIT)
            .build()
            .expect("an HTTP client");
        Self {
            http,
            jar: BTreeMap::new(),
            base: reqwest::Url::parse(base).expect("the verification URL"),
        }
    }

    fn url(&self, href: &str) -> reqwest::Url {
        self.base.join(href).expect("a URL on the provider")
    }

    async fn send(&mut self, req: reqwest::RequestBuilder) -> Page {
        let cookies = self
            .jar
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join("; ");
        let req = if cookies.is_empty() {
            req
        } else {
            req.header("cookie", cookies)
        };
        let resp = req.send().await.expect("the provider answers");
        for c in resp.headers().get_all("set-cookie") {
            let text = c.to_str().unwrap_or_default();
            let pair = text.split(';').next().unwrap_or_default();
            if let Some((k, v)) = pair.split_once('=') {
                if v.is_empty() {
                    self.jar.remove(k.trim());
                } else {
                    self.jar.insert(k.trim().to_owned(), v.trim().to_owned());
                }
            }
        }
        let status = resp.status().as_u16();
        let location = resp
            .headers()
            .get("location")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let body = resp.text().await.unwrap_or_default();
        Page {
            status,
            location,
            body,
        }
    }

    async fn get(&mut self, href: &str) -> Page {
        let req = self.http.get(self.url(href));
        self.send(req).await
    }

    async fn post(&mut self, href: &str, fields: &[(&str, &str)]) -> Page {
        let body = fields
            .iter()
            .map(|(k, v)| {
                format!(
                    "{}={}",
                    percent_encoding::utf8_percent_encode(k, percent_encoding::NON_ALPHANUMERIC),
                    percent_encoding::utf8_percent_encode(v, percent_encoding::NON_ALPHANUMERIC)
                )
            })
            .collect::<Vec<_>>()
            .join("&");
        let req = self
            .http
            .post(self.url(href))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body);
        self.send(req).await
    }
}

/// The value of `attr="..."` after `after` in an HTML page.
fn attr_after(html: &str, after: &str, attr: &str) -> Option<String> {
    let start = html.find(after)? + after.len();
    let rest = &html[start..];
    let key = format!("{attr}=\"");
    let i = rest.find(&key)? + key.len();
    let end = rest[i..].find('"')?;
    Some(rest[i..i + end].replace("&amp;", "&"))
}

/// What the person does at the verification page.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Decision {
    Approve,
    Deny,
}

/// Enters the user code at the verification page, then (approving) signs
/// in with any name and consents, as a person would in a browser.
async fn visit(verification_uri: &str, user_code: &str, decision: Decision) {
    let mut b = Browser::new(verification_uri);
    let page = b.get(verification_uri).await;
    assert_eq!(page.status, 200, "the verification page: {}", page.body);
    let xsrf = attr_after(&page.body, "name=\"xsrf\"", "value").expect("the form's xsrf field");
    let action = attr_after(&page.body, "<form", "action").expect("the form's action");
    let page = b
        .post(&action, &[("xsrf", &xsrf), ("user_code", user_code)])
        .await;
    assert!(
        page.body.contains("deviceConfirmForm"),
        "the code was not taken: {}",
        page.body
    );
    let xsrf = attr_after(&page.body, "name=\"xsrf\"", "value").expect("the confirm form's xsrf");
    let action = attr_after(&page.body, "<form", "action").expect("the confirm form's action");
    let last = if decision == Decision::Deny {
        ("abort", "yes")
    } else {
        ("confirm", "yes")
    };
    let mut page = b
        .post(&action, &[("xsrf", &xsrf), ("user_code", user_code), last])
        .await;
    if decision == Decision::Deny {
        assert_eq!(page.status, 200, "{}", page.body);
        return;
    }
    for _ in 0..12 {
        if let Some(loc) = page.location.clone().filter(|_| page.status / 100 == 3) {
            page = b.get(&loc).await;
            continue;
        }
        assert_eq!(page.status, 200, "{}", page.body);
        if page.body.contains("Sign-in Success") {
            return;
        }
        let action = attr_after(&page.body, "<form", "action").expect("a form on the page");
        page = if page.body.contains("name=\"prompt\" value=\"login\"") {
            b.post(
                &action,
                &[("prompt", "login"), ("login", "alice"), ("password", "any")],
            )
            .await
        } else if page.body.contains("name=\"prompt\" value=\"consent\"") {
            b.post(&action, &[("prompt", "consent")]).await
        } else {
            panic!("an unexpected page: {}", page.body);
        };
    }
    panic!("the sign-in did not finish: {}", page.body);
}

/// The `a2a` command of `env`, as a plain process (its output read while
/// it runs).
fn a2a(env: &Env) -> Command {
    let mut c = Command::new(assert_cmd::cargo::cargo_bin("a2a"));
    for (k, _) in std::env::vars() {
        if k.starts_with("A2ACLI_")
            || k.starts_with("XDG_")
            || k.starts_with("A2A_")
            || k == "RUST_LOG"
        {
            c.env_remove(k);
        }
    }
    c.env_remove("DBUS_SESSION_BUS_ADDRESS");
    c.env("HOME", env.home())
        .env("XDG_CONFIG_HOME", env.home().join(".config"))
        .env("XDG_CACHE_HOME", env.home().join(".cache"))
        .current_dir(env.cwd());
    for (k, v) in &env.extra {
        c.env(k, v);
    }
    c
}

/// Runs `a2a auth login` with the device flow: reads the verification URL
/// and code it prints, acts at the page as `decision` says, and returns
/// the command's result.
fn device_login(env: &Env, addr: &str, decision: Option<Decision>) -> Out {
    let mut cmd = a2a(env);
    cmd.args([
        "auth",
        "login",
        "-a",
        addr,
        "--client-id",
        "a2a-cli",
        "--scope",
        "openid,offline_access,a2a",
        "-o",
        "json",
    ])
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let mut child = Proc(cmd.spawn().expect("start a2a auth login"));
    let stderr = child.0.stderr.take().expect("stderr");
    let mut stdout = child.0.stdout.take().expect("stdout");
    let (tx, rx) = mpsc::channel::<String>();
    let err_reader = std::thread::spawn(move || {
        let mut all = String::new();
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line.clone());
            all.push_str(&line);
            all.push('\n');
        }
        all
    });
    let out_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut stdout, &mut s);
        s
    });
    let line = loop {
        let line = rx
            .recv_timeout(LIMIT)
            .expect("a2a auth login prints where to sign in");
        if line.contains("enter the code:") {
            break line;
        }
    };
    // "To sign in, open URL and enter the code: CODE"
    let uri = line
        .split_whitespace()
        .find(|w| w.starts_with("http"))
        .expect("a verification URL")
        .to_owned();
    let code = line
        .rsplit(' ')
        .next()
        .expect("a user code")
        .trim()
        .to_owned();
    if let Some(decision) = decision {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime")
            .block_on(visit(&uri, &code, decision));
    }
    let deadline = std::time::Instant::now() + LIMIT * 2;
    let status = loop {
        if let Some(s) = child.0.try_wait().expect("wait for a2a") {
            break s;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "a2a auth login did not finish"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    Out {
        code: status.code().unwrap_or(-1),
        stdout: out_reader.join().unwrap_or_default(),
        stderr: err_reader.join().unwrap_or_default(),
    }
}

/// The stored token files (one per agent).
fn token_files(home: &Path) -> Vec<PathBuf> {
    let dir = home.join(".config").join("a2a-cli").join("tokens");
    let mut out: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|e| e == "json"))
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

/// The one stored token, as JSON.
fn stored_token(home: &Path) -> serde_json::Value {
    let files = token_files(home);
    assert_eq!(files.len(), 1, "{files:?}");
    let text = std::fs::read_to_string(&files[0]).expect("read the token file");
    serde_json::from_str(&text).expect("the token file is JSON")
}

#[test]
#[ignore = "needs node and `npm ci` in interop/oidc (run by .ci/run)"]
fn device_login_through_the_verification_page_then_calls_carry_the_token() {
    let env = Env::new();
    let (_provider, issuer) = provider();
    let (_server, addr) = serve(&env, &issuer);
    env.run(&["send", "-a", &addr, "hello"]).expect(4);

    let out = device_login(&env, &addr, Some(Decision::Approve));
    out.expect(0);
    assert!(
        out.stderr.contains("To sign in, open ") && out.stderr.contains("/device"),
        "{}",
        out.stderr
    );
    assert!(
        !out.stdout.contains("eyJ"),
        "the token was printed: {}",
        out.stdout
    );
    let v = out.json();
    assert_eq!(v["grant"], "device_code", "{v}");
    assert_eq!(v["refreshable"], true, "{v}");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let files = token_files(env.home());
        let mode = std::fs::metadata(&files[0])
            .expect("token file")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    for b in ["JSONRPC", "HTTP+JSON", "GRPC"] {
        env.run(&["send", "-a", &addr, "--transport", b, "hello"])
            .expect(0);
    }
}

#[test]
#[ignore = "needs node and `npm ci` in interop/oidc (run by .ci/run)"]
fn device_login_denied_at_the_page_is_a_clear_authentication_failure() {
    let env = Env::new();
    let (_provider, issuer) = provider();
    let (_server, addr) = serve(&env, &issuer);
    let out = device_login(&env, &addr, Some(Decision::Deny));
    out.expect(4);
    assert!(
        out.stderr.contains("denied at the verification page"),
        "{}",
        out.stderr
    );
    assert!(token_files(env.home()).is_empty());
}

#[test]
#[ignore = "needs node and `npm ci` in interop/oidc (run by .ci/run)"]
fn device_login_with_an_expired_code_says_to_run_it_again() {
    let env = Env::new();
    // The device code lives 1 second; the first poll comes after the
    // provider's interval (5 seconds), so it finds the code expired.
    let (_provider, issuer) = provider_with(&[("A2A_DEVICE_TTL", "1")]);
    let (_server, addr) = serve(&env, &issuer);
    let out = device_login(&env, &addr, None);
    out.expect(4);
    assert!(
        out.stderr.contains("expired") && out.stderr.contains("run the login again"),
        "{}",
        out.stderr
    );
    assert!(token_files(env.home()).is_empty());
}

// ----- refresh -----------------------------------------------------------

/// Replaces the stored access token with one the agent will refuse, its
/// expiry an hour away (so only the agent's refusal can reveal it).
fn spoil_stored_token(home: &Path) {
    let files = token_files(home);
    let mut v = stored_token(home);
    v["access_token"] = "not-a-token-the-agent-accepts".into();
    let later = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs()
        + 3600;
    v["expires_at"] = later.into();
    std::fs::write(&files[0], v.to_string()).expect("write the token file");
}

#[test]
#[ignore = "needs node and `npm ci` in interop/oidc (run by .ci/run)"]
fn expired_token_is_refreshed_before_use_and_a_refused_one_once_on_every_binding() {
    let env = Env::new();
    // Tokens live 10 seconds: less than the client's expiry margin, so a
    // stored token counts as expired at once, whatever the timing.
    let (_provider, issuer) = provider_with(&[("A2A_TOKEN_TTL", "10")]);
    let (_server, addr) = serve(&env, &issuer);
    device_login(&env, &addr, Some(Decision::Approve)).expect(0);
    let first = stored_token(env.home());

    // Expired: refreshed with the refresh token before the call.
    env.run(&["send", "-a", &addr, "hello"]).expect(0);
    let second = stored_token(env.home());
    assert_ne!(
        first["access_token"], second["access_token"],
        "not refreshed"
    );

    // Refused by the agent although not expired: refreshed once and the
    // call retried, on each binding.
    for b in ["JSONRPC", "HTTP+JSON", "GRPC"] {
        spoil_stored_token(env.home());
        let out = env.run(&["send", "-a", &addr, "--transport", b, "hello"]);
        out.expect(0);
        let now = stored_token(env.home());
        assert_ne!(
            now["access_token"], "not-a-token-the-agent-accepts",
            "{b}: the refreshed token was not stored"
        );
        assert!(!out.stdout.contains("eyJ") && !out.stderr.contains("eyJ"));
    }

    // An agent that refuses every token of this provider (another
    // audience): one refresh, then an authentication failure (exit 4).
    let other = Env::new();
    let (_strict, strict) = serve_with(
        &other,
        &issuer,
        &["--auth-audience", "urn:a2a:some-other-agent"],
    );
    device_login(&other, &strict, Some(Decision::Approve)).expect(0);
    for b in ["JSONRPC", "HTTP+JSON", "GRPC"] {
        let out = other.run(&["send", "-a", &strict, "--transport", b, "hello"]);
        out.expect(4);
        assert!(
            out.stderr.contains("A2ACLI_ERR_AUTH") || out.stderr.contains("uthenticat"),
            "{b}: {}",
            out.stderr
        );
    }

    // A refused token whose refresh fails (the provider does not know the
    // refresh token): exit 4, and the error says the refresh failed and
    // why, without any token.
    for b in ["JSONRPC", "HTTP+JSON", "GRPC"] {
        spoil_stored_token(env.home());
        let files = token_files(env.home());
        let mut v = stored_token(env.home());
        v["refresh_token"] = "a-refresh-token-nobody-issued".into();
        std::fs::write(&files[0], v.to_string()).expect("write the token file");
        let out = env.run(&["send", "-a", &addr, "--transport", b, "hello"]);
        out.expect(4);
        assert!(
            out.stderr.contains("refreshing it failed") && out.stderr.contains("invalid_grant"),
            "{b}: {}",
            out.stderr
        );
        assert!(
            !out.stderr.contains("a-refresh-token-nobody-issued")
                && !out.stderr.contains("not-a-token-the-agent-accepts")
                && !out.stderr.contains("eyJ"),
            "{b}: a secret in {}",
            out.stderr
        );
    }
}
