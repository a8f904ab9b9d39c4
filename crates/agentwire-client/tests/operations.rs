//! Every client operation over every binding against the project's own
//! server, plus the streaming helpers and the ledger on each binding.

use std::sync::Arc;
use std::time::Duration;

use agentwire_client::follow::{FollowOptions, PollOptions, TaskView, follow, wait_for_task};
use agentwire_client::ledger::Ledger;
use agentwire_client::{Binding, CallOptions, Client, Credentials, Transport};
use agentwire_server::{
    A2aResult, A2aServer, AgentExecutor, BearerTokens, RequestContext, ServerHandle, TaskUpdater,
};
use agentwire_types::{
    AgentCard, Artifact, CancelTaskRequest, DeleteTaskPushNotificationConfigRequest, ErrorKind,
    GetExtendedAgentCardRequest, GetTaskPushNotificationConfigRequest, GetTaskRequest,
    ListTaskPushNotificationConfigsRequest, ListTasksRequest, Message, SendMessageRequest,
    SubscribeToTaskRequest, TaskPushNotificationConfig, TaskState, stream_response,
};
use futures::StreamExt;

const LIMIT: Duration = Duration::from_secs(20);

struct Agent;

impl AgentExecutor for Agent {
    async fn execute(&self, ctx: RequestContext, task: TaskUpdater) -> A2aResult<()> {
        let text = ctx.text();
        if ctx
            .task
            .as_ref()
            .is_some_and(|t| t.state().is_interrupted())
        {
            task.add_artifact(Artifact::text("answer", text)).await?;
            return task.complete().await;
        }
        match text.as_str() {
            "ask" => task.require_input("more?").await,
            "slow" => {
                task.start_work().await?;
                tokio::select! {
                    () = tokio::time::sleep(Duration::from_secs(30)) => task.complete().await,
                    () = ctx.canceled() => Ok(()),
                }
            }
            _ => {
                task.start_work().await?;
                let id = agentwire_types::new_id();
                for (i, w) in ["one ", "two ", "three"].iter().enumerate() {
                    task.artifact_chunk(Artifact::text("doc", *w).with_id(&id), i > 0, i == 2)
                        .await?;
                }
                task.complete().await
            }
        }
    }
}

async fn server() -> ServerHandle {
    let mut card = AgentCard::new("Ops", "every operation", "1.0.0");
    card.capabilities
        .get_or_insert_with(Default::default)
        .extended_agent_card = Some(true);
    let extended = AgentCard {
        description: "extended".into(),
        ..card.clone()
    };
    let mut auth = BearerTokens::new().with_token("t0k", "alice");
    auth.allow_anonymous = true;
    A2aServer::new(card, Agent)
        .extended_card(extended)
        .authenticator(Arc::new(auth))
        .bind("127.0.0.1:0")
        .await
        .expect("bind")
        .spawn()
}

fn send(text: &str) -> SendMessageRequest {
    SendMessageRequest {
        message: Some(Message::user_text(text)),
        ..Default::default()
    }
}

