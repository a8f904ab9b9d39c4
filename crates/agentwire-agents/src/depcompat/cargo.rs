//! Cargo projects: `Cargo.toml` (a package, a workspace, or both),
//! `Cargo.lock`, and any other crate manifests the request carries, checked
//! against a target Rust version.
//!
//! `Cargo.lock` records names, versions and sources, not `rust-version`:
//! the minimum Rust of a registry crate is only known when its
//! `Cargo.toml` is sent along. Everything else in the lockfile is listed as
//! not checked, with that reason: nothing is fetched from a registry.
//!
//! Checks: each known crate's `rust-version` (inherited from
//! `[workspace.package]` where the manifest says so) and `edition` against
//! the target, the lockfile format against the Cargo that must read it,
//! crates locked in several versions, and what a target version of a named
//! crate would need changed in the manifests' requirements (Cargo's
//! semver rules).

use std::collections::{BTreeMap, BTreeSet};

use ::semver as cargo_semver;
use toml::{Table, Value};

use super::report::{Ecosystem, Finding, Kind, Project, Risk, Unchecked};

/// The Rust version the project should build with: `1.80` (every 1.80.x)
/// or `1.80.1`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RustTarget {
    /// Major (1).
    pub major: u64,
    /// Minor.
    pub minor: u64,
    /// Patch, for an exact version.
    pub patch: Option<u64>,
}

impl RustTarget {
    /// Parses `1.80`, `1.80.1`, `v1.80`.
    pub fn parse(input: &str) -> Option<Self> {
        let s = input.trim().trim_start_matches(['v', 'V']);
        let mut parts = s.split('.');
        let major = parts.next()?.parse().ok()?;
        let minor = parts.next()?.parse().ok()?;
        let patch = match parts.next() {
            Some(p) => Some(p.parse().ok()?),
            None => None,
        };
        if parts.next().is_some() || major != 1 {
            return None;
        }
        Some(Self {
            major,
            minor,
            patch,
        })
    }

    /// `1.80` or `1.80.1`.
    pub fn label(&self) -> String {
        match self.patch {
            Some(p) => format!("{}.{}.{p}", self.major, self.minor),
            None => format!("{}.{}", self.major, self.minor),
        }
    }

    /// Whether this Rust is at least `need` (a `rust-version` value): for a
    /// minor line, whether every release of the line is; `Some(false)` when
    /// only later patches are (`rust-version = "1.80.1"` on `1.80`).
    fn meets(&self, need: (u64, u64, u64)) -> Coverage {
        let (nm, nn, np) = need;
        let have = (self.major, self.minor);
        if have > (nm, nn) {
            return Coverage::All;
        }
        if have < (nm, nn) {
            return Coverage::None;
        }
        match self.patch {
            Some(p) if p >= np => Coverage::All,
            Some(_) => Coverage::None,
            None if np == 0 => Coverage::All,
            None => Coverage::Part,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Coverage {
    All,
    Part,
    None,
}

/// Parses a `rust-version` value (`1.74`, `1.74.1`).
fn parse_rust_version(s: &str) -> Option<(u64, u64, u64)> {
    let mut parts = s.trim().split('.');
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    let patch = match parts.next() {
        Some(p) => p.parse().ok()?,
        None => 0,
    };
    parts.next().is_none().then_some((major, minor, patch))
}

/// The first Rust that knows an edition.
fn edition_min(edition: &str) -> Option<(u64, u64, u64)> {
    match edition {
        "2015" => Some((1, 0, 0)),
        "2018" => Some((1, 31, 0)),
        "2021" => Some((1, 56, 0)),
        "2024" => Some((1, 85, 0)),
        _ => None,
    }
}

/// One crate manifest that was sent.
#[derive(Debug, Clone)]
pub struct Manifest {
    /// The name it was sent under (`crates/core/Cargo.toml`).
    pub file: String,
    /// The parsed TOML.
    pub toml: Table,
}

/// The files of one Cargo project.
#[derive(Debug, Clone, Default)]
pub struct CargoFiles {
    /// Every `Cargo.toml` sent; the one with the shortest path is the root.
    pub manifests: Vec<Manifest>,
    /// `Cargo.lock`, parsed.
    pub lock: Option<Table>,
    /// The name the lockfile was sent under.
    pub lock_file: Option<String>,
}

/// What a Cargo analysis found.
#[derive(Debug, Clone)]
pub struct CargoAnalysis {
    /// What was analysed.
    pub project: Project,
    /// Findings, in the order found.
    pub findings: Vec<Finding>,
    /// What could not be checked.
    pub unchecked: Vec<Unchecked>,
    /// Remarks.
    pub notes: Vec<String>,
}

/// A crate described by one of the manifests.
#[derive(Debug, Clone)]
struct Crate {
    name: String,
    version: Option<String>,
    file: String,
    rust_version: Option<String>,
    rust_version_inherited: bool,
    edition: Option<String>,
    /// Requirements on other crates: (dependency, requirement, table).
    requirements: Vec<(String, String, String)>,
}

fn str_of<'a>(t: &'a Table, key: &str) -> Option<&'a str> {
    t.get(key).and_then(Value::as_str)
}

/// A `[package]` field that may be `{ workspace = true }`.
fn inherited(package: &Table, key: &str, workspace: Option<&Table>) -> (Option<String>, bool) {
    match package.get(key) {
        Some(Value::String(s)) => (Some(s.clone()), false),
        Some(Value::Table(t)) if t.get("workspace").and_then(Value::as_bool) == Some(true) => (
            workspace.and_then(|w| str_of(w, key)).map(str::to_owned),
            true,
        ),
        _ => (None, false),
    }
}

/// The requirement string of one dependency entry (`"1.0"` or
/// `{ version = "1.0" }`), following `workspace = true`.
fn requirement(v: &Value, workspace_deps: Option<&Table>, name: &str) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Table(t) => {
            if t.get("workspace").and_then(Value::as_bool) == Some(true) {
                return workspace_deps
                    .and_then(|w| w.get(name))
                    .and_then(|v| requirement(v, None, name));
            }
            str_of(t, "version").map(str::to_owned)
        }
        _ => None,
    }
}

