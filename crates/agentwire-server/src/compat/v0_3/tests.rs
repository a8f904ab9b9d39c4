//! Round trips of every type between 1.0 and 0.3, both ways, and the 0.3
//! wire shapes written out from the 0.3 specification's examples.
//!
//! 1.0 -> 0.3 -> 1.0: a 1.0 value converted and written as 0.3 JSON, read
//! back and converted again, is the value it was (for what 0.3 can say).
//! 0.3 -> 1.0 -> 0.3: a 0.3 document read, converted to 1.0 and back, is
//! the document it was.

use agentwire_types as v1;
use agentwire_types::{Struct, Timestamp};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::convert::*;
use super::types as v03;

fn meta(v: Value) -> Option<Struct> {
    Some(serde_json::from_value(v).unwrap())
}

/// `v` (0.3 JSON) read as `T`, and `T` written back, is `v`.
fn wire_round_trip<T: DeserializeOwned + Serialize>(v: Value) -> T {
    let t: T = serde_json::from_value(v.clone()).unwrap_or_else(|e| panic!("{e}: {v}"));
    assert_eq!(serde_json::to_value(&t).unwrap(), v);
    t
}

fn ts() -> Timestamp {
    Timestamp::parse("2025-10-28T12:30:00Z").unwrap()
}

fn all_parts() -> Vec<v1::Part> {
    vec![
        v1::Part::text("hello").with_metadata("k", json!("v")),
        v1::Part::file(&b"\x00\x01binary"[..], "a.bin", "application/octet-stream"),
        v1::Part::url("https://example.com/f.pdf")
            .with_media_type("application/pdf")
            .with_filename("f.pdf"),
        v1::Part::url("https://example.com/bare"),
        v1::Part::data(json!({"key": "value", "n": 42, "nested": {"a": [1, 2.5, null, true]}})),
        // Not an object: wrapped for 0.3 and unwrapped again.
        v1::Part::data(json!([1, "two", {"three": 3}])),
        v1::Part::data(json!("just a string")).with_metadata("m", json!(1)),
    ]
}

fn message(role: v1::Role) -> v1::Message {
    v1::Message {
        message_id: "m-1".into(),
        context_id: "ctx-1".into(),
        task_id: "t-1".into(),
        role: role as i32,
        parts: all_parts(),
        metadata: meta(json!({"trace": "x"})),
        extensions: vec!["https://example.com/ext".into()],
        reference_task_ids: vec!["t-0".into()],
    }
}

fn artifact() -> v1::Artifact {
    v1::Artifact {
        artifact_id: "a-1".into(),
        name: "result".into(),
        description: "the result".into(),
        parts: all_parts(),
        metadata: meta(json!({"size": 3})),
        extensions: vec!["https://example.com/ext".into()],
    }
}

fn status(state: v1::TaskState) -> v1::TaskStatus {
    v1::TaskStatus {
        state: state as i32,
        message: Some(Box::new(message(v1::Role::Agent))),
        timestamp: Some(ts()),
    }
}

fn task(state: v1::TaskState) -> v1::Task {
    v1::Task {
        generation: 0,
        id: "t-1".into(),
        context_id: "ctx-1".into(),
        status: Some(status(state)),
        artifacts: vec![artifact(), v1::Artifact::text("second", "x")],
        history: vec![message(v1::Role::User), message(v1::Role::Agent)],
        metadata: meta(json!({"owner": "me"})),
    }
}

const STATES: [v1::TaskState; 9] = [
    v1::TaskState::Unspecified,
    v1::TaskState::Submitted,
    v1::TaskState::Working,
    v1::TaskState::Completed,
    v1::TaskState::Failed,
    v1::TaskState::Canceled,
    v1::TaskState::InputRequired,
    v1::TaskState::Rejected,
    v1::TaskState::AuthRequired,
];

/// 1.0 value -> 0.3 type -> JSON -> 0.3 type -> 1.0 value.
fn via_v03<A: Serialize, B: DeserializeOwned, T>(
    v03_value: A,
    back: impl FnOnce(B) -> T,
) -> (T, Value) {
    let json = serde_json::to_value(&v03_value).unwrap();
    let read: B = serde_json::from_value(json.clone()).unwrap_or_else(|e| panic!("{e}: {json}"));
    (back(read), json)
}

