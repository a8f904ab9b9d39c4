//! The client's limit on an agent's answers, on each binding, against a
//! real server on loopback: a unary answer and a stream event larger than
//! `max_response_bytes` fail with `ClientError::ResponseTooLarge` (a gRPC
//! message too), and the same calls pass under the default limit.

use agentwire_agents::echo::{self, EchoAgent};
use agentwire_client::{Binding, Client, ClientError};
use agentwire_server::A2aServer;
use agentwire_types::Message;
use futures::StreamExt;

const LIMIT: usize = 64 * 1024;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_past_the_limit_are_refused_on_every_binding() {
    let server = A2aServer::new(echo::card(), EchoAgent)
        .bind("127.0.0.1:0")
        .await
        .expect("bind")
        .spawn();
    let base = server.base_url();
    // One word of 200 KB: echoed in the task (history, artifact) and as one
    // stream chunk.
    let big = "x".repeat(200 * 1024);
    for binding in [Binding::JsonRpc, Binding::HttpJson, Binding::Grpc] {
        let limited = Client::builder()
            .bindings([binding])
            .max_response_bytes(LIMIT)
            .connect(&base)
            .await
            .expect("connect");
        assert_eq!(limited.binding(), Some(binding));
        match limited.send_text(big.clone()).await {
            Err(ClientError::ResponseTooLarge { limit, .. }) => assert_eq!(limit, LIMIT),
            other => panic!("{binding}: unary answer past the limit: {other:?}"),
        }
        let mut events = limited
            .stream(Message::user_text(big.clone()))
            .await
            .expect("the stream opens");
        let mut refused = false;
        while let Some(ev) = events.next().await {
            if let Err(e) = ev {
                assert!(e.is_too_large(), "{binding}: {e:?}");
                refused = true;
                break;
            }
        }
        assert!(
            refused,
            "{binding}: a stream event past the limit was accepted"
        );

        // The default limit (64 MiB) lets the same answers through.
        let open = Client::builder()
            .bindings([binding])
            .connect(&base)
            .await
            .expect("connect");
        open.send_text(big.clone())
            .await
            .expect("under the default limit");
    }
}

#[tokio::test]
async fn a_card_past_the_limit_is_refused() {
    let server = A2aServer::new(echo::card(), EchoAgent)
        .bind("127.0.0.1:0")
        .await
        .expect("bind")
        .spawn();
    let resolver = agentwire_client::card::CardResolver::new().with_max_card_bytes(100);
    match resolver.resolve(&server.base_url()).await {
        Err(ClientError::ResponseTooLarge { what, limit, .. }) => {
            assert_eq!((what.as_str(), limit), ("the agent card", 100));
        }
        other => panic!("{other:?}"),
    }
}
