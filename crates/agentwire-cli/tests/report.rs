//! The compliance report (docs/cli-compliance-report.yaml) stays honest:
//! every requirement marked `pass` names evidence, and every test it names
//! exists.

use std::path::Path;

#[test]
fn every_pass_cites_tests_that_exist() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let report = std::fs::read_to_string(root.join("docs/cli-compliance-report.yaml"))
        .expect("docs/cli-compliance-report.yaml");
    let mut current: Option<String> = None;
    let mut status: Option<String> = None;
    let mut cited = 0;
    let mut passes_without_evidence = Vec::new();
    let mut check_done = |id: &Option<String>, status: &Option<String>, had: usize| {
        if let (Some(id), Some(s)) = (id, status)
            && s == "pass"
            && had == 0
        {
            passes_without_evidence.push(id.clone());
        }
    };
    let mut had = 0;
    for line in report.lines() {
        let t = line.trim_start();
        if line.starts_with("  A2ACLI_") && t.ends_with(':') {
            check_done(&current, &status, had);
            current = Some(t.trim_end_matches(':').to_owned());
            status = None;
            had = 0;
        } else if let Some(s) = t.strip_prefix("status: ") {
            status = Some(s.trim().to_owned());
        } else if let Some(e) = t.strip_prefix("- \"") {
            let e = e.trim_end_matches('"');
            let (path, name) = e.split_once("::").expect("path::test");
            let test = name.rsplit("::").next().unwrap();
            let src = std::fs::read_to_string(root.join(path))
                .unwrap_or_else(|_| panic!("{path} cited by {current:?} does not exist"));
            assert!(
                src.contains(&format!("fn {test}(")),
                "{current:?} cites {e}, which does not exist"
            );
            had += 1;
            cited += 1;
        } else if !line.starts_with(' ') {
            check_done(&current, &status, had);
            current = None;
            status = None;
            had = 0;
        }
    }
    check_done(&current, &status, had);
    assert!(cited > 50, "only {cited} citations");
    assert!(
        passes_without_evidence.is_empty(),
        "passes without evidence: {passes_without_evidence:?}"
    );
}
