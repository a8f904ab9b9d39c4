//! Push-notification delivery end to end, with a real webhook receiver
//! (`agentwire_client::webhook`) on loopback (allow-listed):
//!
//! - every event of a streamed task arrives, in order, signed and verified;
//! - a receiver that is down for several retry rounds gets everything once
//!   it is back, in order, nothing lost, nothing twice;
//! - a server stopped mid-delivery and rebuilt on the same SQLite file
//!   finishes the outbox;
//! - a tampered body, a wrong token or a forged signature is refused by the
//!   receiver;
//! - a name resolving to a refused address is refused at delivery time too.
//!
//! Plus an ignored test printing figures (notifications per second, added
//! latency over streaming): `cargo test -p agentwire-server --release --test
//! push_delivery -- --ignored --nocapture`.

// The binding macro of `common` is not used here.
#![allow(unused_macros)]

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use agentwire_client::webhook::{Notifications, PushNotification, WebhookReceiver};
use agentwire_client::{Binding, Transport};
use agentwire_server::push::{PushOutbox, PushSigner, RetryPolicy, SqliteOutbox};
use agentwire_server::store::SqliteStore;
use agentwire_server::{
    A2aServer, AgentExecutor, PushConfig, RequestContext, ServerHandle, TaskUpdater,
};
use agentwire_types::{
    A2aResult, AgentCard, Artifact, AuthenticationInfo, Message, SendMessageConfiguration,
    SendMessageRequest, StreamResponse, TaskPushNotificationConfig, TaskState, new_id,
};
use common::*;
use futures::StreamExt;

/// Emits `start_work`, N artifact chunks (N from the message text, default
/// 5), then `complete`. `ask` waits for input instead; the answer
/// completes the task.
struct Chunks;

impl AgentExecutor for Chunks {
    async fn execute(&self, ctx: RequestContext, task: TaskUpdater) -> A2aResult<()> {
        if ctx.task.is_some() {
            return task.complete().await;
        }
        if ctx.text().trim() == "ask" {
            task.start_work().await?;
            return task.require_input("more?").await;
        }
        let n: usize = ctx.text().trim().parse().unwrap_or(5);
        task.start_work().await?;
        let id = new_id();
        for i in 0..n {
            let chunk = Artifact::text("out", format!("c{i} ")).with_id(&id);
            task.artifact_chunk(chunk, i > 0, i + 1 == n).await?;
        }
        task.complete().await
    }
}

fn card() -> AgentCard {
    AgentCard::new("Chunks", "Streams numbered chunks", "1.0.0")
}

/// Short retry rounds for the tests.
fn fast_retry() -> RetryPolicy {
    RetryPolicy {
        max_attempts: 60,
        initial_backoff: Duration::from_millis(20),
        max_backoff: Duration::from_millis(150),
        attempt_timeout: Duration::from_secs(2),
    }
}

fn push_config() -> PushConfig {
    PushConfig::new()
        .allow_loopback()
        .retry(fast_retry())
        .lease(Duration::from_millis(1500))
        .poll_interval(Duration::from_millis(100))
}

async fn chunks_server(push: PushConfig) -> ServerHandle {
    start_server(A2aServer::new(card(), Chunks).push(push)).await
}

/// A receiver checking the token and the server's signatures (JWKS fetched
/// from the server), expecting any task.
fn receiver_for(server: &ServerHandle, token: &str) -> (WebhookReceiver, Notifications) {
    WebhookReceiver::builder()
        .token(token)
        .agent_url(&server.base_url())
        .jwks_min_refresh(Duration::from_millis(100))
        .accept_any_task(true)
        .build()
}

fn inline(url: &str, token: &str) -> TaskPushNotificationConfig {
    TaskPushNotificationConfig {
        url: url.into(),
        token: token.into(),
        authentication: Some(AuthenticationInfo {
            scheme: "Bearer".into(),
            credentials: "cred".into(),
        }),
        ..Default::default()
    }
}

