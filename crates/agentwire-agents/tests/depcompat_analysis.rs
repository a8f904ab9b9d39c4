//! The Dependency Compatibility Agent's analysis on the fixtures
//! (`fixtures/`), against answers checked by hand.

use std::collections::BTreeMap;

use agentwire_agents::depcompat::cargo::{self, CargoFiles, Manifest, RustTarget};
use agentwire_agents::depcompat::npm::{self, NodeTarget, NpmFiles, PackageTarget};
use agentwire_agents::depcompat::report::{Finding, Kind, Report, Risk, Target};
use serde_json::Value;

const PACKAGE_JSON: &str = include_str!("../fixtures/npm/payment-service/package.json");
const PACKAGE_LOCK: &str = include_str!("../fixtures/npm/payment-service/package-lock.json");
const CARGO_TOML: &str = include_str!("../fixtures/cargo/settlement-engine/Cargo.toml");
const CORE_TOML: &str =
    include_str!("../fixtures/cargo/settlement-engine/crates/settlement-core/Cargo.toml");
const ANYHOW_TOML: &str =
    include_str!("../fixtures/cargo/settlement-engine/vendor/anyhow/Cargo.toml");
const CARGO_LOCK: &str = include_str!("../fixtures/cargo/settlement-engine/Cargo.lock");

fn json(s: &str) -> Value {
    serde_json::from_str(s).expect("fixture is JSON")
}

fn npm_run(node: &str, packages: &[(&str, PackageTarget)]) -> npm::NpmAnalysis {
    let manifest = json(PACKAGE_JSON);
    let lock = json(PACKAGE_LOCK);
    let files = NpmFiles {
        manifest: Some(&manifest),
        lockfile: &lock,
        file_names: vec!["package.json".into(), "package-lock.json".into()],
    };
    let packages: BTreeMap<String, PackageTarget> = packages
        .iter()
        .map(|(k, v)| ((*k).to_owned(), v.clone()))
        .collect();
    npm::analyse(&files, &NodeTarget::parse(node).expect("target"), &packages).expect("analysis")
}

/// (kind, risk, package, version) of each finding, in order.
fn summary(findings: &[Finding]) -> Vec<(Kind, Risk, String, Option<String>)> {
    findings
        .iter()
        .map(|f| (f.kind, f.risk, f.package.clone(), f.version.clone()))
        .collect()
}

fn row(
    kind: Kind,
    risk: Risk,
    package: &str,
    version: Option<&str>,
) -> (Kind, Risk, String, Option<String>) {
    (kind, risk, package.to_owned(), version.map(str::to_owned))
}

#[test]
fn payment_service_on_node_24() {
    let a = npm_run("24", &[]);
    assert_eq!(a.project.name, "payment-service");
    assert_eq!(a.project.version.as_deref(), Some("3.4.1"));
    assert_eq!(a.project.lockfile_version, Some(3));
    assert_eq!(a.project.packages, 25);
    assert_eq!(
        summary(&a.findings),
        [
            // The project's own engines: ">=18 <23" excludes all of 24.x.
            row(
                Kind::ProjectEngines,
                Risk::High,
                "payment-service",
                Some("3.4.1")
            ),
            // "18.0.0 - 24.3.x" is a hyphen range ending inside 24.x.
            row(
                Kind::Engines,
                Risk::Medium,
                "@acme/fraud-rules",
                Some("1.8.0")
            ),
            // "16.x || 18.x || 20.x" excludes 24.
            row(
                Kind::Engines,
                Risk::High,
                "@acme/ledger-client",
                Some("2.3.0")
            ),
            // eslint 9.1.0 is outside "^7.0.0 || ^8.0.0" (dev only: medium).
            row(
                Kind::Peer,
                Risk::Medium,
                "@typescript-eslint/eslint-plugin",
                Some("6.21.0")
            ),
            row(
                Kind::Peer,
                Risk::Medium,
                "@typescript-eslint/parser",
                Some("6.21.0")
            ),
            // Installed twice each.
            row(Kind::Duplicate, Risk::Low, "debug", None),
            row(Kind::Duplicate, Risk::Low, "ms", None),
            row(Kind::Duplicate, Risk::Low, "uuid", None),
            // Deprecated.
            row(Kind::Deprecated, Risk::Low, "har-validator", Some("5.1.5")),
            row(Kind::Deprecated, Risk::Low, "request", Some("2.88.2")),
            row(Kind::Deprecated, Risk::Low, "uuid", Some("3.4.0")),
        ]
    );
    let fraud = &a.findings[1];
    assert!(
        fraud.detail.contains("accepts only part of Node.js 24")
            && fraud.detail.contains("<24.4.0"),
        "{}",
        fraud.detail
    );
    let peer = &a.findings[3];
    assert!(peer.dev);
    assert!(
        peer.detail.contains("eslint \"^7.0.0 || ^8.0.0\""),
        "{}",
        peer.detail
    );
    assert!(peer.detail.contains("eslint@9.1.0"), "{}", peer.detail);
    let uuid = &a.findings[7];
    assert_eq!(
        uuid.paths,
        [
            "node_modules/@acme/ledger-client/node_modules/uuid",
            "node_modules/uuid"
        ]
    );
    assert!(uuid.detail.contains("3.4.0, 9.0.1"), "{}", uuid.detail);
    assert!(
        uuid.detail.contains("request@2.88.2 \"^3.3.2\""),
        "{}",
        uuid.detail
    );
    // Packages without engines.node are listed as not checked, by name.
    let unchecked: Vec<String> = a
        .unchecked
        .iter()
        .map(|u| format!("{}@{}", u.package, u.version.as_deref().unwrap_or("?")))
        .collect();
    assert_eq!(
        unchecked,
        [
            "ms@2.1.2",
            "uuid@9.0.1",
            "debug@2.6.9",
            "ms@2.0.0",
            "pg-connection-string@2.6.4",
            "pg-pool@3.6.2",
            "pg-protocol@1.6.1",
            "uuid@3.4.0"
        ]
    );
}

