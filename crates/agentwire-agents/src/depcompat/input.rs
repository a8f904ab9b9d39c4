//! What a request carries: project files (file parts with a filename,
//! text parts with a filename, data parts), the target runtime and target
//! package versions (in text or in a data part), gathered over every user
//! message of a task so that a resumed task still has the files of its
//! first message.
//!
//! Data part parameters (all optional):
//!
//! ```json
//! {"targetRuntime": {"node": "24", "rust": "1.80"},
//!  "targetPackages": {"express": "5.1.0",
//!                     "left-pad": {"version": "2.0.0", "engines": {"node": ">=20"}}}}
//! ```
//!
//! In text: "Node.js 24", "node 24.1.0", "Rust 1.80", "express@5.1.0",
//! "upgrade express to 5.1.0".

use std::collections::BTreeMap;

use agentwire_types::{Message, Part, Role};
use serde_json::Value;

use super::npm::PackageTarget;
use super::semver::Version;

/// The kinds of project file the agent reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    /// `package.json`.
    PackageJson,
    /// `package-lock.json` or `npm-shrinkwrap.json`.
    PackageLock,
    /// `Cargo.toml`.
    CargoToml,
    /// `Cargo.lock`.
    CargoLock,
}

impl FileKind {
    /// The kind of a file by its name (the last path segment).
    pub fn of(name: &str) -> Option<Self> {
        match name.rsplit(['/', '\\']).next().unwrap_or(name) {
            "package.json" => Some(FileKind::PackageJson),
            "package-lock.json" | "npm-shrinkwrap.json" => Some(FileKind::PackageLock),
            "Cargo.toml" => Some(FileKind::CargoToml),
            "Cargo.lock" => Some(FileKind::CargoLock),
            _ => None,
        }
    }

    /// The canonical file name.
    pub fn default_name(self) -> &'static str {
        match self {
            FileKind::PackageJson => "package.json",
            FileKind::PackageLock => "package-lock.json",
            FileKind::CargoToml => "Cargo.toml",
            FileKind::CargoLock => "Cargo.lock",
        }
    }
}

/// A file's content as received.
#[derive(Debug, Clone, PartialEq)]
pub enum Body {
    /// Text (from a text part or UTF-8 bytes).
    Text(String),
    /// JSON (from a data part).
    Json(Value),
}

/// One project file.
#[derive(Debug, Clone, PartialEq)]
pub struct FileInput {
    /// The name it was sent under.
    pub name: String,
    /// Its kind.
    pub kind: FileKind,
    /// Its content.
    pub body: Body,
}

impl FileInput {
    /// The content as JSON (package.json, package-lock.json).
    pub fn json(&self) -> Result<Value, String> {
        match &self.body {
            Body::Json(v) => Ok(v.clone()),
            Body::Text(t) => {
                serde_json::from_str(t).map_err(|e| format!("{} is not valid JSON: {e}", self.name))
            }
        }
    }

    /// The content as TOML (Cargo.toml, Cargo.lock).
    pub fn toml(&self) -> Result<toml::Table, String> {
        match &self.body {
            Body::Text(t) => t
                .parse::<toml::Table>()
                .map_err(|e| format!("{} is not valid TOML: {}", self.name, e.message())),
            Body::Json(_) => Err(format!(
                "{} was sent as JSON data; send it as text",
                self.name
            )),
        }
    }
}

/// Everything gathered from the user's messages.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Inputs {
    /// Project files; a later file with the same name replaces an earlier one.
    pub files: Vec<FileInput>,
    /// The target Node.js version, as given.
    pub node: Option<String>,
    /// The target Rust version, as given.
    pub rust: Option<String>,
    /// Target versions of named packages or crates.
    pub packages: BTreeMap<String, PackageTarget>,
    /// Parts that were not used, and why.
    pub ignored: Vec<String>,
}

