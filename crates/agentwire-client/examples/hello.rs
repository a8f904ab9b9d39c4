//! The hello client: discovers an agent by its card, sends it one message
//! over the binding the card offers first, and prints the answer (a
//! message, or a task with its state and artifacts).
//!
//! ```sh
//! cargo run -p agentwire-server --example echo &          # an agent on 127.0.0.1:8080
//! cargo run -p agentwire-client --example hello -- http://127.0.0.1:8080
//! cargo run -p agentwire-client --example hello -- http://127.0.0.1:8080 "good morning"
//! ```

use std::process::ExitCode;

use agentwire_client::{Client, ClientError};
use agentwire_types::SendMessageResponse;

/// Sends `text` to the agent at `url` (a host, an origin or a card URL)
/// and describes the answer.
pub async fn hello(url: &str, text: &str) -> Result<String, ClientError> {
    let client = Client::connect(url).await?;
    let answer = client.send_text(text).await?;
    Ok(describe(&answer))
}

/// The answer in a few lines.
pub fn describe(answer: &SendMessageResponse) -> String {
    if let Some(message) = answer.message() {
        return format!("message: {}", message.text());
    }
    let Some(task) = answer.task() else {
        return "an empty answer".to_owned();
    };
    let mut out = format!("task {}: {}", task.id, task.state().short_name());
    for artifact in &task.artifacts {
        out.push_str(&format!(
            "\nartifact {}: {}",
            artifact.name,
            artifact.text_content()
        ));
    }
    out
}

#[tokio::main]
async fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let url = args
        .next()
        .unwrap_or_else(|| "http://127.0.0.1:8080".to_owned());
    let text = args.next().unwrap_or_else(|| "hello".to_owned());
    match hello(&url, &text).await {
        Ok(answer) => {
            println!("{answer}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            if e.is_unreachable() {
                eprintln!("is an agent running at {url}?");
            }
            ExitCode::FAILURE
        }
    }
}