#[test]
fn payment_service_on_node_22_and_on_exact_versions() {
    // Node 22: the project's range and fraud-rules accept it; ledger-client
    // still does not.
    let a = npm_run("22", &[]);
    let engines: Vec<_> = summary(&a.findings)
        .into_iter()
        .filter(|r| matches!(r.0, Kind::Engines | Kind::ProjectEngines))
        .collect();
    assert_eq!(
        engines,
        [row(
            Kind::Engines,
            Risk::High,
            "@acme/ledger-client",
            Some("2.3.0")
        )]
    );
    // 24.5.0 exactly: fraud-rules ("18.0.0 - 24.3.x") excludes it outright.
    let a = npm_run("24.5.0", &[]);
    assert!(summary(&a.findings).contains(&row(
        Kind::Engines,
        Risk::High,
        "@acme/fraud-rules",
        Some("1.8.0")
    )));
    // 24.2.1 exactly: fraud-rules accepts it.
    let a = npm_run("24.2.1", &[]);
    assert!(!a.findings.iter().any(|f| f.package == "@acme/fraud-rules"));
    // A release candidate, as npm checks engines (prereleases included):
    // 24.0.0-rc.1 is not "<23", and is inside "18.0.0 - 24.3.x".
    let a = npm_run("24.0.0-rc.1", &[]);
    assert_eq!(a.findings[0].kind, Kind::ProjectEngines);
    assert!(!a.findings.iter().any(|f| f.package == "@acme/fraud-rules"));
}