impl Inputs {
    /// Gathers the inputs of the user messages among `messages`, in order.
    pub fn gather<'a>(messages: impl IntoIterator<Item = &'a Message>) -> Self {
        let mut inputs = Self::default();
        for m in messages {
            if m.role != Role::User as i32 {
                continue;
            }
            for part in &m.parts {
                inputs.add_part(part);
            }
        }
        inputs
    }

    /// Whether any project file was received.
    pub fn has_files(&self) -> bool {
        !self.files.is_empty()
    }

    /// The files of one kind, shortest path first.
    pub fn files_of(&self, kind: FileKind) -> Vec<&FileInput> {
        let mut out: Vec<&FileInput> = self.files.iter().filter(|f| f.kind == kind).collect();
        out.sort_by_key(|f| (f.name.matches('/').count(), f.name.len()));
        out
    }

    fn add_file(&mut self, name: String, kind: FileKind, body: Body) {
        self.files.retain(|f| f.name != name);
        self.files.push(FileInput { name, kind, body });
    }

    fn add_part(&mut self, part: &Part) {
        let filename = part.filename.trim().to_owned();
        if let Some(url) = part.as_url() {
            self.ignored.push(format!(
                "{} by URL ({url}): files are not fetched; send the content inline",
                if filename.is_empty() {
                    "a file".to_owned()
                } else {
                    filename
                }
            ));
            return;
        }
        if !filename.is_empty() {
            let Some(kind) = FileKind::of(&filename) else {
                self.ignored.push(unsupported_file(&filename));
                return;
            };
            let body = if let Some(raw) = part.as_raw() {
                match String::from_utf8(raw.to_vec()) {
                    Ok(t) => Body::Text(t),
                    Err(_) => {
                        self.ignored.push(format!("{filename} is not UTF-8 text"));
                        return;
                    }
                }
            } else if let Some(t) = part.as_text() {
                Body::Text(t.to_owned())
            } else if let Some(v) = part.as_data() {
                Body::Json(v)
            } else {
                return;
            };
            self.add_file(filename, kind, body);
            return;
        }
        if let Some(raw) = part.as_raw() {
            match std::str::from_utf8(raw) {
                Ok(t) => self.add_unnamed_text(t),
                Err(_) => self
                    .ignored
                    .push("a file part without a filename that is not UTF-8 text".into()),
            }
            return;
        }
        if let Some(v) = part.as_data() {
            self.add_data(v);
            return;
        }
        if let Some(t) = part.as_text() {
            self.add_unnamed_text(t);
        }
    }

    /// Unnamed text: a pasted file if it looks like one, else instructions.
    fn add_unnamed_text(&mut self, t: &str) {
        let trimmed = t.trim_start();
        if trimmed.starts_with('{') {
            if let Ok(v) = serde_json::from_str::<Value>(trimmed) {
                if v.is_object() {
                    self.add_data(v);
                    return;
                }
            }
        }
        if let Some(kind) = toml_kind(trimmed) {
            self.add_file(
                kind.default_name().to_owned(),
                kind,
                Body::Text(t.to_owned()),
            );
            return;
        }
        self.add_text(t);
    }

    /// A data part without a filename: a manifest, a lockfile, or
    /// parameters.
    fn add_data(&mut self, v: Value) {
        if v.get("lockfileVersion").is_some() {
            self.add_file(
                "package-lock.json".into(),
                FileKind::PackageLock,
                Body::Json(v),
            );
            return;
        }
        let manifest_keys = [
            "dependencies",
            "devDependencies",
            "engines",
            "peerDependencies",
        ];
        if v.get("name").is_some() && manifest_keys.iter().any(|k| v.get(*k).is_some()) {
            self.add_file("package.json".into(), FileKind::PackageJson, Body::Json(v));
            return;
        }
        let Some(obj) = v.as_object() else {
            self.ignored
                .push("a data part that is not an object".into());
            return;
        };
        let mut used = false;
        for (key, value) in obj {
            match key.as_str() {
                "targetRuntime" | "runtime" | "target" => match value {
                    Value::Object(m) => {
                        for (k, v) in m {
                            used |= self.set_runtime(k, v);
                        }
                    }
                    Value::String(s) => {
                        let before = (self.node.clone(), self.rust.clone());
                        self.add_text(s);
                        used |= before != (self.node.clone(), self.rust.clone());
                    }
                    _ => {}
                },
                "node" | "nodeVersion" | "targetNode" | "nodejs" => {
                    used |= self.set_runtime("node", value);
                }
                "rust" | "rustVersion" | "targetRust" | "rustc" => {
                    used |= self.set_runtime("rust", value);
                }
                "targetPackages" | "packages" | "upgrades" => {
                    if let Some(m) = value.as_object() {
                        for (name, spec) in m {
                            if let Some(t) = package_target(spec) {
                                self.packages.insert(name.clone(), t);
                                used = true;
                            }
                        }
                    }
                }
                _ => {}
            }
        }
        if !used {
            self.ignored.push(format!(
                "a data part with keys {:?}: neither a package.json, a lockfile, nor parameters (targetRuntime, targetPackages)",
                obj.keys().collect::<Vec<_>>()
            ));
        }
    }

    fn set_runtime(&mut self, key: &str, v: &Value) -> bool {
        let value = match v {
            Value::String(s) => s.trim().to_owned(),
            Value::Number(n) => n.to_string(),
            _ => return false,
        };
        if value.is_empty() {
            return false;
        }
        match key.to_ascii_lowercase().as_str() {
            "node" | "nodejs" | "node.js" => self.node = Some(value),
            "rust" | "rustc" => self.rust = Some(value),
            _ => return false,
        }
        true
    }

    /// Targets named in free text.
    pub fn add_text(&mut self, text: &str) {
        let found = parse_text(text);
        if found.node.is_some() {
            self.node = found.node;
        }
        if found.rust.is_some() {
            self.rust = found.rust;
        }
        for (name, version) in found.packages {
            self.packages.insert(
                name,
                PackageTarget {
                    version,
                    ..Default::default()
                },
            );
        }
    }
}

