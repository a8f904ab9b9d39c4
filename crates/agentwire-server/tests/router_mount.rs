//! `router()` merges into an application's axum router that has routes and
//! a fallback of its own: the A2A paths are the agent's, the rest the
//! application's.

use agentwire_server::{
    A2aResult, AgentExecutor, RequestContext, RequestHandler, RouterOptions, TaskUpdater, router,
};
use agentwire_types::{AGENT_CARD_PATH, AgentCard, Artifact};
use axum::Router;
use axum::body::Body;
use axum::routing::get;
use http::{Method, Request, StatusCode};
use http_body_util::BodyExt;
use tower::ServiceExt;

struct Echo;

impl AgentExecutor for Echo {
    async fn execute(&self, ctx: RequestContext, task: TaskUpdater) -> A2aResult<()> {
        task.add_artifact(Artifact::text("echo", ctx.text()))
            .await?;
        task.complete().await
    }
}

fn app() -> Router {
    let handler = RequestHandler::builder(AgentCard::new("Echo", "echoes", "1.0.0"), Echo).build();
    Router::new()
        .route("/health", get(|| async { "ok" }))
        .merge(router(handler, &RouterOptions::default()))
        .fallback(|| async { (StatusCode::IM_A_TEAPOT, "the application's fallback") })
}

async fn call(method: Method, path: &str, body: &str) -> (StatusCode, String) {
    let request = Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", "application/json")
        .header("a2a-version", "1.0")
        .body(Body::from(body.to_owned()))
        .expect("a request");
    let response = app().oneshot(request).await.expect("an answer");
    let status = response.status();
    let bytes = response
        .into_body()
        .collect()
        .await
        .expect("a body")
        .to_bytes();
    (status, String::from_utf8_lossy(&bytes).into_owned())
}

#[tokio::test]
async fn the_router_mounts_beside_routes_and_a_fallback() {
    // The application's own route and fallback.
    assert_eq!(
        call(Method::GET, "/health", "").await,
        (StatusCode::OK, "ok".into())
    );
    let (status, body) = call(Method::GET, "/somewhere/else", "").await;
    assert_eq!(status, StatusCode::IM_A_TEAPOT);
    assert_eq!(body, "the application's fallback");

    // The agent's card, and its operations on every binding mounted.
    let (status, card) = call(Method::GET, AGENT_CARD_PATH, "").await;
    assert_eq!(status, StatusCode::OK);
    assert!(card.contains("\"Echo\""), "{card}");
    let send = r#"{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"hi"}]}}"#;
    let (status, answer) = call(Method::POST, "/message:send", send).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert!(answer.contains("TASK_STATE_COMPLETED"), "{answer}");
    let (status, answer) = call(Method::POST, "/acme/message:send", send).await;
    assert_eq!(status, StatusCode::OK, "with a tenant: {answer}");
    let (status, list) = call(Method::GET, "/tasks", "").await;
    assert_eq!(status, StatusCode::OK, "{list}");
    let rpc = r#"{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{}}"#;
    let (status, answer) = call(Method::POST, "/", rpc).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert!(answer.contains("\"result\""), "{answer}");

    // Under an A2A path, the REST binding answers with its own errors.
    let (status, answer) = call(Method::GET, "/tasks/nope", "").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{answer}");
    assert!(
        answer.contains("TaskNotFoundError") || answer.contains("not found"),
        "{answer}"
    );
    let (status, _) = call(Method::GET, "/message:send", "").await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
}

#[tokio::test]
async fn an_application_with_a_fallback_can_merge_the_router() {
    // axum refuses to merge two routers that both have a fallback.
    let handler = RequestHandler::builder(AgentCard::new("Echo", "echoes", "1.0.0"), Echo).build();
    let app = Router::new()
        .fallback(|| async { StatusCode::IM_A_TEAPOT })
        .merge(router(handler, &RouterOptions::default()));
    let request = Request::builder()
        .uri(AGENT_CARD_PATH)
        .body(Body::empty())
        .expect("a request");
    let response = app.oneshot(request).await.expect("an answer");
    assert_eq!(response.status(), StatusCode::OK);
}
