//! The four push-notification config operations (spec 3.1.7-3.1.10) and
//! the inline config of `SendMessage`, over JSON-RPC, HTTP+JSON and gRPC,
//! with their error cases. Webhook URLs are loopback (allow-listed) or
//! private addresses that are refused before anything is sent to them.

#[macro_use]
mod common;

use agentwire_client::{Binding, Client, Transport};
use agentwire_server::{A2aServer, PushConfig, ServerHandle, UrlPolicy};
use agentwire_types::{
    AuthenticationInfo, DeleteTaskPushNotificationConfigRequest, ErrorKind,
    GetTaskPushNotificationConfigRequest, ListTaskPushNotificationConfigsRequest, Message,
    SendMessageConfiguration, SendMessageRequest, TaskPushNotificationConfig, new_id,
};
use common::agents::{Echo, echo_card};
use common::*;

over_all_bindings!(
    card_declares_push,
    create_get_list_delete,
    several_configs_and_pagination,
    unknown_tasks_and_configs,
    invalid_configs,
    private_webhooks_are_refused,
    allow_listed_private_network,
    inline_config_is_stored_with_the_new_task,
    push_off_means_not_supported,
    configs_per_task_are_bounded,
);

/// An echo agent that sends push notifications, loopback webhooks allowed.
async fn push_server() -> ServerHandle {
    start_server(A2aServer::new(echo_card(), Echo).push(PushConfig::new().allow_loopback())).await
}

/// A loopback URL nobody listens on (the configs of these tests are only
/// stored; the tasks are finished before configs are added).
fn hook(path: &str) -> String {
    format!("http://127.0.0.1:9/{path}")
}

fn config(task_id: &str, id: &str, url: &str) -> TaskPushNotificationConfig {
    TaskPushNotificationConfig {
        task_id: task_id.into(),
        id: id.into(),
        url: url.into(),
        ..Default::default()
    }
}

async fn create(
    c: &Client,
    b: Binding,
    cfg: TaskPushNotificationConfig,
) -> agentwire_client::ClientResult<TaskPushNotificationConfig> {
    within(
        format!("[{b}] CreateTaskPushNotificationConfig"),
        c.create_task_push_notification_config(cfg, &NO_OPTS),
    )
    .await
}

async fn get(
    c: &Client,
    b: Binding,
    task_id: &str,
    id: &str,
) -> agentwire_client::ClientResult<TaskPushNotificationConfig> {
    let req = GetTaskPushNotificationConfigRequest {
        task_id: task_id.into(),
        id: id.into(),
        ..Default::default()
    };
    within(
        format!("[{b}] GetTaskPushNotificationConfig"),
        c.get_task_push_notification_config(req, &NO_OPTS),
    )
    .await
}

async fn list(
    c: &Client,
    b: Binding,
    task_id: &str,
    page_size: i32,
    page_token: &str,
) -> agentwire_client::ClientResult<agentwire_types::ListTaskPushNotificationConfigsResponse> {
    let req = ListTaskPushNotificationConfigsRequest {
        task_id: task_id.into(),
        page_size,
        page_token: page_token.into(),
        ..Default::default()
    };
    within(
        format!("[{b}] ListTaskPushNotificationConfigs"),
        c.list_task_push_notification_configs(req, &NO_OPTS),
    )
    .await
}

async fn delete(
    c: &Client,
    b: Binding,
    task_id: &str,
    id: &str,
) -> agentwire_client::ClientResult<()> {
    let req = DeleteTaskPushNotificationConfigRequest {
        task_id: task_id.into(),
        id: id.into(),
        ..Default::default()
    };
    within(
        format!("[{b}] DeleteTaskPushNotificationConfig"),
        c.delete_task_push_notification_config(req, &NO_OPTS),
    )
    .await
}

/// A finished echo task to hang configs on.
async fn task_id(c: &Client, b: Binding) -> String {
    send_task(c, b, Message::user_text("hello")).await.id
}

async fn card_declares_push(b: Binding) {
    let server = push_server().await;
    let c = client(&server, b).await;
    assert!(
        c.card().is_some_and(|c| c.supports_push_notifications()),
        "[{b}] capabilities.pushNotifications is declared when a push sender is configured"
    );
}

