//! npm projects: `package.json` and `package-lock.json` (lockfile v2/v3,
//! npm 7 and later), checked against a target Node.js version and target
//! versions of named packages.
//!
//! What is checked, and how npm itself would see it:
//!
//! - `engines.node` of the project and of every installed package, with
//!   `includePrerelease` as `npm install` checks engines
//!   (`npm-install-checks`), against a whole release line ("Node.js 24":
//!   every 24.x) or one exact version;
//! - peer dependency ranges against the version Node's module resolution
//!   would load from the dependent's place in `node_modules` (optional
//!   peers may be absent);
//! - packages installed in several versions, deprecated packages, and a
//!   `package.json` the lockfile no longer matches (`npm ci` refuses it);
//! - what upgrading a named package to a target version would violate: peer
//!   ranges of its dependents (an `ERESOLVE` conflict), dependents' own
//!   ranges (they keep a nested older copy), the project's range, and the
//!   new version's `engines` / peers when the request gives them (offline,
//!   nothing is fetched from a registry).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::report::{Ecosystem, Finding, Kind, Project, Risk, Unchecked};
use super::semver::{Coverage, Range, Version};

/// The Node.js version the project should run on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeTarget {
    /// One exact version (`24.1.0`, `24.0.0-rc.1`).
    Exact(Version),
    /// Every release of a line: `24` (24.x) or `24.1` (24.1.x).
    Line {
        /// Major.
        major: u64,
        /// Minor, for a minor line.
        minor: Option<u64>,
    },
}

impl NodeTarget {
    /// Parses `24`, `24.x`, `v24.1`, `24.1.0`, `24.0.0-rc.1`.
    pub fn parse(input: &str) -> Option<Self> {
        let s = input.trim();
        let s = s.strip_prefix(['v', 'V']).unwrap_or(s);
        let s = s.strip_suffix(".x").unwrap_or(s);
        if let Ok(v) = Version::parse(s) {
            return Some(NodeTarget::Exact(v));
        }
        let mut parts = s.split('.');
        let major = parts.next()?.parse::<u64>().ok()?;
        let minor = match parts.next() {
            Some(m) => Some(m.parse::<u64>().ok()?),
            None => None,
        };
        if parts.next().is_some() || major == 0 || major > 1000 {
            return None;
        }
        Some(NodeTarget::Line { major, minor })
    }

    /// How a person writes it: `24`, `24.1`, `24.1.0`.
    pub fn label(&self) -> String {
        match self {
            NodeTarget::Exact(v) => v.to_string(),
            NodeTarget::Line { major, minor } => match minor {
                Some(m) => format!("{major}.{m}"),
                None => major.to_string(),
            },
        }
    }

    /// "Node.js 24 (every 24.x release)".
    pub fn describe(&self) -> String {
        match self {
            NodeTarget::Exact(v) => format!("Node.js {v}"),
            NodeTarget::Line { major, minor: None } => {
                format!("Node.js {major} (every {major}.x release)")
            }
            NodeTarget::Line {
                major,
                minor: Some(m),
            } => format!("Node.js {major}.{m} (every {major}.{m}.x release)"),
        }
    }

    /// How much of the target an `engines.node` range accepts, as
    /// `npm install` evaluates engines (with prereleases included).
    pub fn check(&self, range: &str) -> Result<Coverage, String> {
        let r = Range::parse(range, true).map_err(|e| e.to_string())?;
        Ok(match self {
            NodeTarget::Exact(v) => {
                if r.satisfies(v) {
                    Coverage::All
                } else {
                    Coverage::None
                }
            }
            NodeTarget::Line { major, minor } => {
                let (lo, hi) = match minor {
                    None => (
                        Version::new(*major, 0, 0),
                        Version {
                            major: major.saturating_add(1),
                            minor: 0,
                            patch: 0,
                            pre: vec![super::semver::Ident::Num(0)],
                        },
                    ),
                    Some(m) => (
                        Version::new(*major, *m, 0),
                        Version {
                            major: *major,
                            minor: m.saturating_add(1),
                            patch: 0,
                            pre: vec![super::semver::Ident::Num(0)],
                        },
                    ),
                };
                r.coverage(&lo, &hi)
            }
        })
    }
}

