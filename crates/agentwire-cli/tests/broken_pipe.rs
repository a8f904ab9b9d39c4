//! Output into a pipe whose reader went away (`a2a completion bash | head`)
//! ends the command quietly with the SIGPIPE status, never with a panic.

use std::io::Read;
use std::process::{Command, Stdio};

#[test]
fn a_closed_pipe_ends_the_command_quietly() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_a2a"))
        .args(["completion", "bash"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start a2a");
    let mut stdout = child.stdout.take().expect("stdout");
    let mut first = [0u8; 1];
    stdout
        .read_exact(&mut first)
        .expect("the script's first byte");
    // The script (tens of KiB) does not fit the pipe: the rest is written
    // to a pipe nobody reads any more.
    drop(stdout);
    let out = child.wait_with_output().expect("a2a ends");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "stderr: {stderr}");
    assert_eq!(out.status.code(), Some(141), "stderr: {stderr}");
}