async fn create_get_list_delete(b: Binding) {
    let server = push_server().await;
    let c = client(&server, b).await;
    let t = task_id(&c, b).await;

    let mut cfg = config(&t, "", &hook("a"));
    cfg.token = "tok-1".into();
    cfg.authentication = Some(AuthenticationInfo {
        scheme: "Bearer".into(),
        credentials: "cred-1".into(),
    });
    let created = create(&c, b, cfg.clone())
        .await
        .unwrap_or_else(|e| panic!("[{b}] create: {e:?}"));
    assert!(!created.id.is_empty(), "[{b}] an id is generated");
    assert_eq!(created.task_id, t, "[{b}] task id");
    assert_eq!(created.url, cfg.url);
    assert_eq!(created.token, "tok-1");
    assert_eq!(created.authentication, cfg.authentication);

    let got = get(&c, b, &t, &created.id)
        .await
        .unwrap_or_else(|e| panic!("[{b}] get: {e:?}"));
    assert_eq!(got, created, "[{b}] get returns what create stored");

    let page = list(&c, b, &t, 0, "")
        .await
        .unwrap_or_else(|e| panic!("[{b}] list: {e:?}"));
    assert_eq!(page.configs, vec![created.clone()], "[{b}] list");
    assert!(page.next_page_token.is_empty());

    // Creating with the same id replaces.
    let mut replaced = created.clone();
    replaced.url = hook("b");
    let again = create(&c, b, replaced.clone()).await.unwrap();
    assert_eq!(again.id, created.id);
    assert_eq!(get(&c, b, &t, &created.id).await.unwrap().url, hook("b"));
    assert_eq!(list(&c, b, &t, 0, "").await.unwrap().configs.len(), 1);

    delete(&c, b, &t, &created.id)
        .await
        .unwrap_or_else(|e| panic!("[{b}] delete: {e:?}"));
    expect_kind(
        get(&c, b, &t, &created.id).await,
        ErrorKind::TaskNotFound,
        format!("[{b}] get after delete"),
    );
    assert!(list(&c, b, &t, 0, "").await.unwrap().configs.is_empty());
    // Idempotent.
    delete(&c, b, &t, &created.id)
        .await
        .unwrap_or_else(|e| panic!("[{b}] second delete: {e:?}"));
}

async fn several_configs_and_pagination(b: Binding) {
    let server = push_server().await;
    let c = client(&server, b).await;
    let t = task_id(&c, b).await;
    let mut ids = Vec::new();
    for i in 0..5 {
        let id = format!("cfg-{i}");
        create(&c, b, config(&t, &id, &hook(&id))).await.unwrap();
        ids.push(id);
    }
    let all = list(&c, b, &t, 0, "").await.unwrap();
    let got: Vec<_> = all.configs.iter().map(|c| c.id.clone()).collect();
    assert_eq!(got, ids, "[{b}] configs in creation order");

    let mut seen = Vec::new();
    let mut token = String::new();
    for _ in 0..5 {
        let page = list(&c, b, &t, 2, &token).await.unwrap();
        assert!(page.configs.len() <= 2, "[{b}] page size");
        seen.extend(page.configs.iter().map(|c| c.id.clone()));
        token = page.next_page_token;
        if token.is_empty() {
            break;
        }
    }
    assert_eq!(seen, ids, "[{b}] pages cover every config once");
    expect_kind(
        list(&c, b, &t, 2, "garbage!").await,
        ErrorKind::InvalidParams,
        format!("[{b}] bad page token"),
    );
    expect_kind(
        list(&c, b, &t, 1000, "").await,
        ErrorKind::InvalidParams,
        format!("[{b}] page size too large"),
    );
    // A config of another task is not visible through this one.
    let other = task_id(&c, b).await;
    expect_kind(
        get(&c, b, &other, "cfg-0").await,
        ErrorKind::TaskNotFound,
        format!("[{b}] config of another task"),
    );
}

async fn unknown_tasks_and_configs(b: Binding) {
    let server = push_server().await;
    let c = client(&server, b).await;
    let missing = format!("no-such-task-{}", new_id());
    expect_kind(
        create(&c, b, config(&missing, "", &hook("x"))).await,
        ErrorKind::TaskNotFound,
        format!("[{b}] create on an unknown task"),
    );
    expect_kind(
        get(&c, b, &missing, "x").await,
        ErrorKind::TaskNotFound,
        format!("[{b}] get on an unknown task"),
    );
    expect_kind(
        list(&c, b, &missing, 0, "").await,
        ErrorKind::TaskNotFound,
        format!("[{b}] list on an unknown task"),
    );
    expect_kind(
        delete(&c, b, &missing, "x").await,
        ErrorKind::TaskNotFound,
        format!("[{b}] delete on an unknown task"),
    );
    let t = task_id(&c, b).await;
    let e = expect_kind(
        get(&c, b, &t, "never-created").await,
        ErrorKind::TaskNotFound,
        format!("[{b}] get of an unknown config"),
    );
    assert!(e.message.contains("never-created"), "[{b}] {}", e.message);
}