#[test]
fn states_and_roles_map_one_to_one() {
    let names = [
        "unknown",
        "submitted",
        "working",
        "completed",
        "failed",
        "canceled",
        "input-required",
        "rejected",
        "auth-required",
    ];
    for (state, name) in STATES.iter().zip(names) {
        let s = state_to_v03(*state as i32);
        assert_eq!(serde_json::to_value(s).unwrap(), json!(name));
        assert_eq!(state_to_v1(s), *state);
    }
    for role in [v1::Role::User, v1::Role::Agent] {
        let r = role_to_v03(role as i32);
        assert_eq!(role_to_v1(r), role);
    }
    assert_eq!(serde_json::to_value(v03::Role::User).unwrap(), "user");
    assert_eq!(serde_json::to_value(v03::Role::Agent).unwrap(), "agent");
    // 0.3 has no unspecified role.
    assert_eq!(role_to_v03(v1::Role::Unspecified as i32), v03::Role::Agent);
    assert!(serde_json::from_value::<v03::TaskState>(json!("TASK_STATE_WORKING")).is_err());
}

#[test]
fn every_part_round_trips() {
    for part in all_parts() {
        let (back, json) = via_v03(part_to_v03(part.clone()), |p| part_to_v1(p).unwrap());
        assert_eq!(back, part, "{json}");
    }
}

#[test]
fn parts_have_the_0_3_shapes() {
    let j = |p: v1::Part| serde_json::to_value(part_to_v03(p)).unwrap();
    assert_eq!(
        j(v1::Part::text("hi")),
        json!({"kind": "text", "text": "hi"})
    );
    assert_eq!(
        j(v1::Part::file(&b"hi"[..], "a.txt", "text/plain")),
        json!({"kind": "file", "file": {"bytes": "aGk=", "name": "a.txt", "mimeType": "text/plain"}})
    );
    assert_eq!(
        j(v1::Part::url("https://x/y")),
        json!({"kind": "file", "file": {"uri": "https://x/y"}})
    );
    assert_eq!(
        j(v1::Part::data(json!({"a": 1}))),
        json!({"kind": "data", "data": {"a": 1}})
    );
    assert_eq!(
        j(v1::Part::data(json!([1]))),
        json!({"kind": "data", "data": {"value": [1]}, "metadata": {"data_part_compat": true}})
    );
    // What 0.3 cannot carry: a text part's media type.
    assert_eq!(
        j(v1::Part::text("hi").with_media_type("text/markdown")),
        json!({"kind": "text", "text": "hi"})
    );
    // Bad base64 is an invalid-params error, not a panic.
    let bad: v03::Part =
        serde_json::from_value(json!({"kind": "file", "file": {"bytes": "!!not base64!!"}}))
            .unwrap();
    assert_eq!(
        part_to_v1(bad).unwrap_err().kind,
        agentwire_types::ErrorKind::InvalidParams
    );
    // A part needs its kind.
    assert!(serde_json::from_value::<v03::Part>(json!({"text": "x"})).is_err());
}

#[test]
fn messages_round_trip() {
    for role in [v1::Role::User, v1::Role::Agent] {
        let m = message(role);
        let (back, json) = via_v03(message_to_v03(m.clone()), |m| message_to_v1(m).unwrap());
        assert_eq!(back, m);
        assert_eq!(json["kind"], "message");
        assert_eq!(
            json["role"],
            if role == v1::Role::User {
                "user"
            } else {
                "agent"
            }
        );
        assert_eq!(json["referenceTaskIds"], json!(["t-0"]));
    }
    // The smallest message: empty fields left out.
    let m = v1::Message::user_text("hi").with_message_id("m");
    let j = serde_json::to_value(message_to_v03(m)).unwrap();
    assert_eq!(
        j,
        json!({"kind": "message", "messageId": "m", "role": "user", "parts": [{"kind": "text", "text": "hi"}]})
    );
}

