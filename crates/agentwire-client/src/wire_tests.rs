//! The transports and the client against a canned HTTP server: what goes on
//! the wire (paths, headers, bodies) and how answers are read.

use std::time::Duration;

use agentwire_types::{
    AgentCard, DeleteTaskPushNotificationConfigRequest, ErrorKind, GetTaskRequest,
    ListTasksRequest, Message, SendMessageRequest, SubscribeToTaskRequest, TaskState,
};
use futures::StreamExt;
use serde_json::json;

use crate::testutil::{Canned, dead_port, serve};
use crate::{
    Binding, CallOptions, Client, ClientError, JsonRpcTransport, RestTransport, Transport,
    select_interfaces,
};

fn task_json(id: &str, state: &str) -> serde_json::Value {
    json!({"id": id, "contextId": "ctx-1", "status": {"state": state}})
}

fn send_request(text: &str) -> SendMessageRequest {
    SendMessageRequest {
        message: Some(Message::user_text(text).with_message_id("m-1")),
        ..Default::default()
    }
}

#[tokio::test]
async fn jsonrpc_unary_on_the_wire() {
    let server = serve(|_| {
        Canned::json(
            200,
            json!({"jsonrpc": "2.0", "id": 1, "result": {"task": task_json("t-1", "TASK_STATE_COMPLETED")}}),
        )
    })
    .await;
    let rpc = JsonRpcTransport::new(format!("{}/", server.url))
        .unwrap()
        .with_tenant("acme");
    let opts = CallOptions::new()
        .with_bearer_token("tok")
        .with_extension("urn:ext:1");
    let answer = rpc.send_message(send_request("hi"), &opts).await.unwrap();
    assert_eq!(answer.task().unwrap().state(), TaskState::Completed);

    let req = &server.requests()[0];
    assert_eq!(req.method, "POST");
    assert_eq!(req.target, "/");
    assert_eq!(req.header("content-type"), Some("application/json"));
    assert_eq!(req.header("a2a-version"), Some("1.0"));
    assert_eq!(req.header("a2a-extensions"), Some("urn:ext:1"));
    assert_eq!(req.header("authorization"), Some("Bearer tok"));
    let body = req.json();
    assert_eq!(body["jsonrpc"], "2.0");
    assert_eq!(body["method"], "SendMessage");
    assert!(body["id"].is_u64());
    assert_eq!(body["params"]["tenant"], "acme");
    assert_eq!(body["params"]["message"]["parts"][0]["text"], "hi");
    assert_eq!(body["params"]["message"]["role"], "ROLE_USER");
}

#[tokio::test]
async fn jsonrpc_stream_and_errors() {
    let server = serve(|req| {
        let body: serde_json::Value = serde_json::from_slice(&req.body).unwrap();
        match body["method"].as_str().unwrap() {
            "SendStreamingMessage" => Canned::sse(&[
                ": hello\r\n\r\n",
                "data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"task\":",
                "{\"id\":\"t-1\",\"contextId\":\"c\",\"status\":{\"state\":\"TASK_STATE_SUBMITTED\"}}}}\r\n\r\n",
                "data: {\"jsonrpc\":\"2.0\",\"id\":1,\r\ndata: \"result\":{\"statusUpdate\":{\"taskId\":\"t-1\",\"contextId\":\"c\",\"status\":{\"state\":\"TASK_STATE_COMPLETED\"}}}}\r\n\r\n",
            ]),
            // An error before any stream: a plain JSON-RPC error body.
            "SubscribeToTask" => Canned::json(
                200,
                json!({"jsonrpc": "2.0", "id": 2, "error": {"code": -32004, "message": "task is terminal"}}),
            ),
            _ => Canned::text(500, "unexpected"),
        }
    })
    .await;
    let rpc = JsonRpcTransport::new(&server.url).unwrap();
    let events: Vec<_> = rpc
        .send_streaming_message(send_request("go"), &CallOptions::new())
        .await
        .unwrap()
        .collect()
        .await;
    assert_eq!(events.len(), 2, "{events:?}");
    assert_eq!(
        events[0].as_ref().unwrap().state(),
        Some(TaskState::Submitted)
    );
    assert_eq!(
        events[1].as_ref().unwrap().state(),
        Some(TaskState::Completed)
    );
    assert_eq!(
        server.requests()[0].header("accept"),
        Some("text/event-stream")
    );

    let err = rpc
        .subscribe_to_task(
            SubscribeToTaskRequest {
                id: "t-1".into(),
                ..Default::default()
            },
            &CallOptions::new(),
        )
        .await
        .expect_err("an error before the stream");
    assert_eq!(err.kind(), Some(ErrorKind::UnsupportedOperation));
}

