//! Drives every operation of an agent running the TCK conformance behaviour
//! (`a2a serve --agent conformance`) over each binding its card offers, and
//! prints what came back. A manual smoke check of the transports, not a test
//! suite.
//!
//! ```text
//! cargo run -p agentwire-bench --example conformance_probe -- http://127.0.0.1:8080
//! ```

use std::time::Duration;

use agentwire_client::{Binding, CallOptions, Client, ClientError, Transport};
use agentwire_types::{
    GetExtendedAgentCardRequest, GetTaskRequest, ListTaskPushNotificationConfigsRequest,
    ListTasksRequest, Message, TaskPushNotificationConfig, TaskState,
};
use futures::StreamExt;

fn msg(prefix: &str) -> Message {
    Message::user_text("probe").with_message_id(format!("{prefix}-{}", agentwire_types::new_id()))
}

async fn probe(url: &str, binding: Binding) -> Result<(), ClientError> {
    let client = Client::builder()
        .bindings([binding])
        .options(CallOptions::new().with_timeout(Duration::from_secs(10)))
        .connect(url)
        .await?;
    let iface = client.interface().cloned().unwrap_or_default();
    println!("== {binding} at {}", iface.url);

    let r = client.send(msg("tck-complete-task")).await?;
    let task = r.task().expect("a task").clone();
    println!(
        "send complete-task: {} {:?} {:?}",
        task.id,
        task.state(),
        task.status
            .as_ref()
            .and_then(|s| s.message.as_deref())
            .map(Message::text)
    );

    let r = client.send(msg("tck-message-response")).await?;
    println!(
        "send message-response: message={:?}",
        r.message().map(Message::text)
    );

    let r = client.send(msg("tck-artifact-text")).await?;
    let t = r.task().unwrap();
    println!(
        "send artifact-text: {:?} artifacts={:?}",
        t.state(),
        t.artifacts
            .iter()
            .map(|a| a.text_content())
            .collect::<Vec<_>>()
    );

    for prefix in [
        "tck-stream-001",
        "tck-stream-artifact-chunked",
        "tck-message-response",
    ] {
        let mut s = client.stream(msg(prefix)).await?;
        let mut seen = Vec::new();
        let mut task_id = String::new();
        while let Some(ev) = s.next().await {
            let ev = ev?;
            if let Some(id) = ev.task_id() {
                task_id = id.to_owned();
            }
            seen.push(match &ev.payload {
                Some(agentwire_types::stream_response::Payload::Task(t)) => {
                    format!("task({})", t.state().short_name())
                }
                Some(agentwire_types::stream_response::Payload::Message(m)) => {
                    format!("message({})", m.text())
                }
                Some(agentwire_types::stream_response::Payload::StatusUpdate(u)) => {
                    format!("status({})", u.state().short_name())
                }
                Some(agentwire_types::stream_response::Payload::ArtifactUpdate(a)) => format!(
                    "artifact({:?} append={} last={})",
                    a.artifact
                        .as_ref()
                        .map(|a| a.text_content())
                        .unwrap_or_default(),
                    a.append,
                    a.last_chunk
                ),
                None => "?".into(),
            });
        }
        println!("stream {prefix}: {}", seen.join(" -> "));
        if !task_id.is_empty() {
            let t = client.get_task(&task_id).await?;
            println!(
                "  get_task: {:?} artifacts={:?}",
                t.state(),
                t.artifacts
                    .iter()
                    .map(|a| a.text_content())
                    .collect::<Vec<_>>()
            );
        }
    }

    let t = Transport::get_task(
        &client,
        GetTaskRequest {
            id: task.id.clone(),
            history_length: Some(0),
            ..Default::default()
        },
        &CallOptions::new(),
    )
    .await?;
    println!("get_task historyLength=0: history={}", t.history.len());

    let page = client
        .list_tasks(ListTasksRequest {
            context_id: task.context_id.clone(),
            ..Default::default()
        })
        .await?;
    println!(
        "list_tasks contextId: total={} ids={:?} next={:?}",
        page.total_size,
        page.tasks.iter().map(|t| &t.id).collect::<Vec<_>>(),
        page.next_page_token
    );
    let page = client
        .list_tasks(ListTasksRequest {
            status: TaskState::Completed as i32,
            page_size: Some(2),
            ..Default::default()
        })
        .await?;
    println!(
        "list_tasks completed pageSize=2: got={} total={} next={:?}",
        page.tasks.len(),
        page.total_size,
        page.next_page_token
    );

    // input-required, subscribe, cancel from another call.
    let r = client.send(msg("tck-input-required")).await?;
    let waiting = r.task().unwrap().clone();
    println!("send input-required: {:?}", waiting.state());
    let mut sub = client.subscribe(&waiting.id).await?;
    let first = sub.next().await.transpose()?;
    println!("subscribe first: {:?}", first.and_then(|e| e.state()));
    let canceled = client.cancel_task(&waiting.id).await?;
    println!("cancel: {:?}", canceled.state());
    let rest: Vec<_> = tokio::time::timeout(Duration::from_secs(5), sub.collect::<Vec<_>>())
        .await
        .map_err(|_| ClientError::InvalidResponse("subscription did not end".into()))?;
    println!(
        "subscribe rest: {:?}",
        rest.iter()
            .map(|e| e.as_ref().map(|e| e.state()).map_err(|e| e.to_string()))
            .collect::<Vec<_>>()
    );

    let show = |what: &str, e: ClientError| println!("{what}: {:?} -- {e}", e.kind());
    match client.cancel_task(&task.id).await {
        Err(e) => show("cancel completed", e),
        Ok(t) => println!("cancel completed: UNEXPECTED ok {:?}", t.state()),
    }
    match client.subscribe(&task.id).await {
        Err(e) => show("subscribe completed", e),
        Ok(mut s) => match s.next().await {
            Some(Err(e)) => show("subscribe completed (in stream)", e),
            other => println!("subscribe completed: UNEXPECTED {other:?}"),
        },
    }
    match client.subscribe("no-such-task").await {
        Err(e) => show("subscribe unknown", e),
        Ok(mut s) => match s.next().await {
            Some(Err(e)) => show("subscribe unknown (in stream)", e),
            other => println!("subscribe unknown: UNEXPECTED {other:?}"),
        },
    }
    match client.get_task("no-such-task").await {
        Err(e) => show("get unknown", e),
        Ok(_) => println!("get unknown: UNEXPECTED ok"),
    }
    let cfg = TaskPushNotificationConfig {
        task_id: task.id.clone(),
        url: "http://127.0.0.1:9/hook".into(),
        ..Default::default()
    };
    match Transport::create_task_push_notification_config(&client, cfg, &CallOptions::new()).await {
        Err(e) => show("create push config", e),
        Ok(c) => println!("create push config: ok id={}", c.id),
    }
    let list = ListTaskPushNotificationConfigsRequest {
        task_id: task.id.clone(),
        ..Default::default()
    };
    match Transport::list_task_push_notification_configs(&client, list, &CallOptions::new()).await {
        Err(e) => show("list push configs", e),
        Ok(c) => println!("list push configs: ok {}", c.configs.len()),
    }
    match Transport::get_extended_agent_card(
        &client,
        GetExtendedAgentCardRequest::default(),
        &CallOptions::new(),
    )
    .await
    {
        Err(e) => show("extended card", e),
        Ok(c) => println!("extended card: ok {}", c.name),
    }
    let old = CallOptions::new().with_service_param("A2A-Version", "0.3");
    match Transport::get_task(
        &client,
        GetTaskRequest {
            id: task.id.clone(),
            ..Default::default()
        },
        &old,
    )
    .await
    {
        Err(e) => show("A2A-Version 0.3", e),
        Ok(_) => println!("A2A-Version 0.3: accepted"),
    }
    Ok(())
}

#[tokio::main]
async fn main() {
    let url = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "http://127.0.0.1:8080".into());
    let mut failed = false;
    for binding in Binding::ALL {
        if let Err(e) = probe(&url, binding).await {
            println!("!! {binding}: {e} ({e:?})");
            failed = true;
        }
    }
    std::process::exit(i32::from(failed));
}