/// The real crate name of a dependency entry (`package = "..."` renames).
fn dep_name(key: &str, v: &Value) -> String {
    v.as_table()
        .and_then(|t| str_of(t, "package"))
        .unwrap_or(key)
        .to_owned()
}

fn crates_of(manifests: &[Manifest]) -> (Vec<Crate>, Option<(String, Option<String>)>) {
    // The root is the manifest with the shortest path.
    let root = manifests
        .iter()
        .min_by_key(|m| (m.file.matches('/').count(), m.file.len()));
    let workspace = root
        .and_then(|m| m.toml.get("workspace"))
        .and_then(Value::as_table);
    let ws_package = workspace
        .and_then(|w| w.get("package"))
        .and_then(Value::as_table);
    let ws_deps = workspace
        .and_then(|w| w.get("dependencies"))
        .and_then(Value::as_table);
    let mut crates = Vec::new();
    for m in manifests {
        let Some(package) = m.toml.get("package").and_then(Value::as_table) else {
            continue;
        };
        let Some(name) = str_of(package, "name") else {
            continue;
        };
        let (version, _) = inherited(package, "version", ws_package);
        let (rust_version, rv_inherited) = inherited(package, "rust-version", ws_package);
        let (edition, _) = inherited(package, "edition", ws_package);
        let mut requirements = Vec::new();
        let mut tables: Vec<(String, &Table)> = Vec::new();
        for key in ["dependencies", "dev-dependencies", "build-dependencies"] {
            if let Some(t) = m.toml.get(key).and_then(Value::as_table) {
                tables.push((key.to_owned(), t));
            }
        }
        if let Some(targets) = m.toml.get("target").and_then(Value::as_table) {
            for (cfg, t) in targets {
                for key in ["dependencies", "dev-dependencies", "build-dependencies"] {
                    if let Some(d) = t.get(key).and_then(Value::as_table) {
                        tables.push((format!("target.{cfg}.{key}"), d));
                    }
                }
            }
        }
        for (table, deps) in tables {
            for (key, v) in deps {
                if let Some(req) = requirement(v, ws_deps, key) {
                    requirements.push((dep_name(key, v), req, table.clone()));
                }
            }
        }
        crates.push(Crate {
            name: name.to_owned(),
            version,
            file: m.file.clone(),
            rust_version,
            rust_version_inherited: rv_inherited,
            edition,
            requirements,
        });
    }
    let root_id = root.and_then(|m| {
        let package = m.toml.get("package").and_then(Value::as_table);
        let name = package.and_then(|p| str_of(p, "name")).map(str::to_owned);
        let version = package.and_then(|p| inherited(p, "version", ws_package).0);
        name.map(|n| (n, version))
    });
    (crates, root_id)
}

/// One `[[package]]` of the lockfile.
#[derive(Debug, Clone)]
struct Locked {
    name: String,
    version: String,
    source: Option<String>,
}

fn locked_packages(lock: &Table) -> Vec<Locked> {
    lock.get("package")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_table)
                .filter_map(|p| {
                    Some(Locked {
                        name: str_of(p, "name")?.to_owned(),
                        version: str_of(p, "version")?.to_owned(),
                        source: str_of(p, "source").map(str::to_owned),
                    })
                })
                .collect()
        })
        .unwrap_or_default()
}