#[tokio::test]
async fn jsonrpc_error_inside_the_stream_ends_it() {
    let server = serve(|_| {
        Canned::sse(&[
            "data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"task\":{\"id\":\"t\",\"contextId\":\"c\",\"status\":{\"state\":\"TASK_STATE_WORKING\"}}}}\n\n",
            "data: {\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-32603,\"message\":\"executor crashed\"}}\n\n",
            "data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"task\":{\"id\":\"t\",\"contextId\":\"c\",\"status\":{\"state\":\"TASK_STATE_WORKING\"}}}}\n\n",
        ])
    })
    .await;
    let rpc = JsonRpcTransport::new(&server.url).unwrap();
    let events: Vec<_> = rpc
        .send_streaming_message(send_request("go"), &CallOptions::new())
        .await
        .unwrap()
        .collect()
        .await;
    assert_eq!(events.len(), 2);
    let err = events[1].as_ref().unwrap_err();
    assert_eq!(err.kind(), Some(ErrorKind::Internal));
    assert!(err.to_string().contains("executor crashed"));
}

#[tokio::test]
async fn rest_paths_queries_and_errors() {
    let server = serve(|req| match (req.method.as_str(), req.target.as_str()) {
        ("GET", "/acme/tasks/t%2F1?historyLength=3") => {
            Canned::json(200, task_json("t/1", "TASK_STATE_WORKING"))
        }
        ("GET", t) if t.starts_with("/tasks?") => Canned::json(
            200,
            json!({"tasks": [], "nextPageToken": "", "pageSize": 10, "totalSize": 0}),
        ),
        ("DELETE", "/tasks/t-1/pushNotificationConfigs/cfg-1") => Canned {
            status: 204,
            content_type: "text/plain".into(),
            chunks: vec![],
            pause: Duration::ZERO,
        },
        ("GET", "/tasks/missing") => Canned::json(
            404,
            agentwire_types::A2aError::task_not_found("missing").to_http_body(),
        ),
        _ => Canned::text(404, "no route"),
    })
    .await;
    let rest = RestTransport::new(&server.url).unwrap();
    let opts = CallOptions::new();

    let task = rest
        .get_task(
            GetTaskRequest {
                current_generation: None,
                tenant: "acme".into(),
                id: "t/1".into(),
                history_length: Some(3),
            },
            &opts,
        )
        .await
        .unwrap();
    assert_eq!(task.id, "t/1");
    let first = &server.requests()[0];
    assert_eq!(first.header("a2a-version"), Some("1.0"));
    assert_eq!(
        first.header("content-type"),
        None,
        "no body, no content type"
    );

    let page = rest
        .list_tasks(
            ListTasksRequest {
                context_id: "ctx 1".into(),
                status: TaskState::Working as i32,
                page_size: Some(10),
                ..Default::default()
            },
            &opts,
        )
        .await
        .unwrap();
    assert_eq!(page.page_size, 10);
    assert_eq!(
        server.requests()[1].target,
        "/tasks?contextId=ctx%201&status=TASK_STATE_WORKING&pageSize=10"
    );

    rest.delete_task_push_notification_config(
        DeleteTaskPushNotificationConfigRequest {
            task_id: "t-1".into(),
            id: "cfg-1".into(),
            ..Default::default()
        },
        &opts,
    )
    .await
    .unwrap();

    let err = rest
        .get_task(
            GetTaskRequest {
                id: "missing".into(),
                ..Default::default()
            },
            &opts,
        )
        .await
        .unwrap_err();
    assert_eq!(err.kind(), Some(ErrorKind::TaskNotFound));
    let err = rest
        .get_task(
            GetTaskRequest {
                id: "elsewhere".into(),
                ..Default::default()
            },
            &opts,
        )
        .await
        .unwrap_err();
    assert!(
        matches!(err, ClientError::Http { status: 404, .. }),
        "{err:?}"
    );
}