async fn invalid_configs(b: Binding) {
    let server = push_server().await;
    let c = client(&server, b).await;
    let t = task_id(&c, b).await;
    for (url, why) in [
        ("", "required"),
        ("ftp://127.0.0.1/x", "scheme"),
        ("not a url", "URL"),
        ("http://user:pw@127.0.0.1:9/", "credentials"),
    ] {
        let e = expect_kind(
            create(&c, b, config(&t, "", url)).await,
            ErrorKind::InvalidParams,
            format!("[{b}] url {url:?}"),
        );
        assert!(e.message.contains(why), "[{b}] {url:?}: {}", e.message);
    }
    let mut cfg = config(&t, "", &hook("x"));
    cfg.authentication = Some(AuthenticationInfo {
        scheme: String::new(),
        credentials: "c".into(),
    });
    expect_kind(
        create(&c, b, cfg).await,
        ErrorKind::InvalidParams,
        format!("[{b}] authentication without a scheme"),
    );
    let mut cfg = config(&t, "", &hook("x"));
    cfg.token = "line\nbreak".into();
    expect_kind(
        create(&c, b, cfg).await,
        ErrorKind::InvalidParams,
        format!("[{b}] token that is no header value"),
    );
}

async fn private_webhooks_are_refused(b: Binding) {
    // The default policy: no allow-list at all.
    let server = start_server(A2aServer::new(echo_card(), Echo).push(PushConfig::new())).await;
    let c = client(&server, b).await;
    let t = task_id(&c, b).await;
    for (url, why) in [
        ("http://127.0.0.1:9/hook", "loopback"),
        ("http://localhost:9/hook", "loopback"),
        ("http://10.1.2.3/hook", "private"),
        ("http://192.168.0.10/hook", "private"),
        ("http://172.16.5.4/hook", "private"),
        ("http://169.254.169.254/latest/meta-data", "link-local"),
        ("http://[::1]:9/", "loopback"),
        ("http://0.0.0.0:9/", "unspecified"),
    ] {
        let e = expect_kind(
            create(&c, b, config(&t, "", url)).await,
            ErrorKind::InvalidParams,
            format!("[{b}] {url}"),
        );
        assert!(
            e.message.contains(why) && e.message.contains("SSRF"),
            "[{b}] {url}: the error names the reason: {}",
            e.message
        );
    }
    // The inline config of SendMessage is checked the same way, before the
    // agent runs.
    let req = SendMessageRequest {
        message: Some(Message::user_text("hi")),
        configuration: Some(SendMessageConfiguration {
            task_push_notification_config: Some(config("", "", "http://10.0.0.1/x")),
            ..Default::default()
        }),
        ..Default::default()
    };
    let e = expect_kind(
        within(format!("[{b}] send"), c.send_message(req, &NO_OPTS)).await,
        ErrorKind::InvalidParams,
        format!("[{b}] inline private webhook"),
    );
    assert!(e.message.contains("private"), "[{b}] {}", e.message);
}

async fn allow_listed_private_network(b: Binding) {
    // An operator allow-lists a private network: configs pointing there are
    // accepted (the task is finished: nothing is ever sent to it).
    let policy = UrlPolicy::new().allow_net("10.20.0.0/16");
    let server =
        start_server(A2aServer::new(echo_card(), Echo).push(PushConfig::new().url_policy(policy)))
            .await;
    let c = client(&server, b).await;
    let t = task_id(&c, b).await;
    create(&c, b, config(&t, "", "http://10.20.1.2/hook"))
        .await
        .unwrap_or_else(|e| panic!("[{b}] allow-listed: {e:?}"));
    expect_kind(
        create(&c, b, config(&t, "", "http://10.21.1.2/hook")).await,
        ErrorKind::InvalidParams,
        format!("[{b}] outside the allow-list"),
    );
}

async fn inline_config_is_stored_with_the_new_task(b: Binding) {
    let server = push_server().await;
    let c = client(&server, b).await;
    let mut inline = config("", "", &hook("inline"));
    inline.token = "t0k".into();
    let req = SendMessageRequest {
        message: Some(Message::user_text("hi")),
        configuration: Some(SendMessageConfiguration {
            task_push_notification_config: Some(inline),
            ..Default::default()
        }),
        ..Default::default()
    };
    let res = send(&c, b, req).await;
    let task = res.task().expect("a task").clone();
    let page = list(&c, b, &task.id, 0, "").await.unwrap();
    assert_eq!(page.configs.len(), 1, "[{b}] the inline config is stored");
    let cfg = &page.configs[0];
    assert_eq!(cfg.task_id, task.id, "[{b}] under the new task's id");
    assert!(!cfg.id.is_empty(), "[{b}] with a generated id");
    assert_eq!(cfg.token, "t0k");
}