#[test]
fn upgrading_express_to_5() {
    let express = PackageTarget {
        version: "5.1.0".into(),
        engines_node: Some(">= 18".into()),
        ..Default::default()
    };
    let a = npm_run("24", &[("express", express)]);
    let upgrade: Vec<_> = a
        .findings
        .iter()
        .filter(|f| {
            matches!(
                f.kind,
                Kind::UpgradePeer
                    | Kind::UpgradeDependency
                    | Kind::UpgradeManifest
                    | Kind::UpgradeEngines
            )
        })
        .collect();
    assert_eq!(
        summary(&upgrade.iter().map(|f| (*f).clone()).collect::<Vec<_>>()),
        [
            // package.json asks "^4.19.2".
            row(
                Kind::UpgradeManifest,
                Risk::Low,
                "payment-service",
                Some("3.4.1")
            ),
            // The auth middleware's peer range "^4.17.1" breaks: ERESOLVE.
            row(
                Kind::UpgradePeer,
                Risk::High,
                "@acme/auth-middleware",
                Some("1.4.2")
            ),
        ]
    );
    // express-rate-limit's peer "4 || 5 || ^5.0.0-beta.1" accepts 5.1.0;
    // engines ">= 18" accepts all of Node 24: no finding for either.
    assert!(
        upgrade[1].detail.contains("ERESOLVE"),
        "{}",
        upgrade[1].detail
    );
    assert!(!a.unchecked.iter().any(|u| u.package == "express"));

    // Without the new version's engines, the report says it is unknown.
    let a = npm_run(
        "24",
        &[(
            "express",
            PackageTarget {
                version: "5.1.0".into(),
                ..Default::default()
            },
        )],
    );
    let u = a
        .unchecked
        .iter()
        .find(|u| u.package == "express")
        .expect("express listed as not checked");
    assert!(u.reason.contains("unknown offline"), "{}", u.reason);

    // A new version whose own peers the project does not meet.
    let a = npm_run(
        "24",
        &[(
            "@acme/ledger-client",
            PackageTarget {
                version: "3.0.0".into(),
                engines_node: Some(">=24.3".into()),
                peer_dependencies: [("pg".to_owned(), "^9.0.0".to_owned())].into(),
            },
        )],
    );
    let rows = summary(&a.findings);
    assert!(rows.contains(&row(
        Kind::UpgradeEngines,
        Risk::Medium,
        "@acme/ledger-client",
        Some("3.0.0")
    )));
    assert!(rows.contains(&row(
        Kind::UpgradeEngines,
        Risk::High,
        "@acme/ledger-client",
        Some("3.0.0")
    )));
}

#[test]
fn package_json_out_of_sync_with_the_lockfile() {
    let mut manifest = json(PACKAGE_JSON);
    manifest["dependencies"]["pg"] = Value::from("^8.12.0");
    manifest["dependencies"]["zod"] = Value::from("^3.23.0");
    let lock = json(PACKAGE_LOCK);
    let files = NpmFiles {
        manifest: Some(&manifest),
        lockfile: &lock,
        file_names: vec!["package.json".into(), "package-lock.json".into()],
    };
    let a = npm::analyse(
        &files,
        &NodeTarget::parse("22").expect("22"),
        &BTreeMap::new(),
    )
    .expect("analysis");
    let details: Vec<&str> = a
        .findings
        .iter()
        .filter(|f| f.kind == Kind::OutOfSync)
        .map(|f| f.detail.as_str())
        .collect();
    assert_eq!(details.len(), 2, "{details:?}");
    assert!(details[0].contains("pg \"^8.12.0\"") && details[0].contains("pg@8.11.5"));
    assert!(details[1].contains("zod"));
}

fn cargo_files(with_anyhow: bool) -> CargoFiles {
    let mut manifests = vec![
        Manifest {
            file: "Cargo.toml".into(),
            toml: CARGO_TOML.parse().expect("Cargo.toml"),
        },
        Manifest {
            file: "crates/settlement-core/Cargo.toml".into(),
            toml: CORE_TOML.parse().expect("core Cargo.toml"),
        },
    ];
    if with_anyhow {
        manifests.push(Manifest {
            file: "vendor/anyhow/Cargo.toml".into(),
            toml: ANYHOW_TOML.parse().expect("anyhow Cargo.toml"),
        });
    }
    CargoFiles {
        manifests,
        lock: Some(CARGO_LOCK.parse().expect("Cargo.lock")),
        lock_file: Some("Cargo.lock".into()),
    }
}

#[test]
fn settlement_engine_on_rust_1_80() {
    let rust = RustTarget::parse("1.80").expect("1.80");
    let a = cargo::analyse(&cargo_files(true), &rust, &BTreeMap::new());
    assert_eq!(a.project.name, "settlement-engine");
    assert_eq!(a.project.version.as_deref(), Some("0.9.0"));
    assert_eq!(a.project.lockfile_version, Some(4));
    assert_eq!(a.project.packages, 16);
    assert_eq!(
        summary(&a.findings),
        [
            row(
                Kind::RustVersion,
                Risk::High,
                "settlement-core",
                Some("0.9.0")
            ),
            row(Kind::Edition, Risk::High, "settlement-core", Some("0.9.0")),
            row(Kind::Duplicate, Risk::Low, "syn", None),
        ]
    );
    // anyhow's manifest was sent (rust-version 1.39): checked. Every other
    // registry crate is listed, with the reason.
    let unchecked: Vec<String> = a
        .unchecked
        .iter()
        .map(|u| format!("{}@{}", u.package, u.version.as_deref().unwrap_or("?")))
        .collect();
    assert_eq!(
        unchecked,
        [
            "convert_case@0.4.0",
            "derive_more@0.99.17",
            "proc-macro2@1.0.81",
            "quote@1.0.36",
            "rustc_version@0.4.0",
            "semver@1.0.22",
            "serde@1.0.197",
            "serde_derive@1.0.197",
            "syn@1.0.109",
            "syn@2.0.60",
            "thiserror@1.0.58",
            "thiserror-impl@1.0.58",
            "unicode-ident@1.0.12",
        ]
    );
    assert!(
        a.unchecked[0]
            .reason
            .contains("Cargo.lock does not record rust-version")
    );

    // Without anyhow's manifest it is unchecked too.
    let a = cargo::analyse(&cargo_files(false), &rust, &BTreeMap::new());
    assert!(a.unchecked.iter().any(|u| u.package == "anyhow"));
}