/// A package the request wants at a given version, with what is known of
/// that version (from a data part or its `package.json`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PackageTarget {
    /// The target version.
    pub version: String,
    /// Its `engines.node`, when known.
    pub engines_node: Option<String>,
    /// Its peer dependencies, when known.
    pub peer_dependencies: BTreeMap<String, String>,
}

/// One entry of the lockfile's `packages` map.
#[derive(Debug, Clone, Default)]
pub struct Entry {
    /// Its key (`node_modules/a/node_modules/b`, `""` for the root).
    pub path: String,
    /// The package name.
    pub name: String,
    /// The installed version.
    pub version: Option<String>,
    /// Only needed by development dependencies.
    pub dev: bool,
    /// Only needed by optional dependencies.
    pub optional: bool,
    /// A link to another entry (workspaces).
    pub link: bool,
    /// Where it came from (the target path of a link).
    pub resolved: Option<String>,
    /// The deprecation message.
    pub deprecated: Option<String>,
    /// `engines.node`.
    pub engines_node: Option<String>,
    /// `dependencies`.
    pub dependencies: BTreeMap<String, String>,
    /// `optionalDependencies`.
    pub optional_dependencies: BTreeMap<String, String>,
    /// `devDependencies` (root and workspaces only).
    pub dev_dependencies: BTreeMap<String, String>,
    /// `peerDependencies`.
    pub peer_dependencies: BTreeMap<String, String>,
    /// Peers marked optional in `peerDependenciesMeta`.
    pub optional_peers: BTreeSet<String>,
}

impl Entry {
    fn from_json(path: &str, v: &Value) -> Self {
        let name = v
            .get("name")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .unwrap_or_else(|| name_from_path(path));
        let flag = |k: &str| v.get(k).and_then(Value::as_bool).unwrap_or(false);
        let text = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
        Self {
            path: path.to_owned(),
            name,
            version: text("version"),
            dev: flag("dev") || flag("devOptional"),
            optional: flag("optional"),
            link: flag("link"),
            resolved: text("resolved"),
            deprecated: text("deprecated"),
            engines_node: engines_node(v),
            dependencies: str_map(v.get("dependencies")),
            optional_dependencies: str_map(v.get("optionalDependencies")),
            dev_dependencies: str_map(v.get("devDependencies")),
            peer_dependencies: str_map(v.get("peerDependencies")),
            optional_peers: v
                .get("peerDependenciesMeta")
                .and_then(Value::as_object)
                .map(|m| {
                    m.iter()
                        .filter(|(_, meta)| {
                            meta.get("optional").and_then(Value::as_bool) == Some(true)
                        })
                        .map(|(k, _)| k.clone())
                        .collect()
                })
                .unwrap_or_default(),
        }
    }

    /// `name@version`.
    pub fn id(&self) -> String {
        match &self.version {
            Some(v) => format!("{}@{v}", self.name),
            None => self.name.clone(),
        }
    }

    /// A package of the project itself (the root or a workspace).
    fn is_project(&self) -> bool {
        !self.path.split('/').any(|s| s == "node_modules")
    }
}

/// `engines.node` of a manifest or lockfile entry (object form; the old
/// array form is not read).
pub fn engines_node(v: &Value) -> Option<String> {
    v.get("engines")
        .and_then(|e| e.get("node"))
        .and_then(Value::as_str)
        .map(str::to_owned)
}

fn str_map(v: Option<&Value>) -> BTreeMap<String, String> {
    v.and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_owned())))
                .collect()
        })
        .unwrap_or_default()
}

/// The package name a lockfile path installs (`node_modules/@a/b` → `@a/b`).
fn name_from_path(path: &str) -> String {
    match path.rfind("node_modules/") {
        Some(i) => path[i + "node_modules/".len()..].to_owned(),
        None => path.rsplit('/').next().unwrap_or(path).to_owned(),
    }
}

