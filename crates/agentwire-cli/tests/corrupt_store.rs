//! `a2a serve --store sqlite:PATH` on a file that is not an SQLite
//! database: the server does not start, and says which file is wrong, what
//! is wrong with it and what to do, with the exit status and error code of
//! a failure of the server (not of a client's usage).

use std::process::Command;

#[test]
fn a_damaged_database_file_is_reported_at_start_with_what_to_do() {
    let path = std::env::temp_dir().join(format!(
        "a2a-corrupt-store-{}.db",
        agentwire_types::new_id()
    ));
    // Not a database: what a damaged or overwritten file looks like.
    let garbage: Vec<u8> = (0..8192u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    std::fs::write(&path, &garbage).expect("write the file");
    let out = Command::new(env!("CARGO_BIN_EXE_a2a"))
        .args(["serve", "--port", "0", "-o", "json", "--store"])
        .arg(format!("sqlite:{}", path.display()))
        .output()
        .expect("run a2a serve");
    let _ = std::fs::remove_file(&path);
    let _ = std::fs::remove_file(path.with_extension("db.lock"));
    // A failure of the server, not a usage error (2).
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let envelope: serde_json::Value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("a JSON error envelope ({e}): {stdout}"));
    let error = &envelope["error"];
    assert_eq!(error["code"], "AGENTWIRE_SERVE_FAILED", "{envelope}");
    let message = error["message"].as_str().unwrap_or_default();
    let shown = path.display().to_string();
    assert!(message.contains(&shown), "names the file: {message}");
    assert!(
        message.contains("damaged or is not an SQLite database"),
        "says what is wrong: {message}"
    );
    let hint = error["hint"].as_str().unwrap_or_default();
    assert!(
        hint.contains("backup") && hint.contains(&format!("mv {shown}")),
        "says what to do: {hint}"
    );
}