#[test]
fn artifacts_round_trip() {
    let a = artifact();
    let (back, _) = via_v03(artifact_to_v03(a.clone()), |a| artifact_to_v1(a).unwrap());
    assert_eq!(back, a);
}

#[test]
fn statuses_and_tasks_round_trip_in_every_state() {
    for state in STATES {
        let s = status(state);
        let (back, _) = via_v03(status_to_v03(s.clone()), |s| status_to_v1(s).unwrap());
        assert_eq!(back, s);
        let t = task(state);
        let (back, json) = via_v03(task_to_v03(t.clone()), |t| task_to_v1(t).unwrap());
        assert_eq!(back, t);
        assert_eq!(json["kind"], "task");
        assert_eq!(json["status"]["timestamp"], "2025-10-28T12:30:00.000Z");
    }
    // Shared tasks are converted the same.
    let t = task(v1::TaskState::Completed);
    let shared = std::sync::Arc::new(t.clone());
    let _other = std::sync::Arc::clone(&shared);
    assert_eq!(shared_task_to_v03(shared), task_to_v03(t));
}

#[test]
fn status_updates_carry_final_exactly_when_the_stream_ends() {
    for state in STATES {
        let e = v1::TaskStatusUpdateEvent {
            generation: 0,
            task_id: "t".into(),
            context_id: "c".into(),
            status: Some(status(state)),
            metadata: meta(json!({"x": 1})),
        };
        let (back, json) = via_v03(status_update_to_v03(e.clone()), |e| {
            status_update_to_v1(e).unwrap()
        });
        assert_eq!(back, e);
        assert_eq!(json["kind"], "status-update");
        assert_eq!(json["final"], json!(state.ends_turn()), "{state:?}");
    }
}

#[test]
fn artifact_updates_round_trip() {
    for (append, last_chunk) in [(false, false), (true, false), (true, true), (false, true)] {
        let e = v1::TaskArtifactUpdateEvent {
            generation: 0,
            task_id: "t".into(),
            context_id: "c".into(),
            artifact: Some(artifact()),
            append,
            last_chunk,
            metadata: None,
        };
        let (back, json) = via_v03(artifact_update_to_v03(e.clone()), |e| {
            artifact_update_to_v1(e).unwrap()
        });
        assert_eq!(back, e);
        assert_eq!(json["kind"], "artifact-update");
    }
}

#[test]
fn stream_events_and_send_results_round_trip() {
    let events: Vec<v1::StreamResponse> = vec![
        task(v1::TaskState::Working).into(),
        message(v1::Role::Agent).into(),
        v1::TaskStatusUpdateEvent {
            generation: 0,
            task_id: "t".into(),
            context_id: "c".into(),
            status: Some(status(v1::TaskState::Completed)),
            metadata: None,
        }
        .into(),
        v1::TaskArtifactUpdateEvent {
            generation: 0,
            task_id: "t".into(),
            context_id: "c".into(),
            artifact: Some(artifact()),
            append: true,
            last_chunk: true,
            metadata: None,
        }
        .into(),
    ];
    for e in events {
        let (back, _) = via_v03(stream_event_to_v03(e.clone()).unwrap(), |e| {
            stream_event_to_v1(e).unwrap()
        });
        assert_eq!(back, e);
    }
    assert!(stream_event_to_v03(v1::StreamResponse::default()).is_none());
    for r in [
        v1::SendMessageResponse::from(task(v1::TaskState::Completed)),
        v1::SendMessageResponse::from(message(v1::Role::Agent)),
    ] {
        let (back, _) = via_v03(send_result_to_v03(r.clone()).unwrap(), |r| {
            send_result_to_v1(r).unwrap()
        });
        assert_eq!(back, r);
    }
}

