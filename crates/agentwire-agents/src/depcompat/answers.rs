//! Quick answers: a question about what the agent supports is answered
//! with one message, no task (nothing to track, no artifact).

/// How to start an analysis (ends every answer).
const HOW: &str = "To analyse a project, send its package.json and package-lock.json (or Cargo.toml and \
                   Cargo.lock) as file parts and name the target runtime, e.g. \"Node.js 24\".";

/// Whether the text asks about the agent itself rather than for work.
pub fn is_capability_question(text: &str) -> bool {
    let t = text.trim().to_ascii_lowercase();
    let question = t.ends_with('?')
        || [
            "do ", "does ", "can ", "could ", "is ", "are ", "will ", "which ", "what ", "how ",
        ]
        .iter()
        .any(|w| t.starts_with(w));
    let about_support = [
        "support",
        "handle",
        "read",
        "accept",
        "understand",
        "work with",
        "capab",
        "what can",
    ]
    .iter()
    .any(|w| t.contains(w));
    question && about_support
}

/// Whether the text asks for an analysis (which then needs files).
pub fn asks_for_analysis(text: &str) -> bool {
    let t = text.to_ascii_lowercase();
    [
        "analy", "check", "upgrade", "compatib", "report", "assess", "audit", "scan", "migrat",
    ]
    .iter()
    .any(|w| t.contains(w))
}

/// The first number after `word` in `t` (`npm 11`, `npm v11`, `npm11`).
fn number_after(t: &str, word: &str) -> Option<u64> {
    let i = t.find(word)?;
    let rest = t[i + word.len()..].trim_start_matches([' ', 'v', '@', '-']);
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// The answer to a quick question.
pub fn answer(text: &str) -> String {
    let t = text.to_ascii_lowercase();
    if let Some(other) = ["yarn", "pnpm", "bun"].iter().find(|w| t.contains(**w)) {
        return format!(
            "No: {other} lockfiles are not supported. I read npm projects (package.json with \
             package-lock.json v2/v3 or npm-shrinkwrap.json, written by npm 7 and later) and Cargo \
             projects (Cargo.toml with Cargo.lock v3/v4). {HOW}"
        );
    }
    let lockfile_version = number_after(&t, "lockfileversion")
        .or_else(|| number_after(&t, "lockfile v"))
        .or_else(|| number_after(&t, "lockfile version"));
    if let Some(v) = lockfile_version {
        return match v {
            2 | 3 => format!(
                "Yes: package-lock.json lockfileVersion {v} is supported (npm {} writes it). I check \
                 engines.node with npm's own semver rules, peer ranges, duplicates and deprecations. {HOW}",
                if v == 2 { "7 and 8" } else { "9 and later" }
            ),
            1 => format!(
                "No: lockfileVersion 1 (npm 5 and 6) records neither engines nor peer dependencies. \
                 Regenerate it with npm 7 or later (`npm install --package-lock-only`). {HOW}"
            ),
            _ => format!(
                "lockfileVersion {v} is not one I know (v2 and v3 are); send it and I will read it as \
                 v3, saying so in the report. {HOW}"
            ),
        };
    }
    if let Some(n) = number_after(&t, "npm") {
        return match n {
            9.. => format!(
                "Yes: npm {n} writes package-lock.json with lockfileVersion 3, which I read (v2 from \
                 npm 7 and 8 too). I check engines.node with npm's own semver rules, peer dependency \
                 ranges, duplicate versions, deprecated packages, and what upgrading a named package \
                 would break. {HOW}"
            ),
            7 | 8 => format!(
                "Yes: npm {n} writes package-lock.json with lockfileVersion 2, which I read. {HOW}"
            ),
            5 | 6 => format!(
                "No: npm {n} writes lockfileVersion 1, which records neither engines nor peer \
                 dependencies. Regenerate the lockfile with npm 7 or later \
                 (`npm install --package-lock-only`). {HOW}"
            ),
            _ => format!(
                "No: npm {n} writes no package-lock.json I can read (npm 7 and later do). {HOW}"
            ),
        };
    }
    if t.contains("cargo") || t.contains("rust") || t.contains("crate") {
        return format!(
            "Yes: send Cargo.toml (a package or a workspace) and Cargo.lock (v3 or v4) with a target \
             Rust version. I check rust-version and edition of every crate whose Cargo.toml you send, \
             the lockfile format, and crates locked in several versions. Cargo.lock does not record \
             rust-version, so registry crates are listed as not checked unless you send their \
             Cargo.toml too. {HOW}"
        );
    }
    if let Some(n) = number_after(&t, "node.js").or_else(|| number_after(&t, "node")) {
        return format!(
            "Yes: I check a project against Node.js {n}, either one exact version or the whole \
             {n}.x line (every package's engines.node must accept all of it). {HOW}"
        );
    }
    format!(
        "I am the Dependency Compatibility Agent. I check an npm project (package.json + \
         package-lock.json v2/v3) against a target Node.js version, or a Cargo project (Cargo.toml + \
         Cargo.lock) against a target Rust version, and what upgrading named packages would break; \
         the result is a structured JSON risk report and a Markdown report, streamed as a task. {HOW}"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn questions_and_requests() {
        assert!(is_capability_question("Do you support npm 11 lockfiles?"));
        assert!(is_capability_question("Can you read Cargo.lock v4?"));
        assert!(!is_capability_question(
            "Check payment-service's dependencies for the runtime upgrade"
        ));
        assert!(asks_for_analysis(
            "Check payment-service's dependencies for the runtime upgrade"
        ));
        // A request phrased as a question is still a request.
        let q = "Which dependencies block the upgrade to Node 24?";
        assert!(!is_capability_question(q) && asks_for_analysis(q));
        assert!(answer("Do you support npm 11 lockfiles?").starts_with("Yes: npm 11"));
        assert!(answer("do you support npm 6?").starts_with("No: npm 6"));
        assert!(answer("what about pnpm-lock.yaml?").starts_with("No: pnpm"));
        assert!(answer("lockfileVersion 1?").starts_with("No: lockfileVersion 1"));
    }
}