/// A parsed `package-lock.json` (or `npm-shrinkwrap.json`).
#[derive(Debug, Clone)]
pub struct Lockfile {
    /// `lockfileVersion`.
    pub version: u64,
    /// The entries by path, the root at `""`.
    pub entries: BTreeMap<String, Entry>,
}

impl Lockfile {
    /// Reads a lockfile; v1 (npm 5 and 6) is refused with what to do.
    pub fn parse(v: &Value) -> Result<Self, String> {
        let Some(version) = v.get("lockfileVersion").and_then(Value::as_u64) else {
            return Err("it has no lockfileVersion: is it really a package-lock.json?".into());
        };
        if version < 2 {
            return Err(format!(
                "it is lockfileVersion {version} (npm 5/6), which records neither engines nor peer \
                 dependencies; regenerate it with npm 7 or later \
                 (`npm install --package-lock-only`) and send it again"
            ));
        }
        let Some(packages) = v.get("packages").and_then(Value::as_object) else {
            return Err(format!(
                "lockfileVersion {version} needs a \"packages\" object, and it has none"
            ));
        };
        let mut entries: BTreeMap<String, Entry> = packages
            .iter()
            .map(|(path, e)| (path.clone(), Entry::from_json(path, e)))
            .collect();
        if !entries.contains_key("") {
            let root = Entry {
                name: v
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or("(root)")
                    .to_owned(),
                version: v.get("version").and_then(Value::as_str).map(str::to_owned),
                ..Default::default()
            };
            entries.insert(String::new(), root);
        }
        Ok(Self { version, entries })
    }

    /// The root entry.
    pub fn root(&self) -> Option<&Entry> {
        self.entries.get("")
    }

    /// The installed packages (no root, no workspace links).
    pub fn installed(&self) -> impl Iterator<Item = &Entry> {
        self.entries
            .values()
            .filter(|e| !e.path.is_empty() && !e.link)
    }

    /// The entry Node's module resolution loads when `from` requires `dep`:
    /// `from/node_modules/dep`, then each enclosing `node_modules`.
    pub fn resolve(&self, from: &str, dep: &str) -> Option<&Entry> {
        let mut base = from.to_owned();
        loop {
            let candidate = if base.is_empty() {
                format!("node_modules/{dep}")
            } else {
                format!("{base}/node_modules/{dep}")
            };
            if let Some(e) = self.entries.get(&candidate) {
                return Some(self.follow_link(e));
            }
            if base.is_empty() {
                return None;
            }
            match base.rfind("/node_modules/") {
                Some(i) => base.truncate(i),
                None => base.clear(),
            }
        }
    }

    fn follow_link<'a>(&'a self, e: &'a Entry) -> &'a Entry {
        if e.link {
            if let Some(target) = e.resolved.as_deref().and_then(|r| self.entries.get(r)) {
                return target;
            }
        }
        e
    }
}

/// Who requires a package, with which range and how.
#[derive(Debug, Clone)]
struct Dependent {
    from: String,
    from_id: String,
    range: String,
    peer: bool,
}

/// What an npm analysis found.
#[derive(Debug, Clone)]
pub struct NpmAnalysis {
    /// What was analysed.
    pub project: Project,
    /// The findings, in the order found.
    pub findings: Vec<Finding>,
    /// What could not be checked.
    pub unchecked: Vec<Unchecked>,
    /// Remarks.
    pub notes: Vec<String>,
}

/// The files of one npm project.
#[derive(Debug, Clone)]
pub struct NpmFiles<'a> {
    /// `package.json`, when sent.
    pub manifest: Option<&'a Value>,
    /// The lockfile.
    pub lockfile: &'a Value,
    /// The names the files were sent under.
    pub file_names: Vec<String>,
}

fn finding(kind: Kind, risk: Risk, e: &Entry, detail: String, fix: String) -> Finding {
    Finding {
        id: String::new(),
        ecosystem: Ecosystem::Npm,
        kind,
        risk,
        package: e.name.clone(),
        version: e.version.clone(),
        paths: if e.path.is_empty() {
            Vec::new()
        } else {
            vec![e.path.clone()]
        },
        dev: e.dev,
        detail,
        fix,
    }
}

