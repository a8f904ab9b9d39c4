//! The risk report: findings with a risk level and a fix each, the fixes
//! in order, what could not be checked, and its two renderings (the JSON
//! data of the `compatibility-report.json` artifact and the Markdown of
//! `compatibility-report.md`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The `schema` value of a report.
pub const SCHEMA: &str = "agentwire/depcompat-report@1";

/// How risky a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Risk {
    /// Breaks the upgrade (install refused, code declared incompatible).
    High,
    /// Likely trouble, or only part of the target line works.
    Medium,
    /// Worth cleaning up; does not block.
    Low,
    /// For the record.
    Info,
}

impl Risk {
    /// The lowercase name.
    pub fn as_str(self) -> &'static str {
        match self {
            Risk::High => "high",
            Risk::Medium => "medium",
            Risk::Low => "low",
            Risk::Info => "info",
        }
    }

    /// Parses `high`, `medium`, `low` or `info`.
    pub fn parse(s: &str) -> Option<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "high" | "critical" => Some(Risk::High),
            "medium" | "moderate" => Some(Risk::Medium),
            "low" => Some(Risk::Low),
            "info" => Some(Risk::Info),
            _ => None,
        }
    }

    /// One level lower (for problems that only touch dev dependencies).
    pub fn lowered(self) -> Self {
        match self {
            Risk::High => Risk::Medium,
            Risk::Medium => Risk::Low,
            r => r,
        }
    }
}

/// The ecosystem a finding belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Ecosystem {
    /// npm (package.json, package-lock.json).
    Npm,
    /// Cargo (Cargo.toml, Cargo.lock).
    Cargo,
}

/// What a finding is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// The project's own `engines.node` excludes (part of) the target.
    ProjectEngines,
    /// A package's `engines.node` excludes (part of) the target.
    Engines,
    /// A peer range not satisfied by the resolved version.
    Peer,
    /// A non-optional peer dependency that is not installed.
    PeerMissing,
    /// One package installed in several versions.
    Duplicate,
    /// A deprecated package.
    Deprecated,
    /// package.json and the lockfile disagree.
    OutOfSync,
    /// Upgrading a package breaks a dependent's peer range.
    UpgradePeer,
    /// Upgrading a package leaves a dependent on its own older copy.
    UpgradeDependency,
    /// Upgrading a package needs a manifest range changed.
    UpgradeManifest,
    /// The upgraded package's own requirements (engines, peers).
    UpgradeEngines,
    /// A crate's `rust-version` above the target Rust.
    RustVersion,
    /// A crate's edition needs a newer Rust than the target.
    Edition,
    /// The lockfile format needs a newer tool than the target.
    LockfileFormat,
    /// A range the agent could not parse.
    InvalidRange,
}

/// One problem found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Finding {
    /// `F1`, `F2`... in the order found.
    pub id: String,
    /// npm or Cargo.
    pub ecosystem: Ecosystem,
    /// What it is about.
    pub kind: Kind,
    /// How risky.
    pub risk: Risk,
    /// The package (or crate) concerned.
    pub package: String,
    /// Its installed version, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Where it is installed (lockfile paths).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub paths: Vec<String>,
    /// Only a development dependency.
    #[serde(default)]
    pub dev: bool,
    /// What is wrong, precisely.
    pub detail: String,
    /// What to do about it.
    pub fix: String,
}

/// One fix, covering one or more findings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Fix {
    /// 1-based position in the list.
    pub rank: usize,
    /// The highest risk among its findings.
    pub risk: Risk,
    /// What to do.
    pub action: String,
    /// The findings it resolves.
    pub finding_ids: Vec<String>,
}

/// Something the agent could not check, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Unchecked {
    /// The package or crate.
    pub package: String,
    /// Its version, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Why it was not checked.
    pub reason: String,
}

/// What was analysed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Project {
    /// npm or Cargo.
    pub ecosystem: Ecosystem,
    /// The project (root package) name.
    pub name: String,
    /// Its version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// The files read.
    pub files: Vec<String>,
    /// The lockfile format version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lockfile_version: Option<u64>,
    /// How many packages the lockfile installs.
    pub packages: usize,
}

/// The target the project was checked against.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Target {
    /// The Node.js version or line (`24`, `24.1.0`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// The Rust version or line (`1.80`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rust: Option<String>,
    /// Target versions of named packages.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub packages: BTreeMap<String, String>,
}

/// Counts per risk and the verdict.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    /// `blocked` (a high finding), `at-risk` (a medium one) or `ok`.
    pub verdict: String,
    /// High findings.
    pub high: usize,
    /// Medium findings.
    pub medium: usize,
    /// Low findings.
    pub low: usize,
    /// Informational findings.
    pub info: usize,
    /// Packages that could not be checked.
    pub unchecked: usize,
}