fn send_req(
    text: &str,
    push: Option<TaskPushNotificationConfig>,
    immediate: bool,
) -> SendMessageRequest {
    SendMessageRequest {
        message: Some(Message::user_text(text)),
        configuration: Some(SendMessageConfiguration {
            task_push_notification_config: push,
            return_immediately: immediate,
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Waits until the server counts `n` deliveries (the receiver records a
/// notification just before the server sees its 2xx).
async fn wait_delivered(server: &ServerHandle, n: u64) -> agentwire_server::push::PushStats {
    let metrics = || server.handler().push_sender().unwrap().metrics().snapshot();
    within(format!("{n} deliveries counted"), async {
        while metrics().delivered < n {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    metrics()
}

/// Notifications until (and including) the task's terminal state.
async fn until_final(what: &str, rx: &mut Notifications) -> Vec<PushNotification> {
    let mut out = Vec::new();
    within(
        format!("{what}: notifications up to the final state"),
        async {
            while let Some(n) = rx.next().await {
                let done = n.event.state().is_some_and(TaskState::is_terminal);
                out.push(n);
                if done {
                    break;
                }
            }
        },
    )
    .await;
    out
}

/// Sequence numbers 1..=n, distinct ids, one task, ending terminal.
fn assert_in_order(what: &str, got: &[PushNotification], expected_events: usize) {
    assert_eq!(got.len(), expected_events, "{what}: count");
    for (i, n) in got.iter().enumerate() {
        assert_eq!(n.sequence, Some(i as u64 + 1), "{what}: sequence of #{i}");
        assert!(n.signed_by.is_some(), "{what}: #{i} signature verified");
        assert!(n.authenticated, "{what}: #{i} token checked");
    }
    let ids: std::collections::HashSet<_> = got.iter().map(|n| n.id.clone()).collect();
    assert_eq!(ids.len(), got.len(), "{what}: no duplicates");
    assert!(matches!(
        got[0].event.payload,
        Some(agentwire_types::stream_response::Payload::Task(_))
    ));
    // Chunks arrive in order: c0, c1, ...
    let texts: Vec<String> = got
        .iter()
        .filter_map(|n| match &n.event.payload {
            Some(agentwire_types::stream_response::Payload::ArtifactUpdate(u)) => {
                u.artifact.as_ref().map(|a| a.text_content())
            }
            _ => None,
        })
        .collect();
    let want: Vec<String> = (0..texts.len()).map(|i| format!("c{i} ")).collect();
    assert_eq!(texts, want, "{what}: chunk order");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamed_task_events_arrive_in_order() {
    for b in [Binding::JsonRpc, Binding::HttpJson, Binding::Grpc] {
        let server = chunks_server(push_config()).await;
        let (receiver, mut rx) = receiver_for(&server, "tok-stream");
        let hook = receiver.bind("127.0.0.1:0").await.unwrap();
        let c = client(&server, b).await;
        let req = send_req("20", Some(inline(&hook.url(), "tok-stream")), false);
        let stream = within(
            format!("[{b}] stream"),
            c.send_streaming_message(req, &NO_OPTS),
        )
        .await
        .unwrap();
        let streamed = collect(b, "stream", stream).await;
        let pushed = until_final(&format!("[{b}]"), &mut rx).await;
        // The same events, in the same order, as the stream (task, working,
        // 20 chunks, completed).
        assert_eq!(streamed.len(), 23, "[{b}] streamed events");
        let pushed_events: Vec<StreamResponse> = pushed.iter().map(|n| n.event.clone()).collect();
        assert_eq!(pushed_events, streamed, "[{b}] push = stream");
        assert_in_order(&format!("[{b}]"), &pushed, 23);
        let stats = wait_delivered(&server, 23).await;
        assert_eq!(stats.delivered, 23, "[{b}] {stats:?}");
        assert_eq!(stats.failed_attempts, 0, "[{b}] {stats:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn receiver_down_then_back_loses_nothing() {
    let server = chunks_server(push_config()).await;
    let (receiver, mut rx) = receiver_for(&server, "tok-down");
    // Take a port, then close it: the webhook is down.
    let hook = receiver.bind("127.0.0.1:0").await.unwrap();
    let addr = hook.local_addr();
    let url = hook.url();
    hook.shutdown().await;

    let c = client(&server, Binding::JsonRpc).await;
    let res = send(
        &c,
        Binding::JsonRpc,
        send_req("10", Some(inline(&url, "tok-down")), false),
    )
    .await;
    assert_eq!(res.task().unwrap().state(), TaskState::Completed);

    // Several retry rounds fail...
    let metrics = || server.handler().push_sender().unwrap().metrics().snapshot();
    within("a few failed attempts", async {
        while metrics().failed_attempts < 5 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert_eq!(metrics().delivered, 0);

    // ...then the receiver comes back on the same address.
    let hook = receiver.bind(addr).await.unwrap();
    let got = until_final("after the outage", &mut rx).await;
    assert_in_order("after the outage", &got, 13);
    let stats = wait_delivered(&server, 13).await;
    assert_eq!(stats.delivered, 13, "{stats:?}");
    assert_eq!(stats.configs_failed, 0, "{stats:?}");
    assert_eq!(
        server
            .handler()
            .push_sender()
            .unwrap()
            .outbox()
            .pending()
            .await
            .unwrap(),
        0
    );
    // Nothing more arrives.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(rx.next().now_or_never_is_none());
    drop(hook);
}

/// `Option::is_none` for "no item ready now".
trait NowOrNever {
    fn now_or_never_is_none(self) -> bool;
}

impl<F: std::future::Future> NowOrNever for F {
    fn now_or_never_is_none(self) -> bool {
        futures::FutureExt::now_or_never(self).is_none()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_webhook_is_given_up_after_the_cap() {
    let mut retry = fast_retry();
    retry.max_attempts = 3;
    let server = chunks_server(push_config().retry(retry)).await;
    // Nobody listens there.
    let (probe, _rx) = WebhookReceiver::builder().build();
    let hook = probe.bind("127.0.0.1:0").await.unwrap();
    let url = hook.url();
    hook.shutdown().await;
    let c = client(&server, Binding::HttpJson).await;
    send(
        &c,
        Binding::HttpJson,
        send_req("3", Some(inline(&url, "t")), false),
    )
    .await;
    let metrics = || server.handler().push_sender().unwrap().metrics().snapshot();
    within("the config to be marked failing", async {
        while metrics().configs_failed == 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    let stats = metrics();
    assert_eq!(stats.failed_attempts, 3, "{stats:?}");
    assert_eq!(stats.dropped, 6, "all 6 notifications dropped: {stats:?}");
    assert_eq!(
        server
            .handler()
            .push_sender()
            .unwrap()
            .outbox()
            .pending()
            .await
            .unwrap(),
        0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_on_the_same_sqlite_file_finishes_the_outbox() {
    let dir = std::env::temp_dir().join(format!("a2a-push-restart-{}", new_id()));
    std::fs::create_dir_all(&dir).unwrap();
    let db = dir.join("agent.db");
    let key = PushSigner::generate_pkcs8().unwrap();

    async fn server_on(db: &std::path::Path, key: &[u8]) -> ServerHandle {
        let store = SqliteStore::open(db).await.unwrap();
        let outbox = SqliteOutbox::open(db).await.unwrap();
        let push = push_config()
            .outbox(Arc::new(outbox))
            .signer(PushSigner::from_pkcs8(key).unwrap());
        start_server(
            A2aServer::new(card(), Chunks)
                .store(Arc::new(store))
                .push(push),
        )
        .await
    }

    // The receiver is slow: every request waits before it is recorded, so
    // the first server is stopped with a delivery in flight.
    let first = server_on(&db, &key).await;
    let (receiver, mut rx) = receiver_for(&first, "tok-restart");
    let slow = receiver.router().layer(axum::middleware::from_fn(
        |req, next: axum::middleware::Next| async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            next.run(req).await
        },
    ));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    let serving = tokio::spawn(async move {
        let _ = axum::serve(listener, slow).await;
    });

    let c = client(&first, Binding::JsonRpc).await;
    let task = send(
        &c,
        Binding::JsonRpc,
        send_req("8", Some(inline(&url, "tok-restart")), false),
    )
    .await
    .task()
    .unwrap()
    .clone();
    // Let a notification or two through, then "kill" the server: its worker
    // stops at once, with a request in flight.
    let early = within("a first notification", rx.next()).await.unwrap();
    assert_eq!(early.sequence, Some(1));
    tokio::time::sleep(Duration::from_millis(100)).await;
    first.handler().push_sender().unwrap().stop();
    first.shutdown().await.unwrap();
    drop(c);

    let pending = SqliteOutbox::open(&db)
        .await
        .unwrap()
        .pending()
        .await
        .unwrap();
    assert!(pending > 0, "notifications are left in the outbox");
    assert!(
        pending < 11,
        "some were delivered before the stop ({pending})"
    );

    // A new server on the same file resumes (after the dead worker's lease
    // expires) and finishes the stream.
    let second = server_on(&db, &key).await;
    let mut got = vec![early];
    got.extend(until_final("after the restart", &mut rx).await);
    assert_in_order("after the restart", &got, 11);
    assert!(got.iter().all(|n| n.task_id == task.id));
    within("the outbox to drain", async {
        loop {
            let p = second
                .handler()
                .push_sender()
                .unwrap()
                .outbox()
                .pending()
                .await
                .unwrap();
            if p == 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    // The notification in flight at the stop may have been recorded and
    // sent again: the receiver dropped it as a duplicate.
    let stats = receiver.stats();
    assert_eq!(stats.accepted, 11, "{stats:?}");
    assert!(stats.duplicates <= 1, "{stats:?}");
    serving.abort();
    drop(second);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Captures the raw requests the server sends, answering 200.
async fn tap() -> (
    String,
    Arc<parking_lot::Mutex<Vec<(http::HeaderMap, bytes::Bytes)>>>,
) {
    let seen = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let store = Arc::clone(&seen);
    let app = axum::Router::new().route(
        "/",
        axum::routing::post(move |headers: http::HeaderMap, body: bytes::Bytes| {
            let store = Arc::clone(&store);
            async move {
                store.lock().push((headers, body));
                "{}"
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (url, seen)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn receiver_refuses_tampered_or_unauthenticated_notifications() {
    let server = chunks_server(push_config()).await;
    let (url, seen) = tap().await;
    let c = client(&server, Binding::HttpJson).await;
    send(
        &c,
        Binding::HttpJson,
        send_req("2", Some(inline(&url, "right-token")), false),
    )
    .await;
    within("the tap to see 5 notifications", async {
        while seen.lock().len() < 5 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    let (mut headers, body) = seen.lock()[1].clone();
    // What the server sent, header by header.
    assert_eq!(headers["content-type"], "application/a2a+json");
    assert_eq!(headers["authorization"], "Bearer cred");
    assert_eq!(headers["x-a2a-notification-token"], "right-token");
    assert_eq!(headers["x-a2a-notification-sequence"], "2");
    assert!(headers.contains_key("x-a2a-notification-id"));
    assert!(headers.contains_key("x-a2a-notification-signature"));
    let event: StreamResponse = serde_json::from_slice(&body).unwrap();
    assert_eq!(event.state(), Some(TaskState::Working));
    // Replayed below with other bodies.
    headers.remove("content-length");
    headers.remove("host");

    let (receiver, _rx) = WebhookReceiver::builder()
        .token("right-token")
        .authorization("Bearer cred")
        .agent_url(&server.base_url())
        .accept_any_task(true)
        .build();
    let hook = receiver.bind("127.0.0.1:0").await.unwrap();
    let http = raw_http();
    let post = |headers: http::HeaderMap, body: Vec<u8>| {
        let http = http.clone();
        let url = hook.url();
        async move {
            http.post(url)
                .headers(headers)
                .body(body)
                .send()
                .await
                .unwrap()
                .status()
                .as_u16()
        }
    };
    // Tampered body (still a valid event): the signed hash does not match.
    let tampered = String::from_utf8(body.to_vec())
        .unwrap()
        .replace("TASK_STATE_WORKING", "TASK_STATE_COMPLETED");
    assert_ne!(tampered.as_bytes(), &body[..]);
    assert_eq!(post(headers.clone(), tampered.into_bytes()).await, 401);
    // Wrong token.
    let mut wrong = headers.clone();
    wrong.insert("x-a2a-notification-token", "guess".parse().unwrap());
    assert_eq!(post(wrong, body.to_vec()).await, 401);
    // Wrong Authorization.
    let mut wrong = headers.clone();
    wrong.insert("authorization", "Bearer guess".parse().unwrap());
    assert_eq!(post(wrong, body.to_vec()).await, 401);
    // No signature.
    let mut unsigned = headers.clone();
    unsigned.remove("x-a2a-notification-signature");
    assert_eq!(post(unsigned, body.to_vec()).await, 401);
    // A signature of another notification.
    let (other_headers, _) = seen.lock()[2].clone();
    let mut swapped = headers.clone();
    swapped.insert(
        "x-a2a-notification-signature",
        other_headers["x-a2a-notification-signature"].clone(),
    );
    assert_eq!(post(swapped, body.to_vec()).await, 401);
    // The genuine one is accepted, and its replay is a duplicate.
    assert_eq!(post(headers.clone(), body.to_vec()).await, 200);
    assert_eq!(post(headers.clone(), body.to_vec()).await, 200);
    let stats = receiver.stats();
    assert_eq!(
        (stats.accepted, stats.duplicates, stats.unauthenticated),
        (1, 1, 5),
        "{stats:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn receiver_refuses_unexpected_tasks() {
    // Both servers sign with one key, published by the first.
    let key = PushSigner::generate_pkcs8().unwrap();
    let signer = || PushSigner::from_pkcs8(&key).unwrap();
    let server = chunks_server(push_config().signer(signer())).await;
    let (receiver, mut rx) = WebhookReceiver::builder()
        .token("tok")
        .agent_url(&server.base_url())
        .build();
    let hook = receiver.bind("127.0.0.1:0").await.unwrap();
    let c = client(&server, Binding::JsonRpc).await;
    // The client chose the context: the receiver expects it before the
    // task exists.
    let context = new_id();
    let mut req = send_req("2", Some(inline(&hook.url(), "tok")), false);
    if let Some(m) = req.message.as_mut() {
        m.context_id = context.clone();
    }
    receiver.expect_context(&context);
    send(&c, Binding::JsonRpc, req).await;
    let got = until_final("expected context", &mut rx).await;
    assert_eq!(got.len(), 5);
    // A task nobody expects is refused (404), retried, and finally given up.
    let mut retry = fast_retry();
    retry.max_attempts = 2;
    let strict = chunks_server(push_config().retry(retry).signer(signer())).await;
    let c = client(&strict, Binding::JsonRpc).await;
    send(
        &c,
        Binding::JsonRpc,
        send_req("1", Some(inline(&hook.url(), "tok")), false),
    )
    .await;
    let metrics = || strict.handler().push_sender().unwrap().metrics().snapshot();
    within("the unexpected task's config to fail", async {
        while metrics().configs_failed == 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(receiver.stats().unknown_task >= 2, "{:?}", receiver.stats());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_resolving_to_refused_addresses_are_refused_at_delivery() {
    // The machine's own host name usually resolves to a loopback address:
    // a webhook by that name passes the URL's form check but not the check
    // of the address connected to.
    let Ok(host) = std::fs::read_to_string("/proc/sys/kernel/hostname") else {
        return;
    };
    let host = host.trim().to_owned();
    let resolves_to_loopback = tokio::net::lookup_host((host.as_str(), 80))
        .await
        .map(|mut a| a.all(|a| a.ip().is_loopback()))
        .unwrap_or(false);
    if host.is_empty() || !resolves_to_loopback {
        eprintln!("skipped: the host name {host:?} does not resolve to loopback only");
        return;
    }
    let (receiver, _rx) = WebhookReceiver::builder().accept_any_task(true).build();
    let hook = receiver.bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{host}:{}/", hook.local_addr().port());
    // Only 127.0.0.1 by number is allowed, not loopback names.
    let policy = agentwire_server::UrlPolicy::new().allow_net("10.255.255.255/32");
    let server = chunks_server(push_config().url_policy(policy)).await;
    let c = client(&server, Binding::JsonRpc).await;
    // Refused at creation (the name resolves to loopback)...
    let task = send_task(&c, Binding::JsonRpc, Message::user_text("1")).await;
    let cfg = TaskPushNotificationConfig {
        task_id: task.id.clone(),
        url: url.clone(),
        ..Default::default()
    };
    let e = expect_kind(
        c.create_task_push_notification_config(cfg.clone(), &NO_OPTS)
            .await,
        agentwire_types::ErrorKind::InvalidParams,
        "config by host name",
    );
    assert!(e.message.contains("loopback"), "{}", e.message);
    // ...and at delivery, for a config that got into the store anyway
    // (written there directly, bypassing the check).
    let waiting = send_task(&c, Binding::JsonRpc, Message::user_text("ask")).await;
    assert_eq!(waiting.state(), TaskState::InputRequired);
    tokio::time::sleep(Duration::from_millis(100)).await;
    server
        .handler()
        .store()
        .put_push_config(&agentwire_server::store::StoredPushConfig::v1(
            TaskPushNotificationConfig {
                id: "sneaky".into(),
                task_id: waiting.id.clone(),
                url,
                ..Default::default()
            },
        ))
        .await
        .unwrap();
    let answer = Message::user_text("go on")
        .with_task_id(&waiting.id)
        .with_context_id(&waiting.context_id);
    let done = send_task(&c, Binding::JsonRpc, answer).await;
    assert_eq!(done.state(), TaskState::Completed);
    let metrics = || server.handler().push_sender().unwrap().metrics().snapshot();
    within("the delivery to be refused", async {
        while metrics().configs_failed == 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    let stats = metrics();
    assert_eq!(stats.delivered, 0, "{stats:?}");
    assert_eq!(stats.refused, 1, "{stats:?}");
    assert_eq!(receiver.stats().accepted, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "prints figures; run with --release --ignored --nocapture"]
async fn figures_throughput_and_latency() {
    // Throughput: 50 tasks of 100 chunks each, sent at once, with the
    // in-memory outbox and with the SQLite one (a file in the temp dir).
    let dir = std::env::temp_dir().join(format!("a2a-push-bench-{}", new_id()));
    std::fs::create_dir_all(&dir).unwrap();
    let sqlite = SqliteOutbox::open(dir.join("outbox.db")).await.unwrap();
    for (name, push) in [
        ("memory", push_config().concurrency(64)),
        (
            "sqlite",
            push_config().concurrency(64).outbox(Arc::new(sqlite)),
        ),
    ] {
        let server = chunks_server(push).await;
        let (receiver, mut rx) = receiver_for(&server, "tok-bench");
        let hook = receiver.bind("127.0.0.1:0").await.unwrap();
        let c = client(&server, Binding::JsonRpc).await;
        let tasks = 50;
        let chunks = 100;
        let per_task = chunks + 3;
        let started = Instant::now();
        let mut sends = Vec::new();
        for _ in 0..tasks {
            let c = c.clone();
            let url = hook.url();
            sends.push(tokio::spawn(async move {
                let req = send_req(&chunks.to_string(), Some(inline(&url, "tok-bench")), true);
                Transport::send_message(&c, req, &NO_OPTS).await.unwrap();
            }));
        }
        for s in sends {
            s.await.unwrap();
        }
        let total = tasks * per_task;
        let mut n = 0;
        tokio::time::timeout(Duration::from_secs(120), async {
            while n < total {
                if rx.next().await.is_none() {
                    break;
                }
                n += 1;
            }
        })
        .await
        .expect("all notifications within 2 minutes");
        let secs = started.elapsed().as_secs_f64();
        println!(
            "push throughput ({name} outbox): {n} notifications ({tasks} tasks x {per_task}) in {secs:.2} s = {:.0}/s",
            n as f64 / secs
        );
    }
    let _ = std::fs::remove_dir_all(&dir);

    let server = chunks_server(push_config()).await;
    let c = client(&server, Binding::JsonRpc).await;
    // Latency: one task of 200 chunks, streamed and pushed at once; for each
    // event, the time between its arrival on the stream and at the webhook.
    let (receiver2, mut rx2) = receiver_for(&server, "tok-lat");
    let hook2 = receiver2.bind("127.0.0.1:0").await.unwrap();
    let req = send_req("200", Some(inline(&hook2.url(), "tok-lat")), false);
    let mut stream = c.send_streaming_message(req, &NO_OPTS).await.unwrap();
    let streamed = tokio::spawn(async move {
        let mut at = Vec::new();
        while let Some(ev) = stream.next().await {
            ev.unwrap();
            at.push(Instant::now());
        }
        at
    });
    let mut pushed = Vec::new();
    while pushed.len() < 203 {
        match tokio::time::timeout(Duration::from_secs(30), rx2.next()).await {
            Ok(Some(_)) => pushed.push(Instant::now()),
            _ => break,
        }
    }
    let streamed = streamed.await.unwrap();
    let mut delays: Vec<f64> = streamed
        .iter()
        .zip(&pushed)
        .map(|(s, p)| p.saturating_duration_since(*s).as_secs_f64() * 1000.0)
        .collect();
    delays.sort_by(|a, b| a.total_cmp(b));
    let pct = |p: f64| delays[((delays.len() as f64 - 1.0) * p) as usize];
    println!(
        "push latency over streaming ({} events): p50 {:.2} ms, p90 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        delays.len(),
        pct(0.5),
        pct(0.9),
        pct(0.99),
        pct(1.0)
    );
    println!(
        "{:?}",
        server.handler().push_sender().unwrap().metrics().snapshot()
    );
    drop(hook2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ledger_decides_and_records() {
    use agentwire_client::ledger::Ledger;
    let server = chunks_server(push_config()).await;
    let ledger = Ledger::in_memory();
    let (receiver, mut rx) = WebhookReceiver::builder()
        .token("tok-ledger")
        .agent_url(&server.base_url())
        .ledger(ledger.clone())
        .build();
    let hook = receiver.bind("127.0.0.1:0").await.unwrap();
    let c = client(&server, Binding::JsonRpc).await;
    // Returns at once: the task is in the ledger from the answer on, and the
    // receiver accepts its notifications (earlier ones are refused as
    // unknown and retried by the agent).
    let configuration = SendMessageConfiguration {
        task_push_notification_config: Some(inline(&hook.url(), "tok-ledger")),
        return_immediately: true,
        ..Default::default()
    };
    let res = within(
        "ledger send",
        ledger.send_with(
            &c,
            Message::user_text("4"),
            Some(configuration),
            &agentwire_client::CallOptions::new(),
        ),
    )
    .await
    .unwrap();
    let task_id = res.task().unwrap().id.clone();
    let got = until_final("ledger", &mut rx).await;
    assert!(got.iter().all(|n| n.task_id == task_id));
    let last = got.last().unwrap();
    assert_eq!(last.event.state(), Some(TaskState::Completed));
    // Recorded before the receiver answered: the ledger saw the end.
    let record = ledger.task(&task_id).await.unwrap().unwrap();
    assert_eq!(record.state, TaskState::Completed);
    assert_eq!(
        record.task.artifacts[0].text_content(),
        "c0 c1 c2 c3 ",
        "chunks merged by the ledger"
    );
}