#[tokio::test]
async fn rest_send_uses_the_a2a_media_type() {
    let server = serve(|_| {
        Canned::json(
            200,
            json!({"message": {"messageId": "r", "role": "ROLE_AGENT", "parts": [{"text": "pong"}]}}),
        )
    })
    .await;
    let rest = RestTransport::new(format!("{}/base/", server.url)).unwrap();
    let answer = rest
        .send_message(send_request("ping"), &CallOptions::new())
        .await
        .unwrap();
    assert_eq!(answer.message().unwrap().text(), "pong");
    let req = &server.requests()[0];
    assert_eq!(req.target, "/base/message:send");
    assert_eq!(req.header("content-type"), Some("application/a2a+json"));
    assert_eq!(req.json()["message"]["messageId"], "m-1");
}

#[tokio::test]
async fn rest_subscribe_retries_with_post_on_405() {
    let server = serve(|req| match req.method.as_str() {
        "GET" => Canned::text(405, "method not allowed"),
        _ => Canned::sse(&[
            "data: {\"task\":{\"id\":\"t-1\",\"contextId\":\"c\",\"status\":{\"state\":\"TASK_STATE_INPUT_REQUIRED\"}}}\n\n",
            "event: error\ndata: {\"error\":{\"code\":400,\"status\":\"FAILED_PRECONDITION\",\"message\":\"nope\",\"details\":[{\"@type\":\"type.googleapis.com/google.rpc.ErrorInfo\",\"reason\":\"UNSUPPORTED_OPERATION\",\"domain\":\"a2a-protocol.org\"}]}}\n\n",
        ]),
    })
    .await;
    let rest = RestTransport::new(&server.url).unwrap();
    let events: Vec<_> = rest
        .subscribe_to_task(
            SubscribeToTaskRequest {
                id: "t-1".into(),
                ..Default::default()
            },
            &CallOptions::new(),
        )
        .await
        .unwrap()
        .collect()
        .await;
    assert_eq!(events.len(), 2);
    assert_eq!(events[0].as_ref().unwrap().task_id(), Some("t-1"));
    assert_eq!(
        events[1].as_ref().unwrap_err().kind(),
        Some(ErrorKind::UnsupportedOperation)
    );
    let methods: Vec<_> = server
        .requests()
        .iter()
        .map(|r| (r.method.clone(), r.target.clone()))
        .collect();
    assert_eq!(
        methods,
        [
            ("GET".to_string(), "/tasks/t-1:subscribe".to_string()),
            ("POST".to_string(), "/tasks/t-1:subscribe".to_string())
        ]
    );
}

#[tokio::test]
async fn timeouts() {
    let server = serve(|_| {
        Canned::json(200, json!({"jsonrpc": "2.0", "id": 1, "result": {}}))
            .delayed(Duration::from_millis(500))
    })
    .await;
    let rpc = JsonRpcTransport::new(&server.url).unwrap();
    let opts = CallOptions::new().with_timeout(Duration::from_millis(100));
    let err = rpc
        .get_task(GetTaskRequest::default(), &opts)
        .await
        .unwrap_err();
    assert!(err.is_timeout(), "{err:?}");
    assert!(!err.is_unreachable());
}

fn card(interfaces: &[(&str, &str, &str, &str)]) -> AgentCard {
    let mut card = AgentCard::new("Test", "test agent", "1.0.0");
    for (url, binding, version, tenant) in interfaces {
        card.supported_interfaces
            .push(agentwire_types::AgentInterface {
                url: (*url).into(),
                protocol_binding: (*binding).into(),
                protocol_version: (*version).into(),
                tenant: (*tenant).into(),
            });
    }
    card
}

#[test]
fn selection_card_order_and_caller_order() {
    let c = card(&[
        ("h:1", "GRPC", "1.0", ""),
        ("http://h/rest", "HTTP+JSON", "1.0", ""),
        ("http://h/rpc-old", "JSONRPC", "0.3", ""),
        ("http://h/rpc", "JSONRPC", "1.0", ""),
        (
            "wss://h/ws",
            "https://example.com/bindings/ws/v1",
            "1.0",
            "",
        ),
    ]);
    let picked = |bindings: &[Binding], prefer: bool| -> Vec<String> {
        select_interfaces(&c, bindings, prefer)
            .unwrap()
            .into_iter()
            .map(|(b, i)| format!("{b} {}", i.url))
            .collect()
    };
    assert_eq!(
        picked(&Binding::ALL, false),
        [
            "GRPC h:1",
            "HTTP+JSON http://h/rest",
            "JSONRPC http://h/rpc"
        ]
    );
    assert_eq!(
        picked(&Binding::ALL, true),
        [
            "JSONRPC http://h/rpc",
            "HTTP+JSON http://h/rest",
            "GRPC h:1"
        ]
    );
    assert_eq!(
        picked(&[Binding::JsonRpc, Binding::HttpJson], false),
        ["HTTP+JSON http://h/rest", "JSONRPC http://h/rpc"]
    );
    assert_eq!(picked(&[Binding::JsonRpc], false), ["JSONRPC http://h/rpc"]);
}

