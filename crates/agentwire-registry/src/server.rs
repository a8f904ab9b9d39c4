//! Serving a registry: the ARD API, the catalog and the publishing API,
//! and the registry's own A2A agent (JSON-RPC at `POST /`, HTTP+JSON, its
//! card at `/.well-known/agent-card.json`), all on one port.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use agentwire_server::{Authenticator, NoAuth, RequestHandler, RouterOptions};
use agentwire_types::binding;

use crate::Registry;
use crate::agent::{FindAgent, card};
use crate::api::{ApiState, router};

/// A registry server, before it binds.
pub struct RegistryServer {
    registry: Registry,
    authenticator: Arc<dyn Authenticator>,
    public_url: Option<String>,
    background: bool,
}

impl RegistryServer {
    /// Serves `registry`. Nobody may publish until an authenticator is set.
    pub fn new(registry: Registry) -> Self {
        Self {
            registry,
            authenticator: Arc::new(agentwire_server::BearerTokens::new()),
            public_url: None,
            background: true,
        }
    }

    /// Who may publish (e.g. [`agentwire_server::BearerTokens`]; any
    /// [`Authenticator`] returning a principal works).
    pub fn authenticator(mut self, auth: Arc<dyn Authenticator>) -> Self {
        self.authenticator = auth;
        self
    }

    /// The base URL advertised (catalog, search results' `source`, own
    /// card), for a registry behind a proxy.
    pub fn public_url(mut self, url: impl Into<String>) -> Self {
        self.public_url = Some(url.into());
        self
    }

    /// Whether to run the refreshes and the store sync (default yes).
    pub fn background(mut self, on: bool) -> Self {
        self.background = on;
        self
    }

    /// Binds the address.
    pub async fn bind(
        self,
        addr: impl tokio::net::ToSocketAddrs,
    ) -> std::io::Result<BoundRegistry> {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        let local = listener.local_addr()?;
        let base = self
            .public_url
            .clone()
            .unwrap_or_else(|| format!("http://{local}"))
            .trim_end_matches('/')
            .to_owned();
        self.registry.set_base_url(&base);
        let agent_card = card(&self.registry.config().name)
            .with_interface(format!("{base}/"), binding::JSONRPC)
            .with_interface(base.clone(), binding::HTTP_JSON);
        let handler = RequestHandler::builder(
            agent_card,
            FindAgent {
                registry: self.registry.clone(),
            },
        )
        .authenticator(Arc::new(NoAuth))
        .build();
        let a2a = agentwire_server::router(
            handler,
            &RouterOptions {
                grpc: false,
                ..RouterOptions::default()
            },
        );
        let api = router(ApiState {
            registry: self.registry.clone(),
            authenticator: self.authenticator,
        });
        // Every answer points at the ARD manifest (ARD v0.91 5.1).
        let link = http::HeaderValue::from_str(&format!(
            "<{base}{}>; rel=\"{}\"",
            agentwire_client::registry::ARD_PATH,
            agentwire_client::registry::ARD_REL
        ))
        .ok();
        let app = api.merge(a2a).layer(axum::middleware::map_response(
            move |mut r: axum::response::Response| {
                let link = link.clone();
                async move {
                    if let Some(l) = link {
                        r.headers_mut().append(http::header::LINK, l);
                    }
                    r
                }
            },
        ));
        Ok(BoundRegistry {
            listener,
            app,
            registry: self.registry,
            local,
            background: self.background,
        })
    }
}

/// A registry server bound to its address.
pub struct BoundRegistry {
    listener: tokio::net::TcpListener,
    app: axum::Router,
    registry: Registry,
    local: SocketAddr,
    background: bool,
}

impl BoundRegistry {
    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// The registry.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// Serves until `shutdown` completes.
    pub async fn run_until(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        let _background = self.background.then(|| self.registry.spawn_background());
        axum::serve(self.listener, self.app)
            .with_graceful_shutdown(shutdown)
            .await
    }

    /// Serves in the background until the handle is dropped.
    pub fn spawn(self) -> RegistryHandle {
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let local = self.local;
        let registry = self.registry.clone();
        let task = tokio::spawn(self.run_until(async move {
            let _ = rx.await;
        }));
        RegistryHandle {
            local,
            registry,
            stop: Some(tx),
            task,
        }
    }
}

/// A registry served in the background.
pub struct RegistryHandle {
    local: SocketAddr,
    registry: Registry,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl RegistryHandle {
    /// `http://` and the address.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.local)
    }

    /// The registry.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// Stops it.
    pub async fn shutdown(mut self) -> std::io::Result<()> {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        (&mut self.task)
            .await
            .unwrap_or_else(|e| Err(std::io::Error::other(e)))
    }
}

impl Drop for RegistryHandle {
    fn drop(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        self.task.abort();
    }
}
