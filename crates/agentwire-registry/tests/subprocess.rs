//! `SubprocessEmbedder`: the model in a sidecar process, here a fake one
//! (`tests/data/fake-a2a-embed.sh`, run by /bin/sh: three "concepts",
//! weather, markets and anything else, and misbehaviours chosen with
//! FAKE_MODE). The real `a2a-embed` with the real model is tested by
//! agentwire-cli's tests/registry_sidecar.rs.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use agentwire_registry::Embedder;
use agentwire_registry::embed::SubprocessEmbedder;
use agentwire_registry::embed::subprocess::{MAX_TEXTS, SidecarCommand};

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/fake-a2a-embed.sh")
}

/// The fake sidecar in `mode`, its marker file at `marker` (FAKE_MARKER).
/// /bin/sh runs the script: the script itself is never executed as a
/// program, so no file of this process is ever "busy" for it.
fn fake(mode: &str, marker: &Path) -> SidecarCommand {
    SidecarCommand {
        program: PathBuf::from("/usr/bin/env"),
        args: vec![
            format!("FAKE_MODE={mode}").into(),
            format!("FAKE_MARKER={}", marker.display()).into(),
            "/bin/sh".into(),
            script().into(),
            "serve".into(),
            "/model".into(),
        ],
    }
}

fn start(mode: &str, timeout: Duration) -> (SubprocessEmbedder, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("temp dir");
    let e = SubprocessEmbedder::start(
        fake(mode, &dir.path().join("marker")),
        timeout,
        Duration::from_secs(20),
    )
    .expect("the fake sidecar starts");
    (e, dir)
}

#[test]
fn texts_are_embedded_by_the_sidecar_in_order_and_in_requests_of_bounded_size() {
    let (e, _dir) = start("ok", Duration::from_secs(20));
    assert_eq!((e.model(), e.dimensions()), ("fake-concepts", 3));
    // The identifier the registry keeps vectors under, from the hello.
    assert_eq!(
        agentwire_registry::Embedder::model_id(&e),
        "fake-concepts/3d/v1"
    );
    let v = e
        .embed(&[
            "is it chilly in oslo?",
            "where's the nasdaq at",
            "hello \"you\"",
        ])
        .expect("vectors");
    assert_eq!(
        v,
        vec![
            vec![1.0, 0.0, 0.1],
            vec![0.0, 1.0, 0.1],
            vec![0.0, 0.0, 1.0]
        ]
    );
    assert_eq!(e.embed(&[]).expect("nothing"), Vec::<Vec<f32>>::new());
    // More texts than one request carries: several requests, one answer.
    let many: Vec<String> = (0..MAX_TEXTS * 2 + 3)
        .map(|i| {
            if i % 2 == 0 {
                format!("rain {i}")
            } else {
                format!("stock {i}")
            }
        })
        .collect();
    let refs: Vec<&str> = many.iter().map(String::as_str).collect();
    let v = e.embed(&refs).expect("vectors");
    assert_eq!(v.len(), many.len());
    assert!(v.iter().step_by(2).all(|x| x[0] == 1.0));
    assert!(v.iter().skip(1).step_by(2).all(|x| x[1] == 1.0));
}

#[test]
fn a_sidecar_that_exits_is_started_again_once() {
    let (e, dir) = start("crash-once", Duration::from_secs(20));
    // The first request finds it gone (it exits, leaving its marker), the
    // one started again answers.
    let v = e
        .embed(&["rain tomorrow?"])
        .expect("answered after a restart");
    assert_eq!(v, vec![vec![1.0, 0.0, 0.1]]);
    assert!(dir.path().join("marker").exists());
    assert_eq!(
        e.embed(&["stock"]).expect("still up"),
        vec![vec![0.0, 1.0, 0.1]]
    );
}

#[test]
fn a_sidecar_that_does_not_answer_in_time_is_an_error_and_is_replaced() {
    let (e, _dir) = start("hang", Duration::from_millis(300));
    let t = Instant::now();
    let err = e.embed(&["rain"]).unwrap_err();
    assert!(err.0.contains("no answer within"), "{err}");
    // Bounded: the timeout, not forever (generous: a busy machine).
    assert!(t.elapsed() < Duration::from_secs(15), "{:?}", t.elapsed());
    // Right after, no sidecar is started (the back-off after a failure):
    // an error at once.
    let t = Instant::now();
    let err = e.embed(&["rain"]).unwrap_err();
    assert!(err.0.contains("not started again for"), "{err}");
    assert!(
        t.elapsed() < Duration::from_millis(250),
        "{:?}",
        t.elapsed()
    );
    // Once it is over, the next request starts a new sidecar (which hangs
    // too): an error again, never a panic or a wait without end.
    std::thread::sleep(agentwire_registry::embed::subprocess::BACKOFF_FIRST);
    let err = e.embed(&["rain"]).unwrap_err();
    assert!(err.0.contains("no answer within"), "{err}");
}