async fn all_operations(b: Binding) {
    let server = server().await;
    let client = Client::builder()
        .bindings([b])
        .credentials(Credentials::new().with_bearer("t0k"))
        .connect(&server.base_url())
        .await
        .expect("connect");
    assert_eq!(client.binding(), Some(b));
    let o = CallOptions::new().with_timeout(LIMIT);

    // 1. SendMessage (chunks merged by the server).
    let r = client.send_message(send("write"), &o).await.unwrap();
    let done = r.task().unwrap().clone();
    assert_eq!(done.state(), TaskState::Completed, "{b}");
    assert_eq!(done.artifacts[0].text_content(), "one two three");

    // 2. SendStreamingMessage, reassembled by TaskView.
    let mut events = client
        .send_streaming_message(send("write"), &o)
        .await
        .unwrap();
    let mut view = TaskView::new();
    let mut first = true;
    while let Some(e) = events.next().await {
        let e = e.unwrap();
        if first {
            assert!(
                matches!(e.payload, Some(stream_response::Payload::Task(_))),
                "{b}"
            );
            first = false;
        }
        view.apply(&e);
    }
    let streamed = view.task().unwrap();
    assert_eq!(streamed.state(), TaskState::Completed);
    assert_eq!(streamed.artifacts.len(), 1);
    assert_eq!(streamed.artifacts[0].text_content(), "one two three");
    assert!(
        view.artifacts()
            .is_complete(&streamed.artifacts[0].artifact_id)
    );

    // 3. GetTask.
    let got = Transport::get_task(
        &client,
        GetTaskRequest {
            id: done.id.clone(),
            history_length: Some(0),
            ..Default::default()
        },
        &o,
    )
    .await
    .unwrap();
    assert_eq!(got.id, done.id);
    assert!(got.history.is_empty());

    // 4. ListTasks.
    let listed = Transport::list_tasks(
        &client,
        ListTasksRequest {
            context_id: done.context_id.clone(),
            ..Default::default()
        },
        &o,
    )
    .await
    .unwrap();
    assert_eq!(listed.tasks.len(), 1);
    assert_eq!(listed.tasks[0].id, done.id);

    // 5. CancelTask.
    let slow = client
        .send_message(
            SendMessageRequest {
                configuration: Some(agentwire_types::SendMessageConfiguration {
                    return_immediately: true,
                    ..Default::default()
                }),
                ..send("slow")
            },
            &o,
        )
        .await
        .unwrap();
    let slow_id = slow.task().unwrap().id.clone();
    let canceled = Transport::cancel_task(
        &client,
        CancelTaskRequest {
            id: slow_id.clone(),
            ..Default::default()
        },
        &o,
    )
    .await
    .unwrap();
    assert_eq!(canceled.state(), TaskState::Canceled, "{b}");

    // 6. SubscribeToTask on a waiting task: the Task first.
    let asked = client.send_message(send("ask"), &o).await.unwrap();
    let ask_id = asked.task().unwrap().id.clone();
    let mut sub = client
        .subscribe_to_task(
            SubscribeToTaskRequest {
                id: ask_id.clone(),
                ..Default::default()
            },
            &o,
        )
        .await
        .unwrap();
    let first = tokio::time::timeout(LIMIT, sub.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(first.state(), Some(TaskState::InputRequired));
    drop(sub);

    // 7-10. Push configs: not supported by this server, same kind everywhere.
    let cfg = TaskPushNotificationConfig {
        task_id: ask_id.clone(),
        url: "https://hooks.example.com/a2a".into(),
        ..Default::default()
    };
    let kinds = [
        client
            .create_task_push_notification_config(cfg, &o)
            .await
            .map(|_| ())
            .unwrap_err()
            .kind(),
        client
            .get_task_push_notification_config(
                GetTaskPushNotificationConfigRequest {
                    task_id: ask_id.clone(),
                    id: "c".into(),
                    ..Default::default()
                },
                &o,
            )
            .await
            .map(|_| ())
            .unwrap_err()
            .kind(),
        client
            .list_task_push_notification_configs(
                ListTaskPushNotificationConfigsRequest {
                    task_id: ask_id.clone(),
                    ..Default::default()
                },
                &o,
            )
            .await
            .map(|_| ())
            .unwrap_err()
            .kind(),
        client
            .delete_task_push_notification_config(
                DeleteTaskPushNotificationConfigRequest {
                    task_id: ask_id.clone(),
                    id: "c".into(),
                    ..Default::default()
                },
                &o,
            )
            .await
            .unwrap_err()
            .kind(),
    ];
    assert!(
        kinds
            .iter()
            .all(|k| *k == Some(ErrorKind::PushNotificationNotSupported)),
        "{b}: {kinds:?}"
    );

    // 11. GetExtendedAgentCard, with the bearer token.
    let ext = client
        .get_extended_agent_card(GetExtendedAgentCardRequest::default(), &o)
        .await
        .unwrap();
    assert_eq!(ext.description, "extended");

    // Errors keep their kind.
    let e = client.get_task("missing").await.unwrap_err();
    assert_eq!(e.kind(), Some(ErrorKind::TaskNotFound), "{b}");

    // Helpers: follow a task to its end; poll one.
    let r = client
        .send_message(
            SendMessageRequest {
                configuration: Some(agentwire_types::SendMessageConfiguration {
                    return_immediately: true,
                    ..Default::default()
                }),
                ..send("write")
            },
            &o,
        )
        .await
        .unwrap();
    let id = r.task().unwrap().id.clone();
    let polled = wait_for_task(
        &client,
        &id,
        &PollOptions {
            interval: Duration::from_millis(20),
            timeout: Some(LIMIT),
            ..Default::default()
        },
        &o,
        |_| {},
    )
    .await
    .unwrap();
    assert_eq!(polled.state(), TaskState::Completed);
    let last = follow(client.clone(), None, Some(id), FollowOptions::default())
        .collect::<Vec<_>>()
        .await;
    assert_eq!(
        last.last().unwrap().as_ref().unwrap().state(),
        Some(TaskState::Completed)
    );

    // The ledger over this binding: a waiting task, answered.
    let ledger = Ledger::in_memory();
    let r = ledger
        .send(&client, Message::user_text("ask"))
        .await
        .unwrap();
    let t = r.task().unwrap().clone();
    assert_eq!(ledger.pending().await.unwrap()[0].id, t.id);
    let r = ledger
        .continue_task(&client, &t.id, Message::user_text("yes"))
        .await
        .unwrap();
    assert_eq!(r.task().unwrap().state(), TaskState::Completed);
    assert!(ledger.pending().await.unwrap().is_empty());
    assert_eq!(ledger.versions_of_task(&t.id).await.unwrap().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_operation_over_jsonrpc() {
    tokio::time::timeout(Duration::from_secs(60), all_operations(Binding::JsonRpc))
        .await
        .expect("bounded");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_operation_over_http_json() {
    tokio::time::timeout(Duration::from_secs(60), all_operations(Binding::HttpJson))
        .await
        .expect("bounded");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_operation_over_grpc() {
    tokio::time::timeout(Duration::from_secs(60), all_operations(Binding::Grpc))
        .await
        .expect("bounded");
}