/// Analyses an npm project for `node` and the named `packages`.
pub fn analyse(
    files: &NpmFiles<'_>,
    node: &NodeTarget,
    packages: &BTreeMap<String, PackageTarget>,
) -> Result<NpmAnalysis, String> {
    let lock = Lockfile::parse(files.lockfile).map_err(|e| format!("package-lock.json: {e}"))?;
    let mut findings = Vec::new();
    let mut unchecked = Vec::new();
    let mut notes = Vec::new();
    let target = node.describe();

    let root = lock.root().cloned().unwrap_or_default();
    let project_name = files
        .manifest
        .and_then(|m| m.get("name"))
        .and_then(Value::as_str)
        .map(str::to_owned)
        .unwrap_or_else(|| root.name.clone());
    let project_version = files
        .manifest
        .and_then(|m| m.get("version"))
        .and_then(Value::as_str)
        .map(str::to_owned)
        .or_else(|| root.version.clone());
    if lock.version > 3 {
        notes.push(format!(
            "lockfileVersion {} is newer than the v3 this agent knows; it was read as v3",
            lock.version
        ));
    }
    if files.manifest.is_none() {
        notes.push(
            "no package.json was sent: the project's ranges and engines come from the lockfile's root entry"
                .into(),
        );
    }

    // 1. The project's own engines.node (package.json first, else the root
    //    entry), and those of workspace packages.
    let project_engines = files
        .manifest
        .and_then(engines_node)
        .or_else(|| root.engines_node.clone());
    let mut root_entry = root.clone();
    root_entry.name.clone_from(&project_name);
    root_entry.version.clone_from(&project_version);
    if let Some(range) = &project_engines {
        engine_finding(
            &mut findings,
            &mut notes,
            node,
            &target,
            &root_entry,
            range,
            true,
        );
    }
    for e in lock.installed().filter(|e| e.is_project()) {
        if let Some(range) = &e.engines_node {
            engine_finding(&mut findings, &mut notes, node, &target, e, range, true);
        }
    }

    // 2. engines.node of every installed package.
    for e in lock.installed().filter(|e| !e.is_project()) {
        match &e.engines_node {
            Some(range) => {
                engine_finding(&mut findings, &mut notes, node, &target, e, range, false)
            }
            None => unchecked.push(Unchecked {
                package: e.name.clone(),
                version: e.version.clone(),
                reason: "declares no engines.node: no runtime constraint to check".into(),
            }),
        }
    }

    // 3. Peer dependencies against what resolution would load.
    for e in lock.entries.values().filter(|e| !e.link) {
        for (peer, range) in &e.peer_dependencies {
            let Some(installed) = lock.resolve(&e.path, peer) else {
                if !e.optional_peers.contains(peer) {
                    let risk = if e.dev { Risk::Low } else { Risk::Medium };
                    findings.push(finding(
                        Kind::PeerMissing,
                        risk,
                        e,
                        format!(
                            "peer dependency {peer} \"{range}\" is not installed where {} can load it",
                            e.id()
                        ),
                        format!("Install {peer} in a version matching \"{range}\""),
                    ));
                }
                continue;
            };
            let Some(version) = installed.version.as_deref() else {
                continue;
            };
            match peer_ok(version, range) {
                Some(true) => {}
                Some(false) => {
                    let risk = if e.dev { Risk::Medium } else { Risk::High };
                    findings.push(finding(
                        Kind::Peer,
                        risk,
                        e,
                        format!(
                            "peer dependency {peer} \"{range}\" is not satisfied by the installed {peer}@{version}"
                        ),
                        format!(
                            "Move {peer} into \"{range}\" or upgrade {} to a release whose peer range accepts {peer}@{version}",
                            e.name
                        ),
                    ));
                }
                None => notes.push(format!(
                    "{} declares peer {peer} \"{range}\", which is not a semver range; not checked",
                    e.id()
                )),
            }
        }
    }

    // 4. package.json against the lockfile (what `npm ci` checks).
    if let Some(manifest) = files.manifest {
        for field in ["dependencies", "devDependencies", "optionalDependencies"] {
            for (dep, range) in str_map(manifest.get(field)) {
                let Some(installed) = lock.resolve("", &dep) else {
                    findings.push(finding(
                        Kind::OutOfSync,
                        Risk::Medium,
                        &root_entry,
                        format!(
                            "package.json {field} lists {dep} \"{range}\" but the lockfile does not install it"
                        ),
                        "Regenerate the lockfile (`npm install`) and commit it; `npm ci` refuses a lockfile out of sync"
                            .into(),
                    ));
                    continue;
                };
                if let (Some(v), Some(false)) = (
                    installed.version.as_deref(),
                    installed
                        .version
                        .as_deref()
                        .and_then(|v| peer_ok(v, &range)),
                ) {
                    findings.push(finding(
                        Kind::OutOfSync,
                        Risk::Medium,
                        &root_entry,
                        format!(
                            "package.json {field} asks {dep} \"{range}\" but the lockfile installs {dep}@{v}"
                        ),
                        "Regenerate the lockfile (`npm install`) and commit it; `npm ci` refuses a lockfile out of sync"
                            .into(),
                    ));
                }
            }
        }
    }

    // Who requires what, for the upgrade and duplicate checks.
    let mut dependents: BTreeMap<String, Vec<Dependent>> = BTreeMap::new();
    for e in lock.entries.values().filter(|e| !e.link) {
        let mut reqs: Vec<(&String, &String, bool)> = Vec::new();
        reqs.extend(e.dependencies.iter().map(|(k, v)| (k, v, false)));
        reqs.extend(e.optional_dependencies.iter().map(|(k, v)| (k, v, false)));
        if e.is_project() {
            reqs.extend(e.dev_dependencies.iter().map(|(k, v)| (k, v, false)));
        }
        reqs.extend(e.peer_dependencies.iter().map(|(k, v)| (k, v, true)));
        for (dep, range, peer) in reqs {
            if let Some(target) = lock.resolve(&e.path, dep) {
                dependents
                    .entry(target.path.clone())
                    .or_default()
                    .push(Dependent {
                        from: e.path.clone(),
                        from_id: if e.path.is_empty() {
                            project_name.clone()
                        } else {
                            e.id()
                        },
                        range: range.clone(),
                        peer,
                    });
            }
        }
    }

    // 5. Upgrades of named packages.
    for (name, want) in packages {
        upgrade_findings(
            &mut findings,
            &mut unchecked,
            &lock,
            &dependents,
            &root_entry,
            node,
            &target,
            name,
            want,
        );
    }

    // 6. Packages installed in several versions.
    let mut by_name: BTreeMap<&str, Vec<&Entry>> = BTreeMap::new();
    for e in lock.installed().filter(|e| !e.is_project()) {
        by_name.entry(&e.name).or_default().push(e);
    }
    for (name, copies) in &by_name {
        let versions: BTreeSet<&str> = copies.iter().filter_map(|e| e.version.as_deref()).collect();
        if versions.len() < 2 {
            continue;
        }
        let mut who = Vec::new();
        for e in copies {
            let by: Vec<String> = dependents
                .get(&e.path)
                .map(|d| {
                    d.iter()
                        .map(|d| format!("{} \"{}\"", d.from_id, d.range))
                        .collect()
                })
                .unwrap_or_default();
            who.push(format!(
                "{} at {} (required by {})",
                e.version.as_deref().unwrap_or("?"),
                e.path,
                if by.is_empty() {
                    "nothing".to_owned()
                } else {
                    by.join(", ")
                }
            ));
        }
        let versions: Vec<&str> = versions.into_iter().collect();
        findings.push(Finding {
            id: String::new(),
            ecosystem: Ecosystem::Npm,
            kind: Kind::Duplicate,
            risk: Risk::Low,
            package: (*name).to_owned(),
            version: None,
            paths: copies.iter().map(|e| e.path.clone()).collect(),
            dev: copies.iter().all(|e| e.dev),
            detail: format!(
                "installed in {} versions ({}): {}",
                versions.len(),
                versions.join(", "),
                who.join("; ")
            ),
            fix: format!(
                "Align the ranges that require {name} so one version satisfies them all, then `npm dedupe`"
            ),
        });
    }

    // 7. Deprecated packages.
    for e in lock.installed() {
        if let Some(msg) = &e.deprecated {
            findings.push(finding(
                Kind::Deprecated,
                Risk::Low,
                e,
                format!(
                    "deprecated: {}",
                    msg.split_whitespace().collect::<Vec<_>>().join(" ")
                ),
                format!(
                    "Replace {} (or the package that pulls it in) with a maintained alternative",
                    e.id()
                ),
            ));
        }
    }

    let mut file_names = files.file_names.clone();
    file_names.dedup();
    Ok(NpmAnalysis {
        project: Project {
            ecosystem: Ecosystem::Npm,
            name: project_name,
            version: project_version,
            files: file_names,
            lockfile_version: Some(lock.version),
            packages: lock.installed().count(),
        },
        findings,
        unchecked,
        notes,
    })
}

