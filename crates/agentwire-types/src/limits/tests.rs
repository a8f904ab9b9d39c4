use super::*;
use crate::wkt::ListValue;
use crate::{
    ListTasksResponse, Role, SendMessageResponse, StreamResponse, TaskArtifactUpdateEvent,
    TaskState, TaskStatus, TaskStatusUpdateEvent,
};
use prost::Message as _;

/// `depth` objects nested in one another, the innermost with a number:
/// `{"a":{"a":...{"a":1}}}` (the most protobuf levels for its depth).
pub(crate) fn deep_struct(depth: usize) -> Struct {
    let mut s = Struct {
        fields: [("a".to_owned(), num(1.0))].into(),
    };
    for _ in 1..depth {
        s = Struct {
            fields: [("a".to_owned(), obj(s))].into(),
        };
    }
    s
}

/// `depth` arrays nested in one another around a number.
fn deep_list(depth: usize) -> Value {
    let mut v = num(1.0);
    for _ in 0..depth {
        v = Value {
            kind: Some(Kind::ListValue(ListValue { values: vec![v] })),
        };
    }
    v
}

fn num(n: f64) -> Value {
    Value {
        kind: Some(Kind::NumberValue(n)),
    }
}

fn obj(s: Struct) -> Value {
    Value {
        kind: Some(Kind::StructValue(s)),
    }
}

fn json_object(depth: usize) -> String {
    format!("{}1{}", "{\"a\":".repeat(depth), "}".repeat(depth))
}