fn unsupported_file(name: &str) -> String {
    let base = name.rsplit(['/', '\\']).next().unwrap_or(name);
    match base {
        "yarn.lock" | "pnpm-lock.yaml" | "bun.lockb" | "bun.lock" => {
            format!("{name}: only npm (package-lock.json v2/v3) and Cargo lockfiles are supported")
        }
        _ => format!("{name}: not a file this agent reads"),
    }
}

/// Recognises a pasted Cargo.toml or Cargo.lock.
fn toml_kind(t: &str) -> Option<FileKind> {
    let has_line = |prefix: &str| t.lines().any(|l| l.trim_start().starts_with(prefix));
    if has_line("[[package]]") && t.parse::<toml::Table>().is_ok() {
        return Some(FileKind::CargoLock);
    }
    if (has_line("[package]") || has_line("[workspace]")) && t.parse::<toml::Table>().is_ok() {
        return Some(FileKind::CargoToml);
    }
    None
}

fn package_target(spec: &Value) -> Option<PackageTarget> {
    match spec {
        Value::String(v) => Some(PackageTarget {
            version: v.trim().to_owned(),
            ..Default::default()
        }),
        Value::Object(_) => {
            let version = spec.get("version")?.as_str()?.trim().to_owned();
            Some(PackageTarget {
                version,
                engines_node: super::npm::engines_node(spec),
                peer_dependencies: spec
                    .get("peerDependencies")
                    .and_then(Value::as_object)
                    .map(|m| {
                        m.iter()
                            .filter_map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_owned())))
                            .collect()
                    })
                    .unwrap_or_default(),
            })
        }
        _ => None,
    }
}

/// What free text names.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TextTargets {
    /// A Node.js version.
    pub node: Option<String>,
    /// A Rust version.
    pub rust: Option<String>,
    /// `name@version` and "upgrade name to version".
    pub packages: BTreeMap<String, String>,
}

/// Finds the targets named in free text.
pub fn parse_text(text: &str) -> TextTargets {
    let lower = text.to_ascii_lowercase();
    let mut out = TextTargets::default();
    for (kw, rust) in [
        ("node", false),
        ("rust-version", true),
        ("rustc", true),
        ("rust", true),
        ("msrv", true),
    ] {
        for (i, _) in lower.match_indices(kw) {
            if i > 0 {
                let prev = lower.as_bytes()[i - 1];
                if prev.is_ascii_alphanumeric() || prev == b'_' || prev == b'-' || prev == b'/' {
                    continue;
                }
            }
            let mut rest = &lower[i + kw.len()..];
            if !rust {
                rest = rest
                    .strip_prefix(".js")
                    .or_else(|| rest.strip_prefix("js"))
                    .unwrap_or(rest);
            }
            let Some(v) = version_after(rest) else {
                continue;
            };
            if rust {
                if out.rust.is_none() && super::cargo::RustTarget::parse(&v).is_some() {
                    out.rust = Some(v);
                }
            } else if out.node.is_none() && super::npm::NodeTarget::parse(&v).is_some() {
                out.node = Some(v);
            }
        }
    }
    let tokens: Vec<&str> = text
        .split(|c: char| c.is_whitespace() || c == ',' || c == ';')
        .map(|t| t.trim_matches(|c: char| "()[]{}\"'`".contains(c)))
        .map(|t| t.trim_end_matches(['.', ':', '!', '?']))
        .filter(|t| !t.is_empty())
        .collect();
    for (i, t) in tokens.iter().enumerate() {
        // name@version (scoped: @scope/name@version)
        if let Some(at) = t.rfind('@') {
            if at > 0 {
                let (name, version) = (&t[..at], &t[at + 1..]);
                if is_package_name(name) && Version::parse(version).is_ok() {
                    out.packages.insert(name.to_owned(), version.to_owned());
                }
            }
        }
        // "<name> to <version>"
        if t.eq_ignore_ascii_case("to") && i > 0 {
            let (name, version) = (tokens[i - 1], tokens.get(i + 1).copied().unwrap_or(""));
            if is_package_name(name)
                && name.chars().any(|c| c.is_ascii_alphabetic())
                && Version::parse(version).is_ok()
            {
                out.packages.insert(name.to_owned(), version.to_owned());
            }
        }
    }
    out
}