#[test]
fn push_configs_round_trip() {
    let c = v1::TaskPushNotificationConfig {
        tenant: String::new(),
        id: "cfg".into(),
        task_id: "t".into(),
        url: "https://example.com/hook".into(),
        token: "tok".into(),
        authentication: Some(v1::AuthenticationInfo {
            scheme: "Bearer".into(),
            credentials: "secret".into(),
        }),
    };
    let (back, json) = via_v03(task_push_config_to_v03(c.clone()), task_push_config_to_v1);
    assert_eq!(back, c);
    assert_eq!(
        json,
        json!({"taskId": "t", "pushNotificationConfig": {
            "id": "cfg", "url": "https://example.com/hook", "token": "tok",
            "authentication": {"schemes": ["Bearer"], "credentials": "secret"}}})
    );
    let bare = v1::TaskPushNotificationConfig {
        task_id: "t".into(),
        url: "https://example.com/hook".into(),
        ..Default::default()
    };
    let (back, _) = via_v03(
        task_push_config_to_v03(bare.clone()),
        task_push_config_to_v1,
    );
    assert_eq!(back, bare);
}

#[test]
fn send_requests_round_trip() {
    for return_immediately in [false, true] {
        let r = v1::SendMessageRequest {
            tenant: String::new(),
            message: Some(message(v1::Role::User)),
            configuration: Some(v1::SendMessageConfiguration {
                if_generation_match: None,
                accepted_output_modes: vec!["text/plain".into()],
                task_push_notification_config: Some(v1::TaskPushNotificationConfig {
                    url: "https://example.com/hook".into(),
                    token: "t".into(),
                    ..Default::default()
                }),
                history_length: Some(3),
                return_immediately,
            }),
            metadata: meta(json!({"a": "b"})),
        };
        let (back, json) = via_v03(send_request_to_v03(r.clone()), |p| {
            send_params_to_v1(p).unwrap()
        });
        assert_eq!(back, r);
        assert_eq!(
            json["configuration"]["blocking"],
            json!(!return_immediately)
        );
    }
}

#[test]
fn request_params_follow_the_0_3_rules() {
    // Blocking is the default; `blocking: false` returns at once.
    let p: v03::MessageSendParams = serde_json::from_value(json!({
        "message": {"kind": "message", "messageId": "m", "role": "user",
                    "parts": [{"kind": "text", "text": "hi"}]},
    }))
    .unwrap();
    let r = send_params_to_v1(p).unwrap();
    assert!(r.configuration.is_none());
    let p: v03::MessageSendParams = serde_json::from_value(json!({
        "message": {"messageId": "m", "role": "user", "parts": [{"kind": "text", "text": "hi"}]},
        "configuration": {"blocking": false, "historyLength": 0, "acceptedOutputModes": ["text/plain"]},
    }))
    .unwrap();
    let r = send_params_to_v1(p).unwrap();
    let c = r.configuration.unwrap();
    assert!(c.return_immediately);
    // 0 means the whole history in 0.3.
    assert_eq!(c.history_length, None);
    let g = get_task_to_v1(serde_json::from_value(json!({"id": "t", "historyLength": 2})).unwrap());
    assert_eq!((g.id.as_str(), g.history_length), ("t", Some(2)));
    let g = get_task_to_v1(serde_json::from_value(json!({"id": "t", "historyLength": 0})).unwrap());
    assert_eq!(g.history_length, None);
    let c = cancel_to_v1(
        serde_json::from_value(json!({"id": "t", "metadata": {"why": "done"}})).unwrap(),
    );
    assert_eq!(c.id, "t");
    assert!(c.metadata.is_some());
    assert_eq!(
        subscribe_to_v1(serde_json::from_value(json!({"id": "t"})).unwrap()).id,
        "t"
    );
    // A wrong kind is refused.
    assert!(
        serde_json::from_value::<v03::Message>(json!({
            "kind": "task", "messageId": "m", "role": "user", "parts": []
        }))
        .is_err()
    );
}

