//! `a2a` in a pseudo-terminal, as a person's terminal runs it: what it
//! writes is read back (terminal styles and cursor moves taken out, so
//! that tests look for the words a person sees), and keys are typed into
//! it. Every wait is bounded; the process is killed if a test gives up.

#![allow(dead_code)]

use std::io::{Read, Write};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use expectrl::process::unix::WaitStatus;
use expectrl::session::OsSession;

/// Bound on every wait for output.
pub const WAIT: Duration = Duration::from_secs(60);

/// The `a2a` binary under test.
pub fn a2a() -> &'static str {
    env!("CARGO_BIN_EXE_a2a")
}

/// A command with the isolated environment of a test: `HOME` and the XDG
/// directories under `home`, no `A2ACLI_*` setting inherited, a colour
/// terminal.
pub fn command(program: &str, home: &Path, cwd: &Path) -> Command {
    let mut c = Command::new(program);
    for (k, _) in std::env::vars() {
        if k.starts_with("A2ACLI_") || k.starts_with("XDG_") || k == "A2A_LOG" || k == "NO_COLOR" {
            c.env_remove(k);
        }
    }
    c.env("HOME", home)
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .env("XDG_CACHE_HOME", home.join(".cache"))
        .env("XDG_STATE_HOME", home.join(".state"))
        .env("TERM", "xterm-256color")
        .current_dir(cwd);
    c
}

/// A process on a pseudo-terminal.
pub struct Pty {
    session: OsSession,
    raw: Vec<u8>,
    /// Where the next [`Pty::expect`] starts looking, in [`Pty::screen`].
    from: usize,
    eof: bool,
    done: bool,
}

impl Pty {
    pub fn spawn(command: Command) -> Self {
        let session = expectrl::Session::spawn(command).expect("spawn on a pseudo-terminal");
        Self {
            session,
            raw: Vec::new(),
            from: 0,
            eof: false,
            done: false,
        }
    }

    /// `sh -c script` with `$A2A` naming the binary (for redirections:
    /// `"$A2A" send ... > out.txt` leaves only stderr on the terminal).
    pub fn shell(home: &Path, cwd: &Path, script: &str) -> Self {
        let mut c = command("sh", home, cwd);
        c.arg("-c").arg(script).env("A2A", a2a());
        Self::spawn(c)
    }

    /// Reads what is there; false when nothing was.
    fn pump(&mut self) -> bool {
        if self.eof {
            return false;
        }
        let mut buf = [0u8; 8192];
        match self.session.try_read(&mut buf) {
            Ok(0) => {
                self.eof = true;
                false
            }
            Ok(n) => {
                self.raw.extend_from_slice(&buf[..n]);
                true
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => false,
            // EIO: the other side is closed (the process ended).
            Err(_) => {
                self.eof = true;
                false
            }
        }
    }

    /// Everything written so far, as the words on the screen.
    pub fn screen(&self) -> String {
        strip_terminal_codes(&String::from_utf8_lossy(&self.raw))
    }

    /// Everything written so far, as written.
    pub fn raw(&self) -> String {
        String::from_utf8_lossy(&self.raw).into_owned()
    }

    /// Waits until `needle` appears after what earlier calls matched;
    /// returns the text up to and including it.
    pub fn expect(&mut self, needle: &str) -> String {
        let started = Instant::now();
        loop {
            let screen = self.screen();
            if let Some(i) = screen.get(self.from..).and_then(|s| s.find(needle)) {
                let end = self.from + i + needle.len();
                let seen = screen[self.from..end].to_owned();
                self.from = end;
                return seen;
            }
            if self.eof || started.elapsed() > WAIT {
                let why = if self.eof {
                    "the process ended"
                } else {
                    "time is up"
                };
                self.kill();
                panic!(
                    "{why} before {needle:?} appeared; the terminal showed:\n{}",
                    &screen
                );
            }
            if !self.pump() {
                std::thread::sleep(Duration::from_millis(15));
            }
        }
    }

    /// Types keys.
    pub fn send(&mut self, keys: &str) {
        self.session
            .write_all(keys.as_bytes())
            .and_then(|()| self.session.flush())
            .expect("type into the terminal");
    }

    /// Sends the process a SIGINT, as `kill -INT PID` does (typing Ctrl-C
    /// makes the terminal send one only while it is not in raw mode).
    pub fn interrupt(&mut self) {
        self.session
            .get_process_mut()
            .kill(expectrl::process::unix::Signal::SIGINT)
            .expect("send SIGINT");
    }

    /// Types a line and Enter.
    pub fn line(&mut self, text: &str) {
        self.send(text);
        self.send("\r");
    }

    /// Waits for the process to end (reading what it writes meanwhile);
    /// its exit status.
    pub fn wait(&mut self) -> i32 {
        let started = Instant::now();
        while !self.eof && started.elapsed() < WAIT {
            if !self.pump() {
                std::thread::sleep(Duration::from_millis(15));
            }
        }
        if !self.eof {
            self.kill();
            panic!(
                "the process did not end; the terminal showed:\n{}",
                self.screen()
            );
        }
        self.done = true;
        match self.session.get_process().wait() {
            Ok(WaitStatus::Exited(_, code)) => code,
            other => panic!("the process did not exit normally: {other:?}"),
        }
    }

    fn kill(&mut self) {
        if !self.done {
            self.done = true;
            let _ = self.session.get_process_mut().exit(true);
        }
    }
}

impl Drop for Pty {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Takes terminal control sequences out (CSI `ESC [ ... final`, OSC `ESC ]
/// ... BEL`, other `ESC x`) and carriage returns, keeping the text.
pub fn strip_terminal_codes(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\u{1b}' => match chars.next() {
                Some('[') => {
                    for d in chars.by_ref() {
                        if ('\u{40}'..='\u{7e}').contains(&d) {
                            break;
                        }
                    }
                }
                Some(']') => {
                    while let Some(d) = chars.next() {
                        if d == '\u{7}' {
                            break;
                        }
                        if d == '\u{1b}' && chars.peek() == Some(&'\\') {
                            chars.next();
                            break;
                        }
                    }
                }
                _ => {}
            },
            '\r' => {}
            _ => out.push(c),
        }
    }
    out
}

/// Reads a file written by the process (empty if not there yet).
pub fn read(path: &Path) -> String {
    let mut s = String::new();
    if let Ok(mut f) = std::fs::File::open(path) {
        let _ = f.read_to_string(&mut s);
    }
    s
}

/// Waits until the file holds `needle` `times` times.
pub fn wait_file(path: &Path, needle: &str, times: usize, pty: &mut Pty) -> String {
    let started = Instant::now();
    loop {
        let s = read(path);
        if s.matches(needle).count() >= times {
            return s;
        }
        if started.elapsed() > WAIT {
            panic!(
                "{needle:?} not {times} times in {}:\n{s}\nthe terminal showed:\n{}",
                path.display(),
                pty.screen()
            );
        }
        // Keep the terminal drained so that the process never blocks on it.
        if !pty.pump() {
            std::thread::sleep(Duration::from_millis(15));
        }
    }
}

#[test]
fn codes_are_taken_out() {
    assert_eq!(
        strip_terminal_codes("\u{1b}[1mbold\u{1b}[0m \r\u{1b}[2Kline\u{1b}]0;t\u{7}!"),
        "bold line!"
    );
}