#[test]
fn a_sidecar_that_dies_on_every_request_is_not_started_for_every_request() {
    let (e, dir) = start("crash-always", Duration::from_secs(20));
    let starts = || {
        std::fs::read_to_string(dir.path().join("marker"))
            .unwrap_or_default()
            .lines()
            .count()
    };
    assert_eq!(starts(), 1);
    // The first request finds it gone, starts it again once, loses it
    // again: an error, two starts in all.
    let err = e.embed(&["rain"]).unwrap_err();
    assert!(err.0.contains("also when started again"), "{err}");
    assert_eq!(starts(), 2);
    // Then requests fail at once for a while, starting nothing.
    for _ in 0..20 {
        let err = e.embed(&["rain"]).unwrap_err();
        assert!(err.0.contains("failed 1 time(s) in a row"), "{err}");
    }
    assert_eq!(starts(), 2);
    // After the back-off one start is tried (the request's own restart is
    // not tried again: that costs one start, not two), and the next
    // back-off is longer.
    std::thread::sleep(agentwire_registry::embed::subprocess::BACKOFF_FIRST);
    let err = e.embed(&["rain"]).unwrap_err();
    assert!(err.0.contains("also when started again"), "{err}");
    assert_eq!(starts(), 3);
    let err = e.embed(&["rain"]).unwrap_err();
    assert!(err.0.contains("failed 2 time(s) in a row"), "{err}");
    assert_eq!(starts(), 3);
}

#[test]
fn answers_that_are_not_the_protocol_are_errors() {
    let (e, _dir) = start("garbage", Duration::from_secs(20));
    let err = e.embed(&["rain"]).unwrap_err();
    assert!(err.0.contains("not the protocol"), "{err}");
    let (e, _dir) = start("short", Duration::from_secs(20));
    let err = e.embed(&["rain", "stock"]).unwrap_err();
    assert!(err.0.contains("0 vectors for 2 texts"), "{err}");
}

#[test]
fn a_sidecar_that_cannot_load_its_model_says_why() {
    let dir = tempfile::tempdir().expect("temp dir");
    let err = SubprocessEmbedder::start(
        fake("nohello", &dir.path().join("marker")),
        Duration::from_secs(5),
        Duration::from_secs(20),
    )
    .unwrap_err();
    assert!(err.0.contains("it is a fake"), "{err}");
}

#[cfg(target_os = "linux")]
#[test]
fn the_sidecar_is_stopped_when_the_embedder_is_dropped() {
    let (e, _dir) = start("ok", Duration::from_secs(20));
    e.embed(&["rain"]).expect("vectors");
    // The process's id, from /proc: the child of this process running the
    // script.
    let children = || -> Vec<String> {
        let me = std::process::id().to_string();
        let Ok(dir) = std::fs::read_dir("/proc") else {
            return Vec::new();
        };
        dir.flatten()
            .filter_map(|d| {
                let stat = std::fs::read_to_string(d.path().join("stat")).ok()?;
                let cmd = std::fs::read_to_string(d.path().join("cmdline")).ok()?;
                // Field 4 of stat, after the command in parentheses: the parent.
                let ppid = stat.rsplit(')').next()?.split_whitespace().nth(1)?;
                (ppid == me && cmd.contains("fake-a2a-embed.sh"))
                    .then(|| d.file_name().to_string_lossy().into_owned())
            })
            .collect()
    };
    let before = children();
    drop(e);
    let after = children();
    // Other tests of this file run their own sidecars at the same time:
    // what matters is that none of those seen before the drop is left
    // running (a killed child is reaped by the drop).
    assert!(!before.is_empty(), "no sidecar seen in /proc");
    assert!(
        before.iter().any(|p| !after.contains(p)),
        "before {before:?}, after {after:?}"
    );
}

/// A request someone waits on (`embed_within`) does not queue behind
/// another that holds the sidecar: past its wait it is an error at once
/// (the registry then routes it by words), while indexing (`embed`)
/// waits its turn; once the sidecar is free it answers again.
#[test]
fn a_busy_sidecar_turns_waiting_requests_away_in_time() {
    let (e, _dir) = start("slow", Duration::from_secs(20));
    let e = std::sync::Arc::new(e);
    let holder = {
        let e = std::sync::Arc::clone(&e);
        std::thread::spawn(move || e.embed(&["rain"]))
    };
    // Let the first request take the sidecar (it answers after 1 s).
    std::thread::sleep(Duration::from_millis(300));
    let t = Instant::now();
    let err = e
        .embed_within(&["stock"], Duration::from_millis(100))
        .unwrap_err();
    assert!(err.0.contains("busy with other requests"), "{err}");
    assert!(
        t.elapsed() < Duration::from_millis(600),
        "{:?}",
        t.elapsed()
    );
    // Indexing waits its turn instead.
    let waited = e.embed(&["stock"]).expect("after the first");
    assert_eq!(waited, vec![vec![0.0, 1.0, 0.1]]);
    assert_eq!(
        holder.join().expect("the first request").expect("vectors"),
        vec![vec![1.0, 0.0, 0.1]]
    );
    // Free: a waiting request is answered.
    let v = e
        .embed_within(&["rain"], Duration::from_millis(100))
        .expect("answered");
    assert_eq!(v, vec![vec![1.0, 0.0, 0.1]]);
}