/// Whether `version` satisfies a dependency or peer range the way npm's
/// dependency validation does (no prerelease unless named); `None` when
/// the range is not a semver range (`latest`, `npm:...`, a URL).
fn peer_ok(version: &str, range: &str) -> Option<bool> {
    if range.trim() == "*" || range.trim().is_empty() {
        return Some(true);
    }
    let r = Range::parse(range, false).ok()?;
    let v = Version::parse(version).ok()?;
    Some(r.satisfies(&v))
}

fn engine_finding(
    findings: &mut Vec<Finding>,
    notes: &mut Vec<String>,
    node: &NodeTarget,
    target: &str,
    e: &Entry,
    range: &str,
    project: bool,
) {
    let kind = if project {
        Kind::ProjectEngines
    } else {
        Kind::Engines
    };
    match node.check(range) {
        Ok(Coverage::All) => {}
        Ok(Coverage::None) => {
            // npm skips an optional dependency whose engines do not match.
            let risk = if e.optional && !project {
                Risk::Low
            } else if e.dev && !project {
                Risk::Medium
            } else {
                Risk::High
            };
            let (detail, fix) = if project {
                (
                    format!("the project's engines.node \"{range}\" excludes {target}"),
                    format!(
                        "Widen engines.node in package.json to include Node.js {} once the dependencies below are fixed",
                        node.label()
                    ),
                )
            } else {
                (
                    format!(
                        "engines.node \"{range}\" excludes {target}{}",
                        if e.optional {
                            " (an optional dependency: npm skips it there)"
                        } else {
                            ""
                        }
                    ),
                    format!(
                        "Upgrade {} to a release whose engines.node accepts Node.js {}, or replace it",
                        e.name,
                        node.label()
                    ),
                )
            };
            findings.push(finding(kind, risk, e, detail, fix));
        }
        Ok(Coverage::Part(part)) => {
            let risk = if (e.dev || e.optional) && !project {
                Risk::Low
            } else {
                Risk::Medium
            };
            let detail = format!("engines.node \"{range}\" accepts only part of {target}: {part}");
            let fix = if project {
                format!(
                    "Widen engines.node in package.json to all of Node.js {}, or pin the runtime to {part}",
                    node.label()
                )
            } else {
                format!(
                    "Pin the runtime to {part}, or upgrade {} to a release that accepts all of Node.js {}",
                    e.name,
                    node.label()
                )
            };
            findings.push(finding(kind, risk, e, detail, fix));
        }
        Err(err) => {
            findings.push(finding(
                Kind::InvalidRange,
                Risk::Low,
                e,
                format!("engines.node \"{range}\" is not a valid range ({err}); npm counts it as unsatisfied (EBADENGINE)"),
                format!("Fix the engines.node range of {}", e.id()),
            ));
            notes.push(format!(
                "{}: engines.node {range:?} could not be parsed",
                e.id()
            ));
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn upgrade_findings(
    findings: &mut Vec<Finding>,
    unchecked: &mut Vec<Unchecked>,
    lock: &Lockfile,
    dependents: &BTreeMap<String, Vec<Dependent>>,
    root: &Entry,
    node: &NodeTarget,
    target: &str,
    name: &str,
    want: &PackageTarget,
) {
    let new_id = format!("{name}@{}", want.version);
    let pseudo = Entry {
        path: String::new(),
        name: name.to_owned(),
        version: Some(want.version.clone()),
        ..Default::default()
    };
    let copies: Vec<&Entry> = lock.installed().filter(|e| e.name == name).collect();
    if copies.is_empty() {
        findings.push(finding(
            Kind::UpgradeManifest,
            Risk::Info,
            &pseudo,
            format!("{name} is not installed; {new_id} would be a new dependency"),
            format!("Add {new_id} with `npm install {new_id}`"),
        ));
    }
    if Version::parse(&want.version).is_err() {
        findings.push(finding(
            Kind::InvalidRange,
            Risk::Low,
            &pseudo,
            format!(
                "the target version {:?} of {name} is not a version",
                want.version
            ),
            format!("Name an exact version of {name}"),
        ));
        return;
    }
    for copy in &copies {
        for d in dependents.get(&copy.path).into_iter().flatten() {
            let Some(ok) = peer_ok(&want.version, &d.range) else {
                continue;
            };
            if ok {
                continue;
            }
            let from = lock.entries.get(&d.from).cloned().unwrap_or_default();
            let from = if d.from.is_empty() {
                root.clone()
            } else {
                from
            };
            let (kind, risk, detail, fix) = if d.peer {
                (
                    Kind::UpgradePeer,
                    if from.dev { Risk::Medium } else { Risk::High },
                    format!(
                        "{} declares peer {name} \"{}\": {new_id} breaks it (npm refuses the install with ERESOLVE)",
                        d.from_id, d.range
                    ),
                    format!(
                        "Upgrade {} to a release whose peer range accepts {new_id} before upgrading {name}",
                        from.name
                    ),
                )
            } else if d.from.is_empty() {
                (
                    Kind::UpgradeManifest,
                    Risk::Low,
                    format!(
                        "package.json asks {name} \"{}\", which {new_id} does not satisfy",
                        d.range
                    ),
                    format!(
                        "Change the range of {name} in package.json (`npm install {new_id}` does it)"
                    ),
                )
            } else {
                (
                    Kind::UpgradeDependency,
                    if from.dev { Risk::Low } else { Risk::Medium },
                    format!(
                        "{} depends on {name} \"{}\": it would keep its own {name}@{} next to {new_id}",
                        d.from_id,
                        d.range,
                        copy.version.as_deref().unwrap_or("?")
                    ),
                    format!(
                        "Upgrade {} to a release that accepts {new_id}, or accept two copies of {name}",
                        from.name
                    ),
                )
            };
            findings.push(finding(kind, risk, &from, detail, fix));
        }
    }
    match &want.engines_node {
        Some(range) => match node.check(range) {
            Ok(Coverage::All) => {}
            Ok(Coverage::None) => findings.push(finding(
                Kind::UpgradeEngines,
                Risk::High,
                &pseudo,
                format!("{new_id} declares engines.node \"{range}\", which excludes {target}"),
                format!("Pick a version of {name} that supports Node.js {}", node.label()),
            )),
            Ok(Coverage::Part(part)) => findings.push(finding(
                Kind::UpgradeEngines,
                Risk::Medium,
                &pseudo,
                format!("{new_id} declares engines.node \"{range}\": only {part} of {target}"),
                format!("Pin the runtime to {part} or pick another version of {name}"),
            )),
            Err(e) => unchecked.push(Unchecked {
                package: name.to_owned(),
                version: Some(want.version.clone()),
                reason: format!("its engines.node \"{range}\" is not a valid range ({e})"),
            }),
        },
        None => unchecked.push(Unchecked {
            package: name.to_owned(),
            version: Some(want.version.clone()),
            reason: "engines.node of the target version is unknown offline; send its package.json (or engines in the targetPackages data) to check it".into(),
        }),
    }
    for (peer, range) in &want.peer_dependencies {
        let Some(installed) = lock.resolve("", peer) else {
            continue;
        };
        let Some(v) = installed.version.as_deref() else {
            continue;
        };
        if peer_ok(v, range) == Some(false) {
            findings.push(finding(
                Kind::UpgradeEngines,
                Risk::High,
                &pseudo,
                format!("{new_id} declares peer {peer} \"{range}\", not satisfied by the installed {peer}@{v}"),
                format!("Upgrade {peer} into \"{range}\" together with {name}"),
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_targets() {
        assert_eq!(
            NodeTarget::parse("24"),
            Some(NodeTarget::Line {
                major: 24,
                minor: None
            })
        );
        assert_eq!(
            NodeTarget::parse("v24.1"),
            Some(NodeTarget::Line {
                major: 24,
                minor: Some(1)
            })
        );
        assert_eq!(
            NodeTarget::parse("24.x").map(|t| t.label()),
            Some("24".into())
        );
        assert_eq!(
            NodeTarget::parse("24.0.0-rc.1").map(|t| t.label()),
            Some("24.0.0-rc.1".into())
        );
        assert_eq!(NodeTarget::parse("latest"), None);
        // npm's engines check includes prereleases: an rc is not <24.
        let rc = NodeTarget::parse("24.0.0-rc.1").expect("target");
        assert_eq!(rc.check(">=24").ok(), Some(Coverage::All));
        assert_eq!(rc.check("<24").ok(), Some(Coverage::None));
    }

    #[test]
    fn resolution_walks_up_node_modules() {
        let lock = serde_json::json!({
            "lockfileVersion": 3,
            "packages": {
                "": {"name": "app"},
                "node_modules/a": {"version": "1.0.0"},
                "node_modules/a/node_modules/b": {"version": "2.0.0"},
                "node_modules/b": {"version": "1.0.0"},
                "node_modules/@s/c": {"version": "3.0.0"},
                "packages/w": {"name": "w", "version": "0.1.0"},
                "node_modules/w": {"resolved": "packages/w", "link": true}
            }
        });
        let lock = Lockfile::parse(&lock).expect("lockfile");
        let v = |from: &str, dep: &str| lock.resolve(from, dep).and_then(|e| e.version.clone());
        assert_eq!(v("node_modules/a", "b").as_deref(), Some("2.0.0"));
        assert_eq!(
            v("node_modules/a/node_modules/b", "b").as_deref(),
            Some("2.0.0")
        );
        assert_eq!(v("", "b").as_deref(), Some("1.0.0"));
        assert_eq!(v("node_modules/@s/c", "b").as_deref(), Some("1.0.0"));
        assert_eq!(v("", "w").as_deref(), Some("0.1.0"));
        assert_eq!(v("", "missing"), None);
        assert_eq!(
            lock.entries
                .get("node_modules/@s/c")
                .map(|e| e.name.as_str()),
            Some("@s/c")
        );
    }

    #[test]
    fn optional_packages_that_do_not_fit_are_skipped_by_npm() {
        let lock = serde_json::json!({
            "lockfileVersion": 3,
            "packages": {
                "": {"name": "app", "version": "1.0.0"},
                "node_modules/native-thing": {
                    "version": "1.0.0", "optional": true, "engines": {"node": "<20"}
                },
                "node_modules/required-thing": {
                    "version": "1.0.0", "engines": {"node": "<20"}
                }
            }
        });
        let files = NpmFiles {
            manifest: None,
            lockfile: &lock,
            file_names: vec!["package-lock.json".into()],
        };
        let node = NodeTarget::parse("24").expect("24");
        let a = analyse(&files, &node, &BTreeMap::new()).expect("analysis");
        let risks: Vec<(&str, Risk)> = a
            .findings
            .iter()
            .map(|f| (f.package.as_str(), f.risk))
            .collect();
        assert_eq!(
            risks,
            [("native-thing", Risk::Low), ("required-thing", Risk::High)]
        );
        assert!(a.findings[0].detail.contains("optional dependency"));
        assert!(
            a.notes
                .iter()
                .any(|n| n.contains("no package.json was sent"))
        );
    }

    #[test]
    fn lockfile_v1_is_refused_with_what_to_do() {
        let err = Lockfile::parse(&serde_json::json!({"lockfileVersion": 1, "dependencies": {}}))
            .expect_err("v1");
        assert!(err.contains("npm install --package-lock-only"), "{err}");
    }
}