#[test]
fn settlement_engine_on_older_rust_and_crate_upgrades() {
    // 1.75: Cargo.lock v4 needs Cargo 1.78.
    let a = cargo::analyse(
        &cargo_files(true),
        &RustTarget::parse("1.75").expect("1.75"),
        &BTreeMap::new(),
    );
    assert!(summary(&a.findings).contains(&row(
        Kind::LockfileFormat,
        Risk::High,
        "Cargo.lock",
        Some("4")
    )));
    // 1.73: settlement-engine's inherited rust-version 1.74 fails too.
    let a = cargo::analyse(
        &cargo_files(true),
        &RustTarget::parse("1.73").expect("1.73"),
        &BTreeMap::new(),
    );
    let f = a
        .findings
        .iter()
        .find(|f| f.package == "settlement-engine")
        .expect("settlement-engine finding");
    assert!(
        f.detail.contains("inherited from [workspace.package]"),
        "{}",
        f.detail
    );
    // 1.85: everything builds.
    let a = cargo::analyse(
        &cargo_files(true),
        &RustTarget::parse("1.85").expect("1.85"),
        &BTreeMap::new(),
    );
    assert_eq!(
        summary(&a.findings),
        [row(Kind::Duplicate, Risk::Low, "syn", None)]
    );
    // thiserror 2: the workspace requirement "1.0.58" (inherited by
    // settlement-core) must change.
    let wanted: BTreeMap<String, String> = [("thiserror".to_owned(), "2.0.3".to_owned())].into();
    let a = cargo::analyse(
        &cargo_files(true),
        &RustTarget::parse("1.85").expect("1.85"),
        &wanted,
    );
    let f = a
        .findings
        .iter()
        .find(|f| f.kind == Kind::UpgradeManifest)
        .expect("upgrade finding");
    assert_eq!(f.package, "settlement-core");
    assert!(f.detail.contains("thiserror = \"1.0.58\""), "{}", f.detail);
}

#[test]
fn the_report_counts_sorts_and_renders() {
    let a = npm_run("24", &[]);
    let report = Report::new(
        vec![a.project],
        Target {
            node: Some("24".into()),
            ..Default::default()
        },
        a.findings,
        a.unchecked,
        a.notes,
    );
    assert_eq!(report.summary.verdict, "blocked");
    assert_eq!(
        (
            report.summary.high,
            report.summary.medium,
            report.summary.low
        ),
        (2, 3, 6)
    );
    // In the order found, the first fix is the project's engines (high),
    // the second fraud-rules (medium).
    assert_eq!(report.fixes[0].risk, Risk::High);
    assert_eq!(report.fixes[1].risk, Risk::Medium);
    let sorted = report.clone().sorted_by_risk();
    let risks: Vec<Risk> = sorted.fixes.iter().map(|f| f.risk).collect();
    let mut expected = risks.clone();
    expected.sort();
    assert_eq!(risks, expected);
    assert_eq!(sorted.fixes[1].finding_ids, ["F3"]); // ledger-client, high
    let md = sorted.markdown();
    assert!(md.starts_with("# Dependency compatibility report: payment-service@3.4.1"));
    assert!(md.contains("**Verdict: blocked**"));
    assert!(md.contains("## Fixes (sorted by risk, highest first)"));
    assert!(md.contains("## Not checked"));
    assert_eq!(report.markdown_sections().len(), 4);
}