/// The order of [`Report::fixes`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FixOrder {
    /// The order the findings were found in (by check).
    Found,
    /// Highest risk first.
    Risk,
}

/// The whole report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// Always [`SCHEMA`].
    pub schema: String,
    /// What was analysed.
    pub projects: Vec<Project>,
    /// Against what.
    pub target: Target,
    /// Counts and verdict.
    pub summary: Summary,
    /// Every finding, in the order found.
    pub findings: Vec<Finding>,
    /// What to do, in [`Report::fix_order`].
    pub fixes: Vec<Fix>,
    /// The order of the fixes.
    pub fix_order: FixOrder,
    /// The lowest risk kept (after a refinement filtered the report).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_risk: Option<Risk>,
    /// What could not be checked.
    pub unchecked: Vec<Unchecked>,
    /// Remarks about the analysis itself.
    pub notes: Vec<String>,
}

impl Report {
    /// Builds a report: numbers the findings, groups identical fixes,
    /// counts.
    pub fn new(
        projects: Vec<Project>,
        target: Target,
        mut findings: Vec<Finding>,
        unchecked: Vec<Unchecked>,
        notes: Vec<String>,
    ) -> Self {
        for (i, f) in findings.iter_mut().enumerate() {
            f.id = format!("F{}", i + 1);
        }
        let mut report = Self {
            schema: SCHEMA.to_owned(),
            projects,
            target,
            summary: Summary::default(),
            findings,
            fixes: Vec::new(),
            fix_order: FixOrder::Found,
            min_risk: None,
            unchecked,
            notes,
        };
        report.rebuild();
        report
    }

    /// Recomputes the fixes (in `fix_order`) and the summary from the
    /// findings.
    fn rebuild(&mut self) {
        let mut fixes: Vec<Fix> = Vec::new();
        for f in &self.findings {
            match fixes.iter_mut().find(|x| x.action == f.fix) {
                Some(x) => {
                    x.finding_ids.push(f.id.clone());
                    x.risk = x.risk.min(f.risk);
                }
                None => fixes.push(Fix {
                    rank: 0,
                    risk: f.risk,
                    action: f.fix.clone(),
                    finding_ids: vec![f.id.clone()],
                }),
            }
        }
        if self.fix_order == FixOrder::Risk {
            // Stable: equal risks keep the order found.
            fixes.sort_by_key(|x| x.risk);
        }
        for (i, x) in fixes.iter_mut().enumerate() {
            x.rank = i + 1;
        }
        self.fixes = fixes;
        let count = |r: Risk| self.findings.iter().filter(|f| f.risk == r).count();
        let (high, medium, low, info) = (
            count(Risk::High),
            count(Risk::Medium),
            count(Risk::Low),
            count(Risk::Info),
        );
        let verdict = if high > 0 {
            "blocked"
        } else if medium > 0 {
            "at-risk"
        } else {
            "ok"
        };
        self.summary = Summary {
            verdict: verdict.to_owned(),
            high,
            medium,
            low,
            info,
            unchecked: self.unchecked.len(),
        };
    }

    /// The same report with its fixes sorted by risk, highest first.
    pub fn sorted_by_risk(mut self) -> Self {
        self.fix_order = FixOrder::Risk;
        self.rebuild();
        self
    }

    /// The same report keeping only findings at `min` risk or above.
    pub fn filtered(mut self, min: Risk) -> Self {
        self.findings.retain(|f| f.risk <= min);
        self.min_risk = Some(min);
        self.rebuild();
        self
    }