#[test]
fn selection_refuses_0x_and_unusable_cards() {
    let err = select_interfaces(&card(&[]), &Binding::ALL, false).unwrap_err();
    assert!(matches!(err, ClientError::NoCompatibleInterface(_)));
    assert!(err.to_string().contains("supportedInterfaces"), "{err}");

    let c = card(&[
        ("http://h/rpc", "JSONRPC", "0.3", ""),
        ("h:1", "GRPC", "", ""),
        ("http://h/rest", "HTTP+JSON", "2.0", ""),
    ]);
    // A 0.3 interface and no 1.0 one: refused unless allowed, naming how.
    let err = select_interfaces(&c, &Binding::ALL, false).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("only A2A 0.3") && msg.contains("--allow-v03"),
        "{msg}"
    );
    let picked = crate::select_interfaces_with(&c, &Binding::ALL, false, true).unwrap();
    assert_eq!(picked.len(), 1);
    assert_eq!(picked[0].1.url, "http://h/rpc");
    // A card with a 1.0 interface is never downgraded, even when allowed.
    let both = card(&[
        ("http://h/rpc", "JSONRPC", "0.3", ""),
        ("http://h/rest", "HTTP+JSON", "1.0", ""),
    ]);
    let picked = crate::select_interfaces_with(&both, &Binding::ALL, false, true).unwrap();
    assert_eq!(picked.len(), 1);
    assert_eq!(picked[0].1.protocol_version, "1.0");
    // Unusable versions only: the offered interfaces are listed.
    let c = card(&[
        ("h:1", "GRPC", "", ""),
        ("http://h/rest", "HTTP+JSON", "2.0", ""),
    ]);
    let err = select_interfaces(&c, &Binding::ALL, false).unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("no protocolVersion"), "{msg}");
    let c = card(&[("h:1", "GRPC", "1.0", "")]);
    let err = select_interfaces(&c, &[Binding::JsonRpc], true).unwrap_err();
    assert!(err.to_string().contains("accepts JSONRPC"), "{err}");
    assert!(Client::new(card(&[])).is_err());
}

#[tokio::test]
async fn client_falls_back_when_unreachable_and_sets_the_tenant() {
    let server = serve(|req| {
        if req.target == "/acme/message:send" {
            Canned::json(
                200,
                json!({"task": task_json("t-1", "TASK_STATE_COMPLETED")}),
            )
        } else {
            Canned::text(404, "no")
        }
    })
    .await;
    let dead = format!("http://127.0.0.1:{}/", dead_port());
    let client = Client::new(card(&[
        (&dead, "JSONRPC", "1.0", "ignored"),
        (&server.url, "HTTP+JSON", "1.0", "acme"),
    ]))
    .unwrap();
    assert_eq!(client.binding(), Some(Binding::JsonRpc));
    let answer = client.send_text("hello").await.unwrap();
    assert_eq!(answer.task().unwrap().id, "t-1");
    assert_eq!(client.binding(), Some(Binding::HttpJson));
    assert_eq!(client.interface().unwrap().tenant, "acme");
    let body = server.requests()[0].json();
    assert_eq!(body["tenant"], "acme");
    assert_eq!(body["message"]["role"], "ROLE_USER");
    assert!(!body["message"]["messageId"].as_str().unwrap().is_empty());

    // The next call goes straight to the working interface.
    let _ = client.send_text("again").await.unwrap();
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn client_does_not_fall_back_on_a2a_errors() {
    let first = serve(|_| {
        Canned::json(
            200,
            json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32001, "message": "Task not found"}}),
        )
    })
    .await;
    let second = serve(|_| Canned::json(200, task_json("t", "TASK_STATE_WORKING"))).await;
    let client = Client::new(card(&[
        (&first.url, "JSONRPC", "1.0", ""),
        (&second.url, "HTTP+JSON", "1.0", ""),
    ]))
    .unwrap();
    let err = client.get_task("nope").await.unwrap_err();
    assert_eq!(err.kind(), Some(ErrorKind::TaskNotFound));
    assert!(second.requests().is_empty());
    assert_eq!(client.binding(), Some(Binding::JsonRpc));
}