/// A version right after a keyword: `24`, ` 24.1`, `@24`, `: v1.80`,
/// ` version 24`.
fn version_after(s: &str) -> Option<String> {
    let mut rest = s.trim_start_matches([' ', '\t', ':', '=', '@']);
    rest = rest.strip_prefix("version").unwrap_or(rest);
    rest = rest.trim_start_matches([' ', '\t', ':', '=']);
    rest = rest.strip_prefix('v').unwrap_or(rest);
    if !rest.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    let end = rest
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '.' || c == '-'))
        .unwrap_or(rest.len());
    let v = rest[..end].trim_end_matches(['.', '-']);
    (!v.is_empty()).then(|| v.to_owned())
}

fn is_package_name(name: &str) -> bool {
    const NOT_PACKAGES: &[&str] = &[
        "node",
        "nodejs",
        "node.js",
        "rust",
        "rustc",
        "it",
        "them",
        "this",
        "that",
        "upgrade",
        "version",
        "versions",
        "all",
        "everything",
    ];
    if name.is_empty()
        || name.len() > 214
        || NOT_PACKAGES.contains(&name.to_ascii_lowercase().as_str())
    {
        return false;
    }
    let body = match name.strip_prefix('@') {
        Some(scoped) => match scoped.split_once('/') {
            Some((scope, n)) if !scope.is_empty() && !n.is_empty() => format!("{scope}{n}"),
            _ => return false,
        },
        None => name.to_owned(),
    };
    body.chars()
        .all(|c| c.is_ascii_alphanumeric() || "-._~".contains(c))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_in_text() {
        let t = parse_text("Target environment is Node.js 24; also upgrade express to 5.1.0.");
        assert_eq!(t.node.as_deref(), Some("24"));
        assert_eq!(t.packages.get("express").map(String::as_str), Some("5.1.0"));
        let t = parse_text("check against node v22.12.0 with @acme/auth-middleware@2.0.0");
        assert_eq!(t.node.as_deref(), Some("22.12.0"));
        assert_eq!(
            t.packages.get("@acme/auth-middleware").map(String::as_str),
            Some("2.0.0")
        );
        let t = parse_text("Build with Rust 1.80 and bump thiserror to 2.0.3");
        assert_eq!(t.rust.as_deref(), Some("1.80"));
        assert_eq!(
            t.packages.get("thiserror").map(String::as_str),
            Some("2.0.3")
        );
        // Not targets.
        let t =
            parse_text("upgrade payment-service to Node 24 (node_modules 12, rust 2024 edition)");
        assert_eq!(t.node.as_deref(), Some("24"));
        assert_eq!(t.rust, None);
        assert!(t.packages.is_empty(), "{:?}", t.packages);
        assert_eq!(parse_text("analyse the dependencies").node, None);
    }

    #[test]
    fn data_parameters() {
        let mut i = Inputs::default();
        i.add_data(serde_json::json!({
            "targetRuntime": {"node": 24, "rust": "1.80"},
            "targetPackages": {"express": {"version": "5.1.0", "engines": {"node": ">= 18"}}}
        }));
        assert_eq!(i.node.as_deref(), Some("24"));
        assert_eq!(i.rust.as_deref(), Some("1.80"));
        let e = i.packages.get("express").expect("express");
        assert_eq!(e.engines_node.as_deref(), Some(">= 18"));
        assert!(i.ignored.is_empty());
    }
}
