//! The ledger: the client's record of a conversation. It sends a request,
//! asks for a refinement of the artifact it got (a new task in the same
//! context; the agent keeps the artifact's name and gives the new version
//! a new id), accepts the second version, and prints the version chain and
//! the tasks waiting for the user. Any agent answering with an artifact
//! will do, e.g. the echo agent.
//!
//! The ledger is in memory, or in a SQLite file given as the second
//! argument (run it twice with the same file: the first run's versions are
//! still there).
//!
//! ```sh
//! cargo run -p agentwire-server --example echo &          # an agent on 127.0.0.1:8080
//! cargo run -p agentwire-client --example ledger -- http://127.0.0.1:8080
//! cargo run -p agentwire-client --example ledger -- http://127.0.0.1:8080 conversations.db
//! ```

use std::process::ExitCode;

use agentwire_client::Client;
use agentwire_client::ledger::{ArtifactVersion, Ledger, LedgerError};
use agentwire_types::Message;

/// What one run found.
#[derive(Debug)]
pub struct Outcome {
    /// The versions of the artifact, oldest first.
    pub chain: Vec<ArtifactVersion>,
    /// How many tasks wait for the user.
    pub pending: usize,
}

/// Asks the agent at `url` for a poster, then for a better one, and
/// accepts the second; everything is recorded in `ledger`.
pub async fn run(url: &str, ledger: &Ledger) -> Result<Outcome, LedgerError> {
    let client = Client::connect(url).await?;

    let answer = ledger
        .send(&client, Message::user_text("a coffee poster"))
        .await?;
    let Some(task) = answer.task() else {
        return Err(LedgerError::InvalidState(
            "the agent answered with a message, not a task with an artifact".into(),
        ));
    };
    let Some(v1) = ledger.versions_of_task(&task.id).await?.into_iter().next() else {
        return Err(LedgerError::InvalidState(format!(
            "task {} has no artifact to refine",
            task.id
        )));
    };

    // A new version of that exact artifact: same context, the artifact
    // and its task named in the message.
    ledger
        .refine(
            &client,
            &v1.artifact_id,
            Message::user_text("a fancier title"),
        )
        .await?;
    let latest = ledger
        .latest_version(&v1.context_id, &v1.artifact_name)
        .await?
        .unwrap_or(v1);
    ledger.accept(&latest.artifact_id).await?;

    Ok(Outcome {
        chain: ledger.chain(&latest.artifact_id).await?,
        pending: ledger.pending().await?.len(),
    })
}

#[tokio::main]
async fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let url = args
        .next()
        .unwrap_or_else(|| "http://127.0.0.1:8080".to_owned());
    let ledger = match args.next() {
        Some(path) => match Ledger::open(&path).await {
            Ok(ledger) => ledger,
            Err(e) => {
                eprintln!("error: cannot open the ledger {path}: {e}");
                return ExitCode::FAILURE;
            }
        },
        None => Ledger::in_memory(),
    };
    match run(&url, &ledger).await {
        Ok(outcome) => {
            for (i, v) in outcome.chain.iter().enumerate() {
                println!(
                    "version {} of {:?}: {} (task {}){}\n  {}",
                    i + 1,
                    v.artifact_name,
                    v.artifact_id,
                    v.task_id,
                    if v.accepted_by_user { ", accepted" } else { "" },
                    v.artifact.text_content()
                );
            }
            println!("tasks waiting for you: {}", outcome.pending);
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