/// 0.3 documents in the forms of the 0.3 specification's examples: read,
/// converted to 1.0 and back, and written, they are unchanged.
#[test]
fn spec_shaped_documents_survive_1_0_and_back() {
    let task = json!({
        "kind": "task",
        "id": "363422be-b0f9-4692-a24d-278670e7c7f1",
        "contextId": "c295ea44-7543-4f78-b524-7a38915ad6e4",
        "status": {"state": "completed", "timestamp": "2025-04-02T16:59:25.331844Z"},
        "artifacts": [{"artifactId": "9b6934dd-37e3-4eb1-8766-962efaab63a1", "name": "joke",
                       "parts": [{"kind": "text", "text": "Why did the chicken cross the road?"}]}],
        "history": [{"kind": "message", "role": "user", "messageId": "m1",
                     "parts": [{"kind": "text", "text": "tell me a joke"}],
                     "contextId": "c295ea44-7543-4f78-b524-7a38915ad6e4",
                     "taskId": "363422be-b0f9-4692-a24d-278670e7c7f1"}],
        "metadata": {}
    });
    let t: v03::Task = wire_round_trip(task.clone());
    let again = task_to_v03(task_to_v1(t).unwrap());
    assert_eq!(serde_json::to_value(again).unwrap(), task);

    let file_message = json!({
        "kind": "message", "role": "user", "messageId": "m2",
        "parts": [
            {"kind": "text", "text": "Analyze this image"},
            {"kind": "file", "file": {"name": "input.png", "mimeType": "image/png", "bytes": "iVBORw0KGgo="}},
            {"kind": "file", "file": {"name": "x.pdf", "mimeType": "application/pdf", "uri": "https://storage.example.com/x.pdf"}},
            {"kind": "data", "data": {"type": "object", "properties": {"a": {"type": "string"}}}, "metadata": {"mimeType": "application/json"}}
        ]
    });
    let m: v03::Message = wire_round_trip(file_message.clone());
    let again = message_to_v03(message_to_v1(m).unwrap());
    assert_eq!(serde_json::to_value(again).unwrap(), file_message);

    for event in [
        json!({"kind": "status-update", "taskId": "t", "contextId": "c",
               "status": {"state": "working", "timestamp": "2025-04-02T16:59:25.120Z"}, "final": false}),
        json!({"kind": "status-update", "taskId": "t", "contextId": "c",
               "status": {"state": "input-required"}, "final": true}),
        json!({"kind": "artifact-update", "taskId": "t", "contextId": "c", "append": true, "lastChunk": true,
               "artifact": {"artifactId": "a", "parts": [{"kind": "text", "text": "<section 2...>"}]}}),
    ] {
        let e: v03::StreamEvent = wire_round_trip(event.clone());
        let again = stream_event_to_v03(stream_event_to_v1(e).unwrap()).unwrap();
        assert_eq!(serde_json::to_value(again).unwrap(), event);
    }

    let push = json!({"taskId": "t", "pushNotificationConfig": {
        "url": "https://client.example.com/webhook/a2a-notifications",
        "token": "secure-client-token-for-task-aaa",
        "authentication": {"schemes": ["Bearer"]}}});
    let p: v03::TaskPushNotificationConfig = wire_round_trip(push.clone());
    let again = task_push_config_to_v03(task_push_config_to_v1(p));
    assert_eq!(serde_json::to_value(again).unwrap(), push);
}

#[test]
fn errors_have_the_0_3_form() {
    let e = agentwire_types::A2aError::task_not_found("t-9");
    let o = super::error_object(&e);
    assert_eq!(o["code"], -32001);
    assert_eq!(o["data"]["reason"], "TASK_NOT_FOUND");
    assert_eq!(o["data"]["taskId"], "t-9");
    assert!(o["message"].as_str().unwrap().contains("t-9"));
}