#[tokio::test]
async fn client_reports_every_unreachable_interface() {
    let a = format!("http://127.0.0.1:{}/", dead_port());
    let b = format!("127.0.0.1:{}", dead_port());
    let client = Client::new(card(&[(&a, "JSONRPC", "1.0", ""), (&b, "GRPC", "1.0", "")])).unwrap();
    let err = client.cancel_task("t").await.unwrap_err();
    assert!(err.is_unreachable(), "{err:?}");
    let msg = err.to_string();
    assert!(msg.contains("JSONRPC") && msg.contains("GRPC"), "{msg}");
}

#[tokio::test]
async fn client_options_merge_with_call_options() {
    let server = serve(|_| {
        Canned::json(
            200,
            json!({"jsonrpc": "2.0", "id": 1, "result": task_json("t", "TASK_STATE_WORKING")}),
        )
    })
    .await;
    let client = Client::builder()
        .options(
            CallOptions::new()
                .with_bearer_token("default")
                .with_extension("urn:a"),
        )
        .build(card(&[(&server.url, "JSONRPC", "1.0", "")]))
        .unwrap();
    client.get_task("t").await.unwrap();
    let per_call = CallOptions::new().with_extension("urn:b");
    Transport::get_task(
        &client,
        GetTaskRequest {
            id: "t".into(),
            ..Default::default()
        },
        &per_call,
    )
    .await
    .unwrap();
    let reqs = server.requests();
    assert_eq!(reqs[0].header("authorization"), Some("Bearer default"));
    assert_eq!(reqs[0].header("a2a-extensions"), Some("urn:a"));
    assert_eq!(reqs[1].header("authorization"), Some("Bearer default"));
    assert_eq!(reqs[1].header("a2a-extensions"), Some("urn:a,urn:b"));
}

#[tokio::test]
async fn from_transport_keeps_the_request_tenant() {
    let server = serve(|_| Canned::json(200, task_json("t", "TASK_STATE_CANCELED"))).await;
    let client = Client::from_transport(Box::new(RestTransport::new(&server.url).unwrap()));
    assert_eq!(client.binding(), None);
    let task = Transport::cancel_task(
        &client,
        agentwire_types::CancelTaskRequest {
            tenant: "t1".into(),
            id: "t".into(),
            ..Default::default()
        },
        &CallOptions::new(),
    )
    .await
    .unwrap();
    assert_eq!(task.state(), TaskState::Canceled);
    assert_eq!(server.requests()[0].target, "/t1/tasks/t:cancel");
}

#[tokio::test]
async fn api_key_in_the_query_and_bearer_in_the_header_per_the_card() {
    use agentwire_types::{ApiKeySecurityScheme, SecurityScheme, security_scheme};
    let server = serve(|req| {
        if req.target.contains("/tasks/") {
            Canned::json(200, task_json("t-1", "TASK_STATE_COMPLETED"))
        } else {
            Canned::json(
                200,
                json!({"jsonrpc": "2.0", "id": 1, "result": task_json("t-1", "TASK_STATE_COMPLETED")}),
            )
        }
    })
    .await;
    let mut card = AgentCard::new("Keyed", "d", "1")
        .with_interface(format!("{}/rpc", server.url), "JSONRPC")
        .with_interface(server.url.clone(), "HTTP+JSON");
    card.security_schemes.insert(
        "key".into(),
        SecurityScheme {
            scheme: Some(security_scheme::Scheme::ApiKeySecurityScheme(
                ApiKeySecurityScheme {
                    location: "query".into(),
                    name: "api_key".into(),
                    ..Default::default()
                },
            )),
        },
    );
    let creds = crate::Credentials::new()
        .with_api_key("k 1&2")
        .with_bearer("tok");
    for b in [Binding::JsonRpc, Binding::HttpJson] {
        let client = Client::builder()
            .bindings([b])
            .credentials(creds.clone())
            .build(card.clone())
            .unwrap();
        client.get_task("t-1").await.unwrap();
    }
    let reqs = server.requests();
    assert_eq!(reqs.len(), 2);
    assert!(
        reqs[0].target.starts_with("/rpc?api_key=k+1%262"),
        "{}",
        reqs[0].target
    );
    assert!(
        reqs[1].target.starts_with("/tasks/t-1?"),
        "{}",
        reqs[1].target
    );
    assert!(
        reqs[1].target.contains("api_key=k%201%262"),
        "{}",
        reqs[1].target
    );
    for r in &reqs {
        assert_eq!(r.header("authorization"), Some("Bearer tok"));
        assert_eq!(r.header("a2a-version"), Some("1.0"));
        assert!(r.header("x-api-key").is_none());
    }
}