fn cargo_finding(
    kind: Kind,
    risk: Risk,
    package: &str,
    version: Option<&str>,
    file: Option<&str>,
    detail: String,
    fix: String,
) -> Finding {
    Finding {
        id: String::new(),
        ecosystem: Ecosystem::Cargo,
        kind,
        risk,
        package: package.to_owned(),
        version: version.map(str::to_owned),
        paths: file.map(|f| vec![f.to_owned()]).unwrap_or_default(),
        dev: false,
        detail,
        fix,
    }
}

/// Analyses a Cargo project for `rust` and the named crate versions.
pub fn analyse(
    files: &CargoFiles,
    rust: &RustTarget,
    crates_wanted: &BTreeMap<String, String>,
) -> CargoAnalysis {
    let mut findings = Vec::new();
    let mut unchecked = Vec::new();
    let mut notes = Vec::new();
    let target = format!("Rust {}", rust.label());
    let (crates, root) = crates_of(&files.manifests);
    let locked = files.lock.as_ref().map(locked_packages).unwrap_or_default();

    // 1. rust-version and edition of every crate whose manifest was sent.
    for c in &crates {
        let v = c.version.as_deref();
        match c.rust_version.as_deref() {
            Some(rv) => match parse_rust_version(rv) {
                Some(need) => {
                    let from = if c.rust_version_inherited {
                        " (inherited from [workspace.package])"
                    } else {
                        ""
                    };
                    match rust.meets(need) {
                        Coverage::All => {}
                        Coverage::None => findings.push(cargo_finding(
                            Kind::RustVersion,
                            Risk::High,
                            &c.name,
                            v,
                            Some(&c.file),
                            format!(
                                "rust-version = \"{rv}\"{from}: Cargo refuses to build it with {target}"
                            ),
                            format!(
                                "Raise the target to Rust {rv} or later, or use a release of {} whose rust-version is at most {}",
                                c.name,
                                rust.label()
                            ),
                        )),
                        Coverage::Part => findings.push(cargo_finding(
                            Kind::RustVersion,
                            Risk::Medium,
                            &c.name,
                            v,
                            Some(&c.file),
                            format!(
                                "rust-version = \"{rv}\"{from}: only the later patch releases of {target} build it"
                            ),
                            format!("Use Rust {rv} or a later patch release"),
                        )),
                    }
                }
                None => notes.push(format!(
                    "{}: rust-version {rv:?} is not a Rust version; not checked",
                    c.name
                )),
            },
            None => unchecked.push(Unchecked {
                package: c.name.clone(),
                version: c.version.clone(),
                reason: format!(
                    "{} declares no rust-version: its minimum Rust is unknown",
                    c.file
                ),
            }),
        }
        if let Some(ed) = c.edition.as_deref() {
            match edition_min(ed) {
                Some(need) if rust.meets(need) == Coverage::None => findings.push(cargo_finding(
                    Kind::Edition,
                    Risk::High,
                    &c.name,
                    v,
                    Some(&c.file),
                    format!(
                        "edition = \"{ed}\" needs Rust {}.{} or later; {target} does not know it",
                        need.0, need.1
                    ),
                    format!(
                        "Raise the target to Rust {}.{} or later, or keep {} on an older edition",
                        need.0, need.1, c.name
                    ),
                )),
                Some(_) => {}
                None => notes.push(format!("{}: unknown edition {ed:?}", c.name)),
            }
        }
    }

    // 2. The lockfile format.
    if let Some(lock) = &files.lock {
        let version = lock.get("version").and_then(Value::as_integer);
        let need = match version {
            Some(4) => Some(((1, 78, 0), "4")),
            Some(3) => Some(((1, 53, 0), "3")),
            _ => None,
        };
        if let Some((need, v)) = need {
            if rust.meets(need) == Coverage::None {
                findings.push(cargo_finding(
                    Kind::LockfileFormat,
                    Risk::High,
                    "Cargo.lock",
                    Some(v),
                    files.lock_file.as_deref(),
                    format!(
                        "Cargo.lock version {v} needs Cargo {}.{} or later; the Cargo of {target} cannot read it",
                        need.0, need.1
                    ),
                    format!(
                        "Regenerate Cargo.lock with the Cargo of {target} (`cargo generate-lockfile`), or raise the target"
                    ),
                ));
            }
        }
        if let Some(v) = version {
            if v > 4 {
                notes.push(format!(
                    "Cargo.lock version {v} is newer than the v4 this agent knows"
                ));
            }
        }
    } else {
        notes.push("no Cargo.lock was sent: only the crates of the manifests were checked".into());
    }

    // 3. Locked crates: checked when their manifest was sent, else listed.
    let known: BTreeSet<(&str, Option<&str>)> = crates
        .iter()
        .map(|c| (c.name.as_str(), c.version.as_deref()))
        .collect();
    let known_names: BTreeSet<&str> = crates.iter().map(|c| c.name.as_str()).collect();
    for p in &locked {
        let checked = known.contains(&(p.name.as_str(), Some(p.version.as_str())))
            || (p.source.is_none() && known_names.contains(p.name.as_str()));
        if checked {
            continue;
        }
        let reason = match p.source.as_deref() {
            Some(s) if s.starts_with("git+") => {
                "a git dependency: Cargo.lock does not record its rust-version; send its Cargo.toml to check it"
            }
            Some(_) => {
                "Cargo.lock does not record rust-version; send this crate's Cargo.toml to check it"
            }
            None => "a path crate whose Cargo.toml was not sent",
        };
        unchecked.push(Unchecked {
            package: p.name.clone(),
            version: Some(p.version.clone()),
            reason: reason.into(),
        });
    }

    // 4. Target versions of named crates against the manifests'
    //    requirements.
    for (name, version) in crates_wanted {
        let Ok(v) = cargo_semver::Version::parse(version) else {
            findings.push(cargo_finding(
                Kind::InvalidRange,
                Risk::Low,
                name,
                Some(version),
                None,
                format!("the target version {version:?} of {name} is not a version"),
                format!("Name an exact version of {name}"),
            ));
            continue;
        };
        let mut required_anywhere = false;
        for c in &crates {
            for (dep, req, table) in &c.requirements {
                if dep != name {
                    continue;
                }
                required_anywhere = true;
                match cargo_semver::VersionReq::parse(req) {
                    Ok(r) if r.matches(&v) => {}
                    Ok(_) => findings.push(cargo_finding(
                        Kind::UpgradeManifest,
                        Risk::Medium,
                        &c.name,
                        c.version.as_deref(),
                        Some(&c.file),
                        format!(
                            "[{table}] requires {name} = \"{req}\", which {name} {version} does not match"
                        ),
                        format!("Change the requirement on {name} in {} to accept {version}", c.file),
                    )),
                    Err(e) => notes.push(format!(
                        "{}: requirement {name} = {req:?} is not valid ({e})",
                        c.file
                    )),
                }
            }
        }
        if !required_anywhere {
            notes.push(format!(
                "no manifest sent requires {name}; {name} {version} was only checked where a manifest names it"
            ));
        }
        let locked_here = locked.iter().any(|p| p.name == *name);
        if locked_here {
            notes.push(format!(
                "the requirements of locked crates on {name} are not in Cargo.lock: crates outside the manifests sent may still pin an older {name}"
            ));
        }
    }

    // 5. Crates locked in several versions.
    let mut by_name: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for p in &locked {
        by_name.entry(&p.name).or_default().push(&p.version);
    }
    for (name, versions) in by_name {
        if versions.len() > 1 {
            findings.push(cargo_finding(
                Kind::Duplicate,
                Risk::Low,
                name,
                None,
                files.lock_file.as_deref(),
                format!(
                    "locked in {} versions ({}): each is compiled separately",
                    versions.len(),
                    versions.join(", ")
                ),
                format!(
                    "Find who needs each version (`cargo tree -d -i {name}`) and align them where the major versions allow"
                ),
            ));
        }
    }

    let mut file_names: Vec<String> = files.manifests.iter().map(|m| m.file.clone()).collect();
    file_names.extend(files.lock_file.clone());
    let (name, version) = root.unwrap_or_else(|| {
        (
            crates
                .first()
                .map(|c| c.name.clone())
                .unwrap_or_else(|| "(workspace)".into()),
            None,
        )
    });
    let lockfile_version = files
        .lock
        .as_ref()
        .and_then(|l| l.get("version"))
        .and_then(Value::as_integer)
        .and_then(|v| u64::try_from(v).ok());
    CargoAnalysis {
        project: Project {
            ecosystem: Ecosystem::Cargo,
            name,
            version,
            files: file_names,
            lockfile_version,
            packages: locked.len(),
        },
        findings,
        unchecked,
        notes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rust_targets() {
        let t = RustTarget::parse("1.80").expect("1.80");
        assert_eq!(t.meets((1, 74, 0)), Coverage::All);
        assert_eq!(t.meets((1, 80, 0)), Coverage::All);
        assert_eq!(t.meets((1, 80, 1)), Coverage::Part);
        assert_eq!(t.meets((1, 85, 0)), Coverage::None);
        let exact = RustTarget::parse("1.80.1").expect("1.80.1");
        assert_eq!(exact.meets((1, 80, 1)), Coverage::All);
        assert_eq!(exact.meets((1, 80, 2)), Coverage::None);
        assert_eq!(RustTarget::parse("2.0"), None);
        assert_eq!(RustTarget::parse("nightly"), None);
    }
}