#[test]
fn the_card_carries_the_0_3_fields_beside_the_1_0_ones() {
    use agentwire_types::{AgentCard, AgentSkill, binding};
    let mut card = AgentCard::new("Echo", "Echoes", "1.0.0")
        .with_interface("http://127.0.0.1:9/", binding::JSONRPC)
        .with_interface("http://127.0.0.1:9", binding::HTTP_JSON)
        .with_interface("127.0.0.1:9", binding::GRPC)
        .with_skill(AgentSkill::new("echo", "Echo", "Repeats", ["echo"]));
    card.capabilities
        .get_or_insert_with(Default::default)
        .extended_agent_card = Some(true);
    let mut req = v1::SecurityRequirement::default();
    req.schemes.insert(
        "bearer".into(),
        v1::StringList {
            list: vec!["read".into()],
        },
    );
    card.security_requirements = vec![req.clone()];
    card.skills[0].security_requirements = vec![req];
    card.security_schemes.insert(
        "bearer".into(),
        v1::SecurityScheme {
            scheme: Some(v1::security_scheme::Scheme::HttpAuthSecurityScheme(
                v1::HttpAuthSecurityScheme {
                    scheme: "bearer".into(),
                    bearer_format: "JWT".into(),
                    description: String::new(),
                },
            )),
        },
    );
    card.security_schemes.insert(
        "key".into(),
        v1::SecurityScheme {
            scheme: Some(v1::security_scheme::Scheme::ApiKeySecurityScheme(
                v1::ApiKeySecurityScheme {
                    location: "header".into(),
                    name: "X-Key".into(),
                    description: String::new(),
                },
            )),
        },
    );
    let json = serde_json::to_vec(&card).unwrap();
    let doc: Value =
        serde_json::from_slice(&super::card::with_v03_fields(&card, &json, true)).unwrap();
    assert_eq!(doc["protocolVersion"], "0.3.0");
    assert_eq!(doc["url"], "http://127.0.0.1:9/");
    assert_eq!(doc["preferredTransport"], "JSONRPC");
    assert_eq!(
        doc["additionalInterfaces"],
        json!([{"url": "http://127.0.0.1:9/", "transport": "JSONRPC"},
               {"url": "http://127.0.0.1:9", "transport": "HTTP+JSON"},
               {"url": "127.0.0.1:9", "transport": "GRPC"}])
    );
    assert_eq!(doc["supportsAuthenticatedExtendedCard"], true);
    assert_eq!(doc["security"], json!([{"bearer": ["read"]}]));
    assert_eq!(doc["skills"][0]["security"], json!([{"bearer": ["read"]}]));
    let bearer = &doc["securitySchemes"]["bearer"];
    assert_eq!(bearer["type"], "http");
    assert_eq!(bearer["scheme"], "bearer");
    assert_eq!(bearer["bearerFormat"], "JWT");
    assert_eq!(bearer["httpAuthSecurityScheme"]["scheme"], "bearer");
    assert_eq!(doc["securitySchemes"]["key"]["in"], "header");
    assert_eq!(doc["securitySchemes"]["key"]["type"], "apiKey");
    // Still the 1.0 card: it reads back as the card it was.
    let back: AgentCard = serde_json::from_value(doc).unwrap();
    assert_eq!(back, card);
    // Without 0.3, the card as it is.
    assert_eq!(super::card::with_v03_fields(&card, &json, false), json);
}

// ----- the HTTP+JSON (ProtoJSON) form -----------------------------------------

