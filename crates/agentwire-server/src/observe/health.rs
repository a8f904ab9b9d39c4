//! Health: `GET /healthz` (the process answers), `GET /readyz` (the task
//! store answers, and in a cluster the replicas' event bus too), and over
//! gRPC the standard `grpc.health.v1.Health` service (tonic-health) with
//! server reflection (tonic-reflection), so `grpcurl list` and
//! `grpc_health_probe` work against the agent's port.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use http::{HeaderValue, StatusCode, header};
use tonic_health::ServingStatus;
use tonic_health::server::HealthReporter;

use crate::bindings::grpc_refusals::{Refusing, decodes};
use crate::bus::EventBus;
use crate::store::TaskStore;

/// The path of the liveness check.
pub const HEALTHZ_PATH: &str = "/healthz";
/// The path of the readiness check.
pub const READYZ_PATH: &str = "/readyz";

/// How long a readiness check waits for the store (and the bus).
const CHECK_TIMEOUT: Duration = Duration::from_secs(2);

/// The largest request message of the health and reflection services.
const SMALL_MESSAGE_BYTES: usize = 64 * 1024;

/// How often the gRPC health status is brought up to date.
const GRPC_HEALTH_PERIOD: Duration = Duration::from_secs(5);

/// What the readiness check asks.
#[derive(Clone)]
pub(crate) struct Readiness {
    pub(crate) store: Arc<dyn TaskStore>,
    pub(crate) bus: Option<Arc<dyn EventBus>>,
}

impl Readiness {
    /// Asks the store (and the bus) a question that touches their
    /// database: a task that does not exist. `Err` says which failed.
    pub(crate) async fn check(&self) -> Result<(), String> {
        let probe = "readiness-probe";
        match tokio::time::timeout(CHECK_TIMEOUT, self.store.get(probe, Some(0))).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => return Err(format!("the task store failed: {}", e.message)),
            Err(_) => {
                return Err(format!(
                    "the task store did not answer within {}s",
                    CHECK_TIMEOUT.as_secs()
                ));
            }
        }
        if let Some(bus) = &self.bus {
            match tokio::time::timeout(CHECK_TIMEOUT, bus.events_after(probe, 0, Some(0), 1)).await
            {
                Ok(Ok(_)) => {}
                Ok(Err(e)) => return Err(format!("the replicas' event bus failed: {}", e.message)),
                Err(_) => {
                    return Err(format!(
                        "the replicas' event bus did not answer within {}s",
                        CHECK_TIMEOUT.as_secs()
                    ));
                }
            }
        }
        Ok(())
    }
}

/// A small JSON answer.
fn json(status: StatusCode, body: serde_json::Value) -> Response {
    let mut response = (status, body.to_string()).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// Adds `/healthz` and `/readyz` to `router`.
pub(crate) fn http_routes<S>(router: Router<S>, readiness: Readiness) -> Router<S>
where
    S: Clone + Send + Sync + 'static,
{
    router
        .route(
            HEALTHZ_PATH,
            get(|| async { json(StatusCode::OK, serde_json::json!({"status": "ok"})) }),
        )
        .route(
            READYZ_PATH,
            get(move || {
                let readiness = readiness.clone();
                async move {
                    match readiness.check().await {
                        Ok(()) => json(StatusCode::OK, serde_json::json!({"status": "ready"})),
                        Err(why) => json(
                            StatusCode::SERVICE_UNAVAILABLE,
                            serde_json::json!({"status": "unavailable", "reason": why}),
                        ),
                    }
                }
            }),
        )
}

/// The gRPC service names whose health is reported: the server as a
/// whole (`""`) and the A2A service, and the A2A 0.3 service
/// (`a2a.v1.A2AService`) when 0.3 is served.
fn grpc_services(v03: bool) -> Vec<&'static str> {
    let mut names = vec!["", "lf.a2a.v1.A2AService"];
    if v03 {
        names.push(agentwire_types::v0_3::grpc::SERVICE_NAME);
    }
    names
}

/// Adds `grpc.health.v1.Health` and server reflection (v1 and v1alpha)
/// to `router`; the health status follows the readiness check, brought
/// up to date every few seconds by a task that ends with the server
/// (`stop`). With `v03` (0.3 is served) the 0.3 service is in both.
pub(crate) fn grpc_routes<S>(
    router: Router<S>,
    readiness: Readiness,
    stop: tokio_util::sync::CancellationToken,
    v03: bool,
) -> Router<S>
where
    S: Clone + Send + Sync + 'static,
{
    let (reporter, health) = tonic_health::server::health_reporter();
    tokio::spawn(follow_readiness(
        reporter,
        readiness,
        stop,
        grpc_services(v03),
    ));
    // Their requests are small: a service name, a symbol. One they cannot
    // read is refused as the A2A service refuses it (INVALID_ARGUMENT).
    let health = Refusing::new(
        health.max_decoding_message_size(SMALL_MESSAGE_BYTES),
        SMALL_MESSAGE_BYTES,
    );
    let mut router = router.route_service("/grpc.health.v1.Health/{method}", health);
    let reflection = || {
        let b = tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(agentwire_types::proto::FILE_DESCRIPTOR_SET)
            .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET);
        if v03 {
            b.register_encoded_file_descriptor_set(
                agentwire_types::v0_3::grpc::proto::FILE_DESCRIPTOR_SET,
            )
        } else {
            b
        }
    };
    match reflection().build_v1() {
        Ok(v1) => {
            let v1 = Refusing::checking(
                v1.max_decoding_message_size(SMALL_MESSAGE_BYTES),
                SMALL_MESSAGE_BYTES,
                decodes::<tonic_reflection::pb::v1::ServerReflectionRequest>,
            );
            router = router.route_service("/grpc.reflection.v1.ServerReflection/{method}", v1);
        }
        Err(e) => tracing::warn!(error = %e, "gRPC server reflection (v1) is not served"),
    }
    match reflection().build_v1alpha() {
        Ok(v1alpha) => {
            let v1alpha = Refusing::checking(
                v1alpha.max_decoding_message_size(SMALL_MESSAGE_BYTES),
                SMALL_MESSAGE_BYTES,
                decodes::<tonic_reflection::pb::v1alpha::ServerReflectionRequest>,
            );
            router = router.route_service(
                "/grpc.reflection.v1alpha.ServerReflection/{method}",
                v1alpha,
            );
        }
        Err(e) => tracing::warn!(error = %e, "gRPC server reflection (v1alpha) is not served"),
    }
    router
}

/// Keeps the gRPC health status equal to the readiness check's answer.
async fn follow_readiness(
    reporter: HealthReporter,
    readiness: Readiness,
    stop: tokio_util::sync::CancellationToken,
    services: Vec<&'static str>,
) {
    let mut tick = tokio::time::interval(GRPC_HEALTH_PERIOD);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            () = stop.cancelled() => {
                for &name in &services {
                    reporter.set_service_status(name, ServingStatus::NotServing).await;
                }
                return;
            }
        }
        let status = match readiness.check().await {
            Ok(()) => ServingStatus::Serving,
            Err(why) => {
                tracing::warn!(reason = %why, "not ready");
                ServingStatus::NotServing
            }
        };
        for &name in &services {
            reporter.set_service_status(name, status).await;
        }
    }
}