    /// The report as JSON.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
    }

    /// Reads a report back from JSON (a report artifact's data).
    pub fn from_json(value: &serde_json::Value) -> Option<Self> {
        let report: Self = serde_json::from_value(value.clone()).ok()?;
        (report.schema == SCHEMA).then_some(report)
    }

    /// One line: the verdict and the counts.
    pub fn headline(&self) -> String {
        let s = &self.summary;
        format!(
            "{}: {} high, {} medium, {} low, {} info; {} not checked",
            s.verdict, s.high, s.medium, s.low, s.info, s.unchecked
        )
    }

    /// The Markdown report, as the sections it is streamed in.
    pub fn markdown_sections(&self) -> Vec<String> {
        let mut out = Vec::new();

        let mut head = String::new();
        let names: Vec<String> = self
            .projects
            .iter()
            .map(|p| match &p.version {
                Some(v) => format!("{}@{v}", p.name),
                None => p.name.clone(),
            })
            .collect();
        head.push_str(&format!(
            "# Dependency compatibility report: {}\n\n",
            if names.is_empty() {
                "(no project)".to_owned()
            } else {
                names.join(", ")
            }
        ));
        let mut target = Vec::new();
        if let Some(n) = &self.target.node {
            target.push(format!("Node.js {n}"));
        }
        if let Some(r) = &self.target.rust {
            target.push(format!("Rust {r}"));
        }
        for (p, v) in &self.target.packages {
            target.push(format!("{p}@{v}"));
        }
        head.push_str(&format!("**Target:** {}\n\n", target.join(", ")));
        for p in &self.projects {
            let lock = p
                .lockfile_version
                .map(|v| format!(", lockfile v{v}"))
                .unwrap_or_default();
            head.push_str(&format!(
                "- {} project `{}`: {} ({} packages{lock})\n",
                match p.ecosystem {
                    Ecosystem::Npm => "npm",
                    Ecosystem::Cargo => "Cargo",
                },
                p.name,
                p.files.join(", "),
                p.packages,
            ));
        }
        let s = &self.summary;
        head.push_str(&format!(
            "\n**Verdict: {}** ({} high, {} medium, {} low, {} info; {} not checked)\n",
            s.verdict, s.high, s.medium, s.low, s.info, s.unchecked
        ));
        if let Some(min) = self.min_risk {
            head.push_str(&format!(
                "\nOnly findings of {} risk or above are shown.\n",
                min.as_str()
            ));
        }
        out.push(head);

        let mut findings = String::from("\n## Findings\n\n");
        if self.findings.is_empty() {
            findings.push_str("No compatibility problem found.\n");
        } else {
            findings.push_str("| id | risk | package | finding |\n|---|---|---|---|\n");
            for f in &self.findings {
                let pkg = match &f.version {
                    Some(v) => format!("{}@{v}", f.package),
                    None => f.package.clone(),
                };
                let dev = if f.dev { " (dev)" } else { "" };
                findings.push_str(&format!(
                    "| {} | {} | `{}`{dev} | {} |\n",
                    f.id,
                    f.risk.as_str(),
                    pkg,
                    md_cell(&f.detail)
                ));
            }
        }
        out.push(findings);

        let mut fixes = format!(
            "\n## Fixes ({})\n\n",
            match self.fix_order {
                FixOrder::Found => "in the order found",
                FixOrder::Risk => "sorted by risk, highest first",
            }
        );
        if self.fixes.is_empty() {
            fixes.push_str("Nothing to fix.\n");
        }
        for x in &self.fixes {
            fixes.push_str(&format!(
                "{}. **{}**: {} ({})\n",
                x.rank,
                x.risk.as_str(),
                x.action,
                x.finding_ids.join(", ")
            ));
        }
        out.push(fixes);

        let mut rest = String::new();
        if !self.unchecked.is_empty() {
            rest.push_str("\n## Not checked\n\n");
            for u in &self.unchecked {
                let pkg = match &u.version {
                    Some(v) => format!("{}@{v}", u.package),
                    None => u.package.clone(),
                };
                rest.push_str(&format!("- `{pkg}`: {}\n", u.reason));
            }
        }
        if !self.notes.is_empty() {
            rest.push_str("\n## Notes\n\n");
            for n in &self.notes {
                rest.push_str(&format!("- {n}\n"));
            }
        }
        if !rest.is_empty() {
            out.push(rest);
        }
        out
    }

    /// The whole Markdown report.
    pub fn markdown(&self) -> String {
        self.markdown_sections().concat()
    }
}

fn md_cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn finding(risk: Risk, fix: &str) -> Finding {
        Finding {
            id: String::new(),
            ecosystem: Ecosystem::Npm,
            kind: Kind::Deprecated,
            risk,
            package: "p".into(),
            version: None,
            paths: Vec::new(),
            dev: false,
            detail: "d".into(),
            fix: fix.into(),
        }
    }

    #[test]
    fn fixes_group_and_sort_stably() {
        let r = Report::new(
            Vec::new(),
            Target::default(),
            vec![
                finding(Risk::Low, "a"),
                finding(Risk::High, "b"),
                finding(Risk::Medium, "a"),
                finding(Risk::High, "c"),
            ],
            Vec::new(),
            Vec::new(),
        );
        let order = |r: &Report| -> Vec<(String, Risk)> {
            r.fixes.iter().map(|x| (x.action.clone(), x.risk)).collect()
        };
        assert_eq!(
            order(&r),
            [
                ("a".into(), Risk::Medium),
                ("b".into(), Risk::High),
                ("c".into(), Risk::High)
            ]
        );
        assert_eq!(r.fixes[0].finding_ids, ["F1", "F3"]);
        let sorted = r.clone().sorted_by_risk();
        assert_eq!(
            order(&sorted),
            [
                ("b".into(), Risk::High),
                ("c".into(), Risk::High),
                ("a".into(), Risk::Medium)
            ]
        );
        assert_eq!(sorted.fixes[0].rank, 1);
        assert_eq!(sorted.summary.verdict, "blocked");
        let back = Report::from_json(&sorted.to_json()).expect("round trip");
        assert_eq!(back, sorted);
        let high = r.filtered(Risk::High);
        assert_eq!(high.findings.len(), 2);
        assert_eq!(high.summary.medium, 0);
    }
}