/// 1.0 -> 0.3 (JSON-RPC form) -> 0.3 (ProtoJSON form) -> JSON -> back.
#[test]
fn the_protojson_form_round_trips() {
    use super::rest;
    // What the ProtoJSON form carries of a message: no part metadata, no
    // file names, no referenceTaskIds.
    let carried = |mut m: v1::Message| {
        m.reference_task_ids.clear();
        m.parts = vec![
            v1::Part::text("hello"),
            v1::Part::file(&b"\x00\x01"[..], "", "application/octet-stream"),
            v1::Part::url("https://example.com/f.pdf").with_media_type("application/pdf"),
            v1::Part::data(json!({"k": [1, 2]})),
        ];
        m
    };
    let m = carried(message(v1::Role::User));
    let p = rest::message_to(message_to_v03(m.clone()));
    let j = serde_json::to_value(&p).unwrap();
    assert_eq!(j["role"], "ROLE_USER");
    assert_eq!(j["content"][0], json!({"text": "hello"}));
    assert_eq!(j["content"][1]["file"]["fileWithBytes"], "AAE=");
    assert_eq!(
        j["content"][2]["file"]["fileWithUri"],
        "https://example.com/f.pdf"
    );
    assert_eq!(j["content"][3], json!({"data": {"data": {"k": [1, 2]}}}));
    let back: rest::Message = serde_json::from_value(j).unwrap();
    assert_eq!(message_to_v1(rest::message_from(back).unwrap()).unwrap(), m);

    for state in STATES {
        let mut t = task(state);
        t.history = vec![carried(message(v1::Role::User))];
        t.artifacts[0].parts = carried(message(v1::Role::Agent)).parts;
        t.artifacts.truncate(1);
        t.status.as_mut().unwrap().message = Some(Box::new(carried(message(v1::Role::Agent))));
        let p = rest::task_to(task_to_v03(t.clone()));
        let j = serde_json::to_value(&p).unwrap();
        if state == v1::TaskState::Canceled {
            assert_eq!(j["status"]["state"], "TASK_STATE_CANCELLED");
        }
        let back: rest::Task = serde_json::from_value(j).unwrap();
        assert_eq!(task_to_v1(rest::task_from(back).unwrap()).unwrap(), t);

        let e: v1::StreamResponse = v1::TaskStatusUpdateEvent {
            generation: 0,
            task_id: "t".into(),
            context_id: "c".into(),
            status: Some(v1::TaskStatus {
                state: state as i32,
                message: None,
                timestamp: Some(ts()),
            }),
            metadata: None,
        }
        .into();
        let p = rest::event_to(stream_event_to_v03(e.clone()).unwrap());
        let j = serde_json::to_value(&p).unwrap();
        assert_eq!(j["statusUpdate"].get("final").is_some(), state.ends_turn());
        let back: rest::StreamResponse = serde_json::from_value(j).unwrap();
        assert_eq!(
            stream_event_to_v1(rest::event_from(back).unwrap()).unwrap(),
            e
        );
    }
    let e: v1::StreamResponse = v1::TaskArtifactUpdateEvent {
        generation: 0,
        task_id: "t".into(),
        context_id: "c".into(),
        artifact: Some(v1::Artifact::text("a", "x").with_id("a-1")),
        append: true,
        last_chunk: false,
        metadata: None,
    }
    .into();
    let j = serde_json::to_value(rest::event_to(stream_event_to_v03(e.clone()).unwrap())).unwrap();
    assert_eq!(j["artifactUpdate"]["append"], true);
    let back: rest::StreamResponse = serde_json::from_value(j).unwrap();
    assert_eq!(
        stream_event_to_v1(rest::event_from(back).unwrap()).unwrap(),
        e
    );
    let e: v1::StreamResponse = carried(message(v1::Role::Agent)).into();
    let j = serde_json::to_value(rest::event_to(stream_event_to_v03(e.clone()).unwrap())).unwrap();
    assert!(j["message"].is_object(), "{j}");
    let back: rest::StreamResponse = serde_json::from_value(j).unwrap();
    assert_eq!(
        stream_event_to_v1(rest::event_from(back).unwrap()).unwrap(),
        e
    );

    // Push configs: named after the task and the config.
    let c = v1::TaskPushNotificationConfig {
        tenant: String::new(),
        id: "cfg".into(),
        task_id: "t".into(),
        url: "https://example.com/hook".into(),
        token: "tok".into(),
        authentication: Some(v1::AuthenticationInfo {
            scheme: "Bearer".into(),
            credentials: "c".into(),
        }),
    };
    let p = rest::task_push_to(task_push_config_to_v03(c.clone()));
    let j = serde_json::to_value(&p).unwrap();
    assert_eq!(j["name"], "tasks/t/pushNotificationConfigs/cfg");
    let mut back: rest::TaskPushConfig = serde_json::from_value(j).unwrap();
    back.push_notification_config.id.clear(); // the name says it
    assert_eq!(
        task_push_config_to_v1(rest::task_push_from("t".into(), back)),
        c
    );

    // Send requests, blocking or not.
    for return_immediately in [false, true] {
        let r = v1::SendMessageRequest {
            tenant: String::new(),
            message: Some(carried(message(v1::Role::User))),
            configuration: Some(v1::SendMessageConfiguration {
                if_generation_match: None,
                accepted_output_modes: vec!["text/plain".into()],
                task_push_notification_config: None,
                history_length: Some(2),
                return_immediately,
            }),
            metadata: meta(json!({"a": 1})),
        };
        let p = rest::send_to(send_request_to_v03(r.clone()));
        let j = serde_json::to_value(&p).unwrap();
        assert_eq!(
            j["configuration"].get("blocking").is_some(),
            !return_immediately
        );
        let back: rest::SendRequest = serde_json::from_value(j).unwrap();
        assert_eq!(
            send_params_to_v1(rest::send_from(back).unwrap()).unwrap(),
            r
        );
    }
    // Without a configuration: blocking.
    let p: rest::SendRequest = serde_json::from_value(json!({
        "message": {"messageId": "m", "role": "ROLE_USER", "content": [{"text": "x"}]}
    }))
    .unwrap();
    let r = send_params_to_v1(rest::send_from(p).unwrap()).unwrap();
    assert!(!r.configuration.is_some_and(|c| c.return_immediately));
}