#[tokio::test]
async fn interceptors_see_every_call() {
    use std::sync::Mutex;
    #[derive(Debug, Default)]
    struct Seen(Mutex<Vec<String>>);
    impl crate::Interceptor for Seen {
        fn intercept(
            &self,
            op: crate::Operation,
            options: &mut CallOptions,
        ) -> crate::ClientResult<()> {
            self.0.lock().unwrap().push(op.name().to_owned());
            options.extensions.push("urn:ext:trace".into());
            options
                .service_params
                .push(("X-Trace".into(), "abc".into()));
            Ok(())
        }
    }
    let server = serve(|_| {
        Canned::json(
            200,
            json!({"jsonrpc": "2.0", "id": 1, "result": task_json("t-1", "TASK_STATE_COMPLETED")}),
        )
    })
    .await;
    let seen = std::sync::Arc::new(Seen::default());
    let card = AgentCard::new("I", "d", "1").with_interface(format!("{}/", server.url), "JSONRPC");
    let client = Client::builder()
        .interceptor(seen.clone())
        .build(card)
        .unwrap();
    client.get_task("t-1").await.unwrap();
    client.cancel_task("t-1").await.unwrap();
    assert_eq!(*seen.0.lock().unwrap(), ["GetTask", "CancelTask"]);
    let reqs = server.requests();
    assert_eq!(reqs[0].header("a2a-extensions"), Some("urn:ext:trace"));
    assert_eq!(reqs[1].header("x-trace"), Some("abc"));
}