#[test]
fn json_nesting_is_refused_past_the_limit_while_read() {
    let at = json_object(MAX_STRUCT_DEPTH);
    let s: Struct = serde_json::from_str(&at).unwrap();
    assert_eq!(s, deep_struct(MAX_STRUCT_DEPTH));
    let over = json_object(MAX_STRUCT_DEPTH + 1);
    let e = serde_json::from_str::<Struct>(&over)
        .unwrap_err()
        .to_string();
    assert!(e.contains("nest more than 30 levels"), "{e}");
    // A value (a data part) counts its own object or array.
    assert!(serde_json::from_str::<Value>(&at).is_ok());
    assert!(serde_json::from_str::<Value>(&over).is_err());
    let arrays = |n| format!("{}1{}", "[".repeat(n), "]".repeat(n));
    assert!(serde_json::from_str::<Value>(&arrays(MAX_STRUCT_DEPTH)).is_ok());
    assert!(serde_json::from_str::<Value>(&arrays(MAX_STRUCT_DEPTH + 1)).is_err());
    let mixed = format!("{{\"a\":[{}]}}", json_object(MAX_STRUCT_DEPTH - 1));
    assert!(serde_json::from_str::<Struct>(&mixed).is_err());
    // In a message (the generated readers use these), at any place.
    let m = format!(r#"{{"parts":[{{"metadata":{over}}}]}}"#);
    assert!(serde_json::from_str::<Message>(&m).is_err());
    let m = format!(r#"{{"parts":[{{"data":{over}}}]}}"#);
    assert!(serde_json::from_str::<Message>(&m).is_err());
    // 120 levels, under serde_json's own limit of 128: refused by ours.
    let e = serde_json::from_str::<Message>(&format!(r#"{{"metadata":{}}}"#, json_object(120)))
        .unwrap_err()
        .to_string();
    assert!(e.contains("nest more than"), "{e}");
}

#[test]
fn counts_apply_only_while_a_request_is_read() {
    let limits = ReadLimits {
        max_parts: 2,
        max_struct_values: 5,
        max_list_items: 2,
    };
    let read = |text: &str| reading(&limits, || serde_json::from_str::<Message>(text));
    // Values: members and items at every level, a data part's value.
    assert!(read(r#"{"metadata":{"a":[1,2,3],"b":0}}"#).is_ok());
    let e = read(r#"{"metadata":{"a":[1,2,3,4],"b":0}}"#).unwrap_err();
    assert!(e.to_string().contains("at most 5 values"), "{e}");
    assert!(read(r#"{"metadata":{"a":1},"parts":[{"data":{"b":[1,2]}}]}"#).is_ok());
    assert!(read(r#"{"metadata":{"a":1},"parts":[{"data":{"b":[1,2,3]}}]}"#).is_err());
    // Parts and lists.
    assert!(read(r#"{"parts":[{},{}],"extensions":["a","b"]}"#).is_ok());
    let e = read(r#"{"parts":[{},{},{}]}"#).unwrap_err();
    assert!(e.to_string().contains("at most 2 parts"), "{e}");
    assert!(read(r#"{"referenceTaskIds":["a","b","c"]}"#).is_err());
    assert!(read(r#"{"extensions":["a","b","c"]}"#).is_err());
    let e = reading(&limits, || {
        serde_json::from_str::<crate::SendMessageRequest>(
            r#"{"configuration":{"acceptedOutputModes":["a","b","c"]}}"#,
        )
    })
    .unwrap_err();
    assert!(e.to_string().contains("at most 2 items"), "{e}");
    // Each read has its own budget; outside of one, no count.
    assert!(read(r#"{"metadata":{"a":[1,2,3],"b":0}}"#).is_ok());
    assert!(serde_json::from_str::<Message>(r#"{"parts":[{},{},{}]}"#).is_ok());
    // `null` is still refused for a list, as serde's own reader does.
    assert!(read(r#"{"parts":null}"#).is_err());
}

/// A JSON read refused for a limit names where it stopped; serde_json's
/// own recursion limit is answered as the nesting limit; other errors are
/// not limit errors.
#[test]
fn json_read_errors_of_the_limits_name_the_field() {
    let limits = ReadLimits {
        max_parts: 2,
        max_struct_values: 5,
        max_list_items: 2,
    };
    let refused = |text: &str| {
        let e = reading(&limits, || {
            serde_json::from_str::<crate::SendMessageRequest>(text)
        })
        .unwrap_err();
        json_limit_error(text.as_bytes(), &e).unwrap_or_else(|| panic!("not a limit: {e}"))
    };
    let e = refused(r#"{"message":{"parts":[{},{},{"text":"x"},{}]}}"#);
    assert_eq!(e.field, "message.parts");
    let e = refused(r#"{"message":{"parts":[{},{},{"text":"x"}]}}"#);
    assert_eq!(e.field, "message.parts");
    assert_eq!(e.description, "a message may have at most 2 parts");
    let e = refused("{\n \"message\": {\"extensions\": [\"a\",\n\"b\", \"c\"]}}");
    assert_eq!(e.field, "message.extensions");
    let e = refused(r#"{"message":{"metadata":{"a":[1,2,3],"b":{"c":1,"d":2}}}}"#);
    assert_eq!(e.field, "message.metadata.b.c");
    assert!(e.description.contains("at most 5 values"), "{e}");
    let deep = format!(
        r#"{{"metadata":{{"k":1}},"message":{{"metadata":{}1{}}}}}"#,
        r#"{"a":"#.repeat(MAX_STRUCT_DEPTH + 5),
        "}".repeat(MAX_STRUCT_DEPTH + 5)
    );
    let e = reading(&ReadLimits::default(), || {
        serde_json::from_str::<crate::SendMessageRequest>(&deep)
    })
    .unwrap_err();
    let e = json_limit_error(deep.as_bytes(), &e).expect("a limit");
    assert_eq!(e.description, depth_message());
    let want = format!("message.metadata{}", ".a".repeat(MAX_STRUCT_DEPTH));
    assert_eq!(e.field, want);
    // serde_json's limit (128 levels), met before ours by a reader that
    // buffers (serde's untagged and internally tagged enums do).
    let text = format!(
        r#"{{"data":{{"x":{}{}}}}}"#,
        "[".repeat(200),
        "]".repeat(200)
    );
    let e = serde_json::from_str::<serde_json::Value>(&text).unwrap_err();
    let limit = json_limit_error(text.as_bytes(), &e).expect("a limit");
    assert_eq!(limit.description, depth_message());
    assert!(limit.field.starts_with("data.x[0][0]"), "{limit}");
    // Not a limit.
    let text = r#"{"message":{"parts":[{"text":1}]}}"#;
    let e = serde_json::from_str::<crate::SendMessageRequest>(text).unwrap_err();
    assert_eq!(json_limit_error(text.as_bytes(), &e), None);
}

#[test]
fn content_check_names_the_field() {
    let mut m = Message::user_text("hi");
    m.parts.push(Part::data(serde_json::json!({"x": 1})));
    m.parts[1].metadata = Some(deep_struct(MAX_STRUCT_DEPTH));
    m.metadata = Some(deep_struct(MAX_STRUCT_DEPTH));
    ContentCheck::nesting().message(&m, "message").unwrap();
    ContentCheck::request(&ReadLimits::default())
        .message(&m, "message")
        .unwrap();
    m.parts[1].metadata = Some(deep_struct(MAX_STRUCT_DEPTH + 1));
    let e = ContentCheck::nesting().message(&m, "message").unwrap_err();
    assert_eq!(e.field, "message.parts[1].metadata");
    assert!(e.description.contains("30 levels"), "{e}");
    m.parts[1].metadata = None;
    m.parts[1].content = Some(crate::part::Content::Data(obj(deep_struct(
        MAX_STRUCT_DEPTH + 1,
    ))));
    let e = ContentCheck::nesting().message(&m, "message").unwrap_err();
    assert_eq!(e.field, "message.parts[1].data");
    m.parts[1].content = Some(crate::part::Content::Data(deep_list(MAX_STRUCT_DEPTH + 1)));
    assert!(ContentCheck::nesting().message(&m, "message").is_err());
    m.parts[1].content = Some(crate::part::Content::Data(deep_list(MAX_STRUCT_DEPTH)));
    ContentCheck::nesting().message(&m, "message").unwrap();
    // A very deep one is walked only as far as the limit (no deep
    // recursion); it is built here without recursion and left to leak,
    // as dropping it would recurse.
    let mut v = num(0.0);
    for _ in 0..100_000 {
        v = Value {
            kind: Some(Kind::ListValue(ListValue { values: vec![v] })),
        };
    }
    let very_deep = std::mem::ManuallyDrop::new(v);
    assert!(
        ContentCheck::nesting()
            .value(Some(&very_deep), "data")
            .is_err()
    );
    // Values and lists of a request.
    let limits = ReadLimits {
        max_struct_values: 3,
        max_list_items: 1,
        ..ReadLimits::default()
    };
    let mut m = Message::user_text("hi");
    m.metadata = Some(crate::json::to_struct(
        serde_json::json!({"a": [1, 2], "b": 3})
            .as_object()
            .cloned()
            .unwrap_or_default(),
    ));
    let e = ContentCheck::request(&limits)
        .message(&m, "message")
        .unwrap_err();
    assert_eq!(e.field, "message.metadata");
    assert!(e.description.contains("at most 3 values"), "{e}");
    let mut m = Message::user_text("hi");
    m.extensions = vec!["a".into(), "b".into()];
    let e = ContentCheck::request(&limits)
        .message(&m, "message")
        .unwrap_err();
    assert_eq!(e.field, "message.extensions");
    ContentCheck::nesting().message(&m, "message").unwrap();
}

/// A task with content of `depth` in every place a `Struct` or a `Value`
/// can be: its metadata, its status message's, its history's and its
/// artifacts' (metadata, part metadata, data parts).
fn task_with_depth(depth: usize) -> Task {
    let message = |role| {
        let mut m = Message::new(role, vec![Part::text("x"), Part::text("y")]);
        m.metadata = Some(deep_struct(depth));
        m.parts[0].metadata = Some(deep_struct(depth));
        m.parts[1].content = Some(crate::part::Content::Data(obj(deep_struct(depth))));
        m
    };
    let mut artifact = Artifact::text("a", "x");
    artifact.metadata = Some(deep_struct(depth));
    artifact.parts[0].metadata = Some(deep_struct(depth));
    artifact.parts.push(Part {
        content: Some(crate::part::Content::Data(obj(deep_struct(depth)))),
        ..Part::default()
    });
    let mut status = TaskStatus::new(TaskState::Working);
    status.message = Some(Box::new(message(Role::Agent)));
    Task {
        generation: 0,
        id: "t".into(),
        context_id: "c".into(),
        status: Some(status),
        artifacts: vec![artifact],
        history: vec![message(Role::User), message(Role::Agent)],
        metadata: Some(deep_struct(depth)),
    }
}

/// Encodes `m` and decodes it back; whether it came back equal.
fn round_trips<M: prost::Message + Default + PartialEq>(m: &M) -> bool {
    M::decode(m.encode_to_vec().as_slice()).is_ok_and(|back| back == *m)
}

/// Every message that carries a task or its content, as stores keep them
/// and bindings send them.
fn containers_round_trip(task: &Task) -> Vec<(&'static str, bool)> {
    let status = task.status.clone().unwrap_or_default();
    let artifact = task.artifacts[0].clone();
    let mut update = TaskStatusUpdateEvent::new("t", "c", status.clone());
    update.metadata = task.metadata.clone();
    let artifact_update = TaskArtifactUpdateEvent {
        generation: 0,
        task_id: "t".into(),
        context_id: "c".into(),
        artifact: Some(artifact),
        append: false,
        last_chunk: true,
        metadata: task.metadata.clone(),
    };
    vec![
        ("Task", round_trips(task)),
        (
            "ListTasksResponse",
            round_trips(&ListTasksResponse {
                tasks: vec![task.clone()],
                ..Default::default()
            }),
        ),
        (
            "StreamResponse(task)",
            round_trips(&StreamResponse::from(task.clone())),
        ),
        (
            "StreamResponse(status)",
            round_trips(&StreamResponse::from(update)),
        ),
        (
            "StreamResponse(artifact)",
            round_trips(&StreamResponse::from(artifact_update.clone())),
        ),
        ("TaskArtifactUpdateEvent", round_trips(&artifact_update)),
        (
            "SendMessageResponse",
            round_trips(&SendMessageResponse {
                payload: Some(crate::send_message_response::Payload::Task(task.clone())),
            }),
        ),
    ]
}

#[test]
fn the_deepest_content_allowed_decodes_where_it_sits_deepest() {
    // Every place, every container: limit-deep content round-trips.
    let task = task_with_depth(MAX_STRUCT_DEPTH);
    ContentCheck::nesting().task(&task).unwrap();
    for (container, ok) in containers_round_trip(&task) {
        assert!(
            ok,
            "{container} with content {MAX_STRUCT_DEPTH} levels deep"
        );
    }
    // The margin: one level more still fits, two do not (prost's
    // recursion limit of 100), as the constant's documentation says.
    let over = task_with_depth(MAX_STRUCT_DEPTH + 1);
    assert!(ContentCheck::nesting().task(&over).is_err());
    assert!(containers_round_trip(&over).iter().all(|(_, ok)| *ok));
    let results = containers_round_trip(&task_with_depth(MAX_STRUCT_DEPTH + 2));
    assert!(results.iter().any(|(_, ok)| !ok), "{results:?}");
    // JSON too (the depth is read back).
    let json = serde_json::to_string(&task).unwrap();
    assert_eq!(serde_json::from_str::<Task>(&json).unwrap(), task);
}

#[cfg(all(feature = "v0_3", feature = "grpc"))]
#[test]
fn the_deepest_content_allowed_decodes_in_the_0_3_messages() {
    use crate::v0_3::grpc::proto as v03;
    let depth = MAX_STRUCT_DEPTH;
    let part = v03::Part {
        part: Some(v03::part::Part::Data(v03::DataPart {
            data: Some(deep_struct(depth)),
        })),
        metadata: Some(deep_struct(depth)),
    };
    let message = v03::Message {
        content: vec![part.clone()],
        metadata: Some(deep_struct(depth)),
        ..Default::default()
    };
    let task = v03::Task {
        id: "t".into(),
        status: Some(v03::TaskStatus {
            update: Some(message.clone()),
            ..Default::default()
        }),
        artifacts: vec![v03::Artifact {
            parts: vec![part],
            metadata: Some(deep_struct(depth)),
            ..Default::default()
        }],
        history: vec![message],
        metadata: Some(deep_struct(depth)),
        ..Default::default()
    };
    assert!(round_trips(&task));
    assert!(round_trips(&v03::StreamResponse {
        payload: Some(v03::stream_response::Payload::Task(task.clone())),
    }));
    assert!(round_trips(&v03::SendMessageResponse {
        payload: Some(v03::send_message_response::Payload::Task(task)),
    }));
}

#[test]
fn an_agent_card_is_read_with_the_limit() {
    let card = |depth| {
        format!(
            r#"{{"name":"a","capabilities":{{"extensions":[{{"uri":"u","params":{}}}]}}}}"#,
            json_object(depth)
        )
    };
    let ok: AgentCard = serde_json::from_str(&card(MAX_STRUCT_DEPTH)).unwrap();
    ContentCheck::nesting().card(&ok).unwrap();
    assert!(serde_json::from_str::<AgentCard>(&card(MAX_STRUCT_DEPTH + 1)).is_err());
    let mut deep = ok;
    if let Some(caps) = deep.capabilities.as_mut() {
        caps.extensions[0].params = Some(deep_struct(MAX_STRUCT_DEPTH + 1));
    }
    let e = ContentCheck::nesting().card(&deep).unwrap_err();
    assert_eq!(e.field, "capabilities.extensions[0].params");
}

#[cfg(feature = "grpc")]
mod wire_walk {
    use super::*;
    use crate::{CancelTaskRequest, SendMessageConfiguration, SendMessageRequest};

    fn check(req: &SendMessageRequest, limits: &ReadLimits) -> Result<(), LimitError> {
        wire::check::<SendMessageRequest>(&req.encode_to_vec(), limits)
    }

    fn request(m: Message) -> SendMessageRequest {
        SendMessageRequest {
            message: Some(m),
            ..Default::default()
        }
    }

    #[test]
    fn counts_and_nesting_before_decoding() {
        let limits = ReadLimits {
            max_parts: 3,
            max_struct_values: 6,
            max_list_items: 2,
        };
        let mut m = Message::user_text("a");
        m.parts.extend([Part::text("b"), Part::text("c")]);
        check(&request(m.clone()), &limits).unwrap();
        m.parts.push(Part::text("d"));
        let e = check(&request(m), &limits).unwrap_err();
        assert_eq!(e.field, "message.parts");
        assert!(e.description.contains("at most 3 parts"), "{e}");

        let mut m = Message::user_text("a");
        m.extensions = vec!["x".into(), "y".into(), "z".into()];
        assert_eq!(
            check(&request(m), &limits).unwrap_err().field,
            "message.extensions"
        );
        let mut m = Message::user_text("a");
        m.reference_task_ids = vec!["x".into(), "y".into(), "z".into()];
        assert_eq!(
            check(&request(m), &limits).unwrap_err().field,
            "message.referenceTaskIds"
        );
        let req = SendMessageRequest {
            configuration: Some(SendMessageConfiguration {
                accepted_output_modes: vec!["x".into(), "y".into(), "z".into()],
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(
            check(&req, &limits).unwrap_err().field,
            "configuration.acceptedOutputModes"
        );

        // Nesting, anywhere.
        let generous = ReadLimits::default();
        let mut m = Message::user_text("a");
        m.metadata = Some(deep_struct(MAX_STRUCT_DEPTH));
        m.parts[0].metadata = Some(deep_struct(MAX_STRUCT_DEPTH));
        m.parts.push(Part {
            content: Some(crate::part::Content::Data(deep_list(MAX_STRUCT_DEPTH))),
            ..Part::default()
        });
        let mut req = request(m.clone());
        req.metadata = Some(deep_struct(MAX_STRUCT_DEPTH));
        check(&req, &generous).unwrap();
        let mut deeper = m.clone();
        deeper.parts[1].content = Some(crate::part::Content::Data(obj(deep_struct(
            MAX_STRUCT_DEPTH + 1,
        ))));
        let e = check(&request(deeper), &generous).unwrap_err();
        assert_eq!(e.field, "message.parts[1].data");
        assert!(e.description.contains("30 levels"), "{e}");
        let mut deeper = m.clone();
        deeper.parts[0].metadata = Some(deep_struct(MAX_STRUCT_DEPTH + 1));
        assert_eq!(
            check(&request(deeper), &generous).unwrap_err().field,
            "message.parts[0].metadata"
        );
        req.metadata = Some(deep_struct(MAX_STRUCT_DEPTH + 1));
        assert_eq!(check(&req, &generous).unwrap_err().field, "metadata");
        let cancel = CancelTaskRequest {
            metadata: Some(deep_struct(MAX_STRUCT_DEPTH + 1)),
            ..Default::default()
        };
        let e = wire::check::<CancelTaskRequest>(&cancel.encode_to_vec(), &generous);
        assert_eq!(e.unwrap_err().field, "metadata");

        // Values in all: 4 in the metadata, 3 in a data part.
        let mut m = Message::user_text("a");
        m.metadata = Some(crate::json::to_struct(
            serde_json::json!({"a": [1, 2], "b": 3})
                .as_object()
                .cloned()
                .unwrap_or_default(),
        ));
        check(&request(m.clone()), &limits).unwrap();
        m.parts.push(Part::data(serde_json::json!([1, 2])));
        let e = check(&request(m), &limits).unwrap_err();
        // (Encoded in field order: the parts, then the metadata, where the
        // budget runs out.)
        assert_eq!(e.field, "message.metadata");
        assert!(e.description.contains("at most 6 values"), "{e}");
    }

    #[test]
    fn what_is_not_protobuf_is_left_to_the_decoder() {
        let limits = ReadLimits::default();
        for bytes in [
            &b"\xff"[..],
            b"\x12\x05ab",
            b"\x12\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x01",
            b"\x13\x14",
            b"",
        ] {
            assert!(wire::check::<SendMessageRequest>(bytes, &limits).is_ok());
        }
        // Other requests are not walked.
        assert!(wire::check::<crate::GetTaskRequest>(b"\xff", &limits).is_ok());
    }
}

/// Answers (what a client reads): the nesting of every task, message and
/// update they carry, named by its place in the answer.
#[test]
fn answers_are_checked_for_nesting_naming_the_field() {
    let deep = || Some(deep_struct(MAX_STRUCT_DEPTH + 1));
    let ok = || Some(deep_struct(MAX_STRUCT_DEPTH));
    let mut task = Task {
        id: "t".into(),
        status: Some(TaskStatus::default()),
        ..Default::default()
    };
    task.metadata = ok();
    let check = |r: &StreamResponse| ContentCheck::nesting().stream_response(r);
    check(&StreamResponse::from(task.clone())).unwrap();
    let mut m = Message::user_text("hi");
    m.metadata = deep();
    let mut update = TaskStatusUpdateEvent::new("t", "c", TaskStatus::default());
    update.status.as_mut().unwrap().message = Some(Box::new(m.clone()));
    let e = check(&StreamResponse::from(update.clone())).unwrap_err();
    assert_eq!(e.field, "statusUpdate.status.message.metadata");
    update.status = Some(TaskStatus::default());
    update.metadata = deep();
    let e = check(&StreamResponse::from(update)).unwrap_err();
    assert_eq!(e.field, "statusUpdate.metadata");
    let artifact = Artifact {
        metadata: deep(),
        ..Default::default()
    };
    let artifact_update = TaskArtifactUpdateEvent {
        artifact: Some(artifact),
        ..Default::default()
    };
    let e = check(&StreamResponse::from(artifact_update)).unwrap_err();
    assert_eq!(e.field, "artifactUpdate.artifact.metadata");
    let e = ContentCheck::nesting()
        .send_response(&SendMessageResponse::from(m.clone()))
        .unwrap_err();
    assert_eq!(e.field, "message.metadata");
    task.history.push(m);
    let e = ContentCheck::nesting()
        .send_response(&SendMessageResponse::from(task.clone()))
        .unwrap_err();
    assert_eq!(e.field, "task.history[0].metadata");
    let page = ListTasksResponse {
        tasks: vec![Task::default(), task],
        ..Default::default()
    };
    let e = ContentCheck::nesting().task_list(&page).unwrap_err();
    assert_eq!(e.field, "tasks[1].history[0].metadata");
    assert_eq!(e.description, depth_message());
}

#[test]
fn identifiers_are_bounded_and_without_nul() {
    assert_eq!(id_problem(""), None);
    assert_eq!(id_problem(&"a".repeat(MAX_ID_BYTES)), None);
    let long = id_problem(&"a".repeat(MAX_ID_BYTES + 1)).expect("too long");
    assert!(
        long.contains("at most 512 bytes, this one has 513"),
        "{long}"
    );
    // Bytes, not characters: 256 two-byte characters fit, 257 do not.
    assert_eq!(id_problem(&"é".repeat(MAX_ID_BYTES / 2)), None);
    assert!(id_problem(&"é".repeat(MAX_ID_BYTES / 2 + 1)).is_some());
    let nul = id_problem("ctx\0x").expect("U+0000");
    assert!(nul.contains("U+0000"), "{nul}");
    assert_eq!(id_problem_within("abcd", 4), None);
    assert!(id_problem_within("abcde", 4).is_some());
}