#[test]
fn the_0_3_rest_routes() {
    use super::rest::{Route, route};
    use http::Method;
    let r = |m: Method, p: &str| route(&m, p);
    assert_eq!(r(Method::POST, "/v1/message:send"), Some(Ok(Route::Send)));
    assert_eq!(
        r(Method::POST, "/v1/message:stream"),
        Some(Ok(Route::Stream))
    );
    assert_eq!(
        r(Method::GET, "/v1/tasks/a%3Ab"),
        Some(Ok(Route::Get("a:b".into())))
    );
    assert_eq!(
        r(Method::POST, "/v1/tasks/x:cancel"),
        Some(Ok(Route::Cancel("x".into())))
    );
    assert_eq!(
        r(Method::GET, "/v1/tasks/x:subscribe"),
        Some(Ok(Route::Subscribe("x".into())))
    );
    assert_eq!(
        r(Method::POST, "/v1/tasks/x:subscribe"),
        Some(Ok(Route::Subscribe("x".into())))
    );
    assert_eq!(
        r(Method::POST, "/v1/tasks/x/pushNotificationConfigs"),
        Some(Ok(Route::CreatePush("x".into())))
    );
    assert_eq!(
        r(Method::GET, "/v1/tasks/x/pushNotificationConfigs"),
        Some(Ok(Route::ListPush("x".into())))
    );
    assert_eq!(
        r(Method::GET, "/v1/tasks/x/pushNotificationConfigs/c"),
        Some(Ok(Route::GetPush("x".into(), "c".into())))
    );
    assert_eq!(
        r(Method::DELETE, "/v1/tasks/x/pushNotificationConfigs/c"),
        Some(Ok(Route::DeletePush("x".into(), "c".into())))
    );
    assert_eq!(r(Method::GET, "/v1/card"), Some(Ok(Route::Card)));
    assert_eq!(r(Method::GET, "/v1/message:send"), Some(Err(())));
    assert_eq!(r(Method::GET, "/v1/tasks"), None);
    assert_eq!(r(Method::GET, "/message:send"), None);
    assert_eq!(r(Method::GET, "/v1/other/thing"), None);
}

#[test]
fn a_push_config_create_body_is_read_in_both_client_forms() {
    use super::rest::create_push_body;
    // The config alone (the 0.3 protobuf's HTTP rule `body: "config"`;
    // the JavaScript SDK 0.3 client sends this).
    let alone = json!({
        "name": "tasks/t-1/pushNotificationConfigs/cfg-1",
        "pushNotificationConfig": {"id": "cfg-1", "url": "https://hooks.example.com/a", "token": "tok"}
    });
    // The whole request (the Python SDK 0.3 client sends this).
    let whole = json!({"parent": "tasks/t-1", "configId": "cfg-1", "config": alone.clone()});
    for body in [alone, whole] {
        let req =
            create_push_body(body.to_string().as_bytes()).unwrap_or_else(|e| panic!("{e}: {body}"));
        let config = req
            .config
            .unwrap_or_else(|| panic!("no config read from {body}"));
        assert_eq!(
            config.push_notification_config.url, "https://hooks.example.com/a",
            "{body}"
        );
        assert_eq!(config.push_notification_config.id, "cfg-1", "{body}");
        assert_eq!(config.push_notification_config.token, "tok", "{body}");
    }
    // Neither form: nothing to register, refused later for its missing URL.
    let req = create_push_body(br#"{"parent": "tasks/t-1"}"#).unwrap();
    assert!(req.config.is_none());
}