async fn push_off_means_not_supported(b: Binding) {
    let server = start(echo_card(), Echo).await;
    let c = client(&server, b).await;
    assert!(
        !c.card().is_some_and(|c| c.supports_push_notifications()),
        "[{b}] not declared"
    );
    let t = task_id(&c, b).await;
    expect_kind(
        create(&c, b, config(&t, "", &hook("x"))).await,
        ErrorKind::PushNotificationNotSupported,
        format!("[{b}] create"),
    );
    expect_kind(
        list(&c, b, &t, 0, "").await,
        ErrorKind::PushNotificationNotSupported,
        format!("[{b}] list"),
    );
    let req = SendMessageRequest {
        message: Some(Message::user_text("hi")),
        configuration: Some(SendMessageConfiguration {
            task_push_notification_config: Some(config("", "", &hook("x"))),
            ..Default::default()
        }),
        ..Default::default()
    };
    expect_kind(
        within(format!("[{b}] send"), c.send_message(req, &NO_OPTS)).await,
        ErrorKind::PushNotificationNotSupported,
        format!("[{b}] inline config without push"),
    );
}

/// A task has at most `HandlerConfig::max_push_configs_per_task` configs
/// (16): each is sent every update of the task, so without a bound one
/// caller's task could make the server send thousands of requests an
/// update. The one over is refused as invalid parameters; replacing one by
/// its id is not refused, nor is a new one once one is deleted. A config id
/// longer than an identifier may be is refused too.
async fn configs_per_task_are_bounded(b: Binding) {
    let server = push_server().await;
    let c = client(&server, b).await;
    let t = task_id(&c, b).await;
    let max = agentwire_server::HandlerConfig::default().max_push_configs_per_task;
    for i in 0..max {
        let id = format!("cfg-{i}");
        create(&c, b, config(&t, &id, &hook(&id)))
            .await
            .unwrap_or_else(|e| panic!("[{b}] config {i}: {e:?}"));
    }
    let e = expect_kind(
        create(&c, b, config(&t, "one-more", &hook("one-more"))).await,
        ErrorKind::InvalidParams,
        format!("[{b}] config {max}"),
    );
    assert!(
        e.message.contains("max push configs per task"),
        "[{b}] {}",
        e.message
    );
    // Replacing one by its id is fine.
    let replaced = create(&c, b, config(&t, "cfg-3", &hook("new"))).await;
    assert_eq!(
        replaced.map(|c| c.url).ok(),
        Some(hook("new")),
        "[{b}] replace"
    );
    delete(&c, b, &t, "cfg-0").await.expect("delete");
    create(&c, b, config(&t, "one-more", &hook("one-more")))
        .await
        .unwrap_or_else(|e| panic!("[{b}] after a delete: {e:?}"));
    assert_eq!(list(&c, b, &t, 0, "").await.unwrap().configs.len(), max);
    let long = "x".repeat(agentwire_types::limits::MAX_ID_BYTES + 1);
    expect_kind(
        create(&c, b, config(&t, &long, &hook("long"))).await,
        ErrorKind::InvalidParams,
        format!("[{b}] a config id too long"),
    );
}

/// Creations racing on one task (the SQLite store, whose reads and writes
/// wait on the database) cannot each pass the check of the bound: of 40
/// configs created at once, exactly the bound's number are stored.
#[cfg(feature = "sqlite")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn configs_created_at_once_stay_within_the_bound() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let store = agentwire_server::store::SqliteStore::open(dir.path().join("push.db"))
        .await
        .expect("open SQLite");
    let server = start_server(
        A2aServer::new(echo_card(), Echo)
            .push(PushConfig::new().allow_loopback())
            .store(std::sync::Arc::new(store)),
    )
    .await;
    let b = Binding::JsonRpc;
    let c = client(&server, b).await;
    let t = task_id(&c, b).await;
    let max = agentwire_server::HandlerConfig::default().max_push_configs_per_task;
    let created = futures::future::join_all((0..40).map(|i| {
        let id = format!("racing-{i}");
        let cfg = config(&t, &id, &hook(&id));
        let c = &c;
        async move { create(c, b, cfg).await }
    }))
    .await;
    let stored = created.iter().filter(|r| r.is_ok()).count();
    for e in created.iter().filter_map(|r| r.as_ref().err()) {
        assert!(
            format!("{e:?}").contains("max push configs per task"),
            "{e:?}"
        );
    }
    assert_eq!(stored, max, "{created:?}");
    assert_eq!(list(&c, b, &t, 0, "").await.unwrap().configs.len(), max);
}