/// The wire tap on each binding against the project's own server: the
/// exact request body, the answer's frames as received (gRPC messages as
/// JSON), the credential redacted, the exchanges labelled by their scope.
#[tokio::test]
async fn the_tap_sees_every_binding_as_sent_and_received() {
    use std::sync::Arc;

    use crate::tap::{Tap, WireLog};

    let server = agentwire_server::A2aServer::new(
        agentwire_agents::conformance::card(),
        agentwire_agents::conformance::ConformanceAgent::default(),
    )
    .bind("127.0.0.1:0")
    .await
    .expect("bind")
    .spawn();
    for b in Binding::ALL {
        let log = Arc::new(WireLog::new(10));
        let client = Client::builder()
            .bindings([b])
            .credentials(crate::Credentials::new().with_bearer("s3cret-tok"))
            .tap(Tap::new(log.clone()))
            .connect(&server.base_url())
            .await
            .expect("connect");
        let request = SendMessageRequest {
            message: Some(
                Message::user_text("chunks please").with_message_id("tck-stream-artifact-chunked"),
            ),
            ..Default::default()
        };
        let events: Vec<_> = crate::tap::scope(
            "streamed",
            client.send_streaming_message(request, &CallOptions::new()),
        )
        .await
        .expect("a stream")
        .collect()
        .await;
        assert!(events.iter().all(Result::is_ok), "{b}: {events:?}");
        let got = client.get_task("nope").await.unwrap_err();
        assert_eq!(got.kind(), Some(ErrorKind::TaskNotFound), "{b}");

        let xs = log.exchanges();
        assert_eq!(xs.len(), 2, "{b}: {xs:?}");
        let x = &xs[0];
        assert_eq!(x.label.as_deref(), Some("streamed"), "{b}");
        assert_eq!(x.operation, "SendStreamingMessage");
        assert_eq!(x.binding, b);
        let text = format!("{xs:?}");
        assert!(!text.contains("s3cret-tok"), "{b}: {text}");
        assert!(
            x.request_headers
                .iter()
                .any(|(k, v)| k == "authorization" && v == "Bearer <redacted>"),
            "{b}: {:?}",
            x.request_headers
        );
        let body: serde_json::Value =
            serde_json::from_slice(x.request_body.as_ref().expect("a body").bytes()).expect("JSON");
        let message = match b {
            Binding::JsonRpc => {
                assert_eq!(body["method"], "SendStreamingMessage");
                &body["params"]["message"]
            }
            _ => &body["message"],
        };
        assert_eq!(message["messageId"], "tck-stream-artifact-chunked", "{b}");
        match b {
            Binding::Grpc => {
                assert_eq!(x.method, "/lf.a2a.v1.A2AService/SendStreamingMessage");
                assert_eq!(x.status, None);
            }
            _ => {
                assert_eq!(x.method, "POST");
                assert_eq!(x.status, Some(200));
                assert!(
                    x.response_headers
                        .iter()
                        .any(|(k, v)| k == "content-type" && v.starts_with("text/event-stream")),
                    "{b}: {:?}",
                    x.response_headers
                );
            }
        }
        // The task, working, two chunks, completed: each frame as it came.
        assert_eq!(x.frames.len(), events.len(), "{b}");
        assert_eq!(x.frames.len(), 5, "{b}");
        for f in &x.frames {
            let v: serde_json::Value = serde_json::from_slice(f.data.bytes()).expect("JSON");
            let ev = if b == Binding::JsonRpc {
                &v["result"]
            } else {
                &v
            };
            assert!(ev.is_object(), "{b}: {v}");
        }
        let end = x.end.as_ref().expect("ended");
        assert_eq!((end.error.as_deref(), end.frames), (None, 5), "{b}");
        // An A2A error is an answer: on the HTTP bindings its body is there,
        // on gRPC the status ends the exchange.
        let e = &xs[1];
        assert_eq!(e.label, None);
        assert_eq!(e.operation, "GetTask");
        match b {
            Binding::Grpc => assert!(
                e.end
                    .as_ref()
                    .and_then(|x| x.error.as_deref())
                    .is_some_and(|s| s.starts_with("NOT_FOUND")),
                "{e:?}"
            ),
            _ => assert!(
                e.response_body
                    .as_ref()
                    .is_some_and(|x| x.text().contains("TASK_NOT_FOUND")),
                "{e:?}"
            ),
        }
    }
}

/// A key the card wants in the query is redacted in the URL the tap shows;
/// the request still carries it.
#[tokio::test]
async fn the_tap_redacts_api_keys_where_the_card_puts_them() {
    use std::sync::Arc;

    use agentwire_types::{ApiKeySecurityScheme, SecurityScheme, security_scheme};

    use crate::tap::{Tap, WireLog};

    let server = serve(|_| {
        Canned::json(
            200,
            json!({"jsonrpc": "2.0", "id": 1, "result": task_json("t-1", "TASK_STATE_COMPLETED")}),
        )
    })
    .await;
    let mut card =
        AgentCard::new("Keyed", "d", "1").with_interface(format!("{}/rpc", server.url), "JSONRPC");
    for (name, location, key_name) in [
        ("a-query", "query", "api_key"),
        ("b-header", "header", "X-Secret"),
    ] {
        card.security_schemes.insert(
            name.into(),
            SecurityScheme {
                scheme: Some(security_scheme::Scheme::ApiKeySecurityScheme(
                    ApiKeySecurityScheme {
                        location: location.into(),
                        name: key_name.into(),
                        ..Default::default()
                    },
                )),
            },
        );
    }
    let log = Arc::new(WireLog::new(10));
    let client = Client::builder()
        .credentials(crate::Credentials::new().with_api_key("k-s3cret"))
        .options(CallOptions::new().with_service_param("X-Secret", "h-s3cret"))
        .tap(Tap::new(log.clone()))
        .build(card)
        .unwrap();
    client.get_task("t-1").await.unwrap();
    let sent = &server.requests()[0];
    assert!(sent.target.contains("api_key=k-s3cret"), "{}", sent.target);
    assert_eq!(sent.header("x-secret"), Some("h-s3cret"));
    let x = &log.exchanges()[0];
    assert!(x.url.ends_with("/rpc?api_key=<redacted>"), "{}", x.url);
    assert!(!format!("{x:?}").contains("s3cret"), "{x:?}");
    assert_eq!(x.request_body.as_ref().unwrap().bytes(), &sent.body[..]);
}
