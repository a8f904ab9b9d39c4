//! Admission: whether a call may come in at all, checked before anything
//! else. The requested protocol version (`A2A-Version`), the caller
//! (authentication, giving the task owner), and the extensions the caller
//! asks for against those the card declares (a required one missing is an
//! error).

use agentwire_types::{A2aError, A2aResult, ErrorKind};
use http::{HeaderMap, HeaderName};

use super::*;
use crate::store::Owner;

/// What a binding knows about a call besides its request message: the
/// service parameters (HTTP headers or gRPC metadata, names lower-case).
#[derive(Debug, Clone, Default)]
pub struct CallContext {
    /// Service parameters: `A2A-Version`, `A2A-Extensions`,
    /// `Authorization`...
    pub headers: HeaderMap,
    /// The query string of an HTTP request (an API key may be there).
    pub query: Option<String>,
    /// The address the call came from, when known (repeated
    /// authentication failures from one address are throttled).
    pub peer: Option<std::net::SocketAddr>,
    /// The caller named by the verified client certificate of the
    /// connection (mutual TLS), when there is one.
    pub client_cert: Option<crate::auth::ClientCertificate>,
    /// The form of the push notifications of the configs this call
    /// registers: 1.0 unless the call came through the 0.3 compatibility
    /// layer, whose clients read the 0.3 form.
    pub push_format: crate::store::PushFormat,
}

impl CallContext {
    /// A call context from service parameters.
    pub fn new(headers: HeaderMap) -> Self {
        Self {
            headers,
            query: None,
            peer: None,
            client_cert: None,
            push_format: crate::store::PushFormat::V1,
        }
    }

    /// With the query string of the HTTP request.
    pub fn with_query(mut self, query: Option<String>) -> Self {
        self.query = query;
        self
    }

    /// With the peer's address.
    pub fn with_peer(mut self, peer: Option<std::net::SocketAddr>) -> Self {
        self.peer = peer;
        self
    }

    /// With the principal of the connection's client certificate.
    pub fn with_client_cert(mut self, cert: Option<crate::auth::ClientCertificate>) -> Self {
        self.client_cert = cert;
        self
    }

    /// What the authenticator sees of the call.
    pub(crate) fn auth_call(&self) -> crate::auth::AuthCall<'_> {
        crate::auth::AuthCall {
            headers: &self.headers,
            query: self.query.as_deref(),
            peer: self.peer,
            client_cert: self.client_cert.as_ref().map(|c| c.principal()),
        }
    }

    /// A context carrying `A2A-Version: 1.0` and nothing else (handy in
    /// tests and in-process calls).
    pub fn v1() -> Self {
        let mut headers = HeaderMap::new();
        headers.insert(
            A2A_VERSION.clone(),
            http::HeaderValue::from_static(agentwire_types::PROTOCOL_VERSION),
        );
        Self::new(headers)
    }

    pub(super) fn header(&self, name: &HeaderName) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// The `A2A-Version` service parameter (header names are lower-case).
/// Looked up by a ready name: a name given as text is parsed on every
/// lookup.
pub(crate) static A2A_VERSION: HeaderName = HeaderName::from_static("a2a-version");
/// The `A2A-Extensions` service parameter.
pub(crate) static A2A_EXTENSIONS: HeaderName = HeaderName::from_static("a2a-extensions");

/// Reduces a version to `Major.Minor` (`""` means 0.3, spec 3.6.2);
/// borrowed unless the minor is missing.
pub(super) fn major_minor(v: &str) -> std::borrow::Cow<'_, str> {
    let v = v.trim();
    if v.is_empty() {
        return agentwire_types::DEFAULT_REQUEST_VERSION.into();
    }
    match v.split_once('.') {
        None => format!("{v}.0").into(),
        Some((major, rest)) => {
            let minor = rest.split('.').next().unwrap_or_default();
            v[..major.len() + 1 + minor.len()].into()
        }
    }
}

/// The version a call asks for, as `Major.Minor` (none means 0.3). The
/// bindings read it to hand 0.3 requests to the compatibility layer
/// (`compat::v0_3`), which converts them and calls the handler as 1.0.
pub(crate) fn requested_version(ctx: &CallContext) -> std::borrow::Cow<'_, str> {
    major_minor(ctx.header(&A2A_VERSION).unwrap_or_default())
}

impl RequestHandler {
    /// Whether 0.3 clients are served (through the compatibility layer;
    /// see [`HandlerConfig::serve_v03`]).
    pub(crate) fn serves_v03(&self) -> bool {
        self.inner.config.serve_v03
    }

    /// `VersionNotSupportedError` for a requested version, naming the
    /// versions served (0.3 among them when it is: for the 0.3 requests of
    /// the bindings that serve both; a 1.0 method is served as 1.0 only,
    /// and its error names the 1.0 versions).
    pub(crate) fn version_not_supported(&self, requested: &str) -> A2aError {
        let mut supported: Vec<&str> = self
            .inner
            .config
            .versions
            .iter()
            .map(String::as_str)
            .collect();
        if self.serves_v03() {
            supported.insert(0, crate::compat::v0_3::V03);
        }
        A2aError::version_not_supported(requested, &supported)
    }

    /// Checks the version and authenticates: the preamble of every call.
    pub(super) async fn admit(&self, ctx: &CallContext, tenant: &str) -> A2aResult<Owner> {
        match self.admit_now(ctx, tenant) {
            Admitted::Now(r) => r,
            Admitted::Later(f) => f.await,
        }
    }

    /// [`Self::admit`], without waiting when the authenticator needs not.
    pub(super) fn admit_now<'a>(&'a self, ctx: &CallContext, tenant: &str) -> Admitted<'a> {
        if let Err(e) = self.check_version(ctx) {
            return Admitted::Now(Err(e));
        }
        if let Some(why) = agentwire_types::limits::id_problem(tenant) {
            return Admitted::Now(Err(A2aError::invalid_params("tenant", why)));
        }
        let owner = move |principal: Option<String>| {
            Ok(Owner {
                tenant: tenant.to_owned(),
                principal: usable_principal(principal)?,
            })
        };
        match self.inner.auth.check(ctx.auth_call()) {
            crate::auth::Verdict::Ready(r) => Admitted::Now(r.and_then(owner)),
            crate::auth::Verdict::Pending(f) => {
                let tenant = tenant.to_owned();
                Admitted::Later(Box::pin(async move {
                    let principal = usable_principal(f.await?)?;
                    Ok(Owner { tenant, principal })
                }))
            }
        }
    }

    fn check_version(&self, ctx: &CallContext) -> A2aResult<()> {
        let requested = ctx.header(&A2A_VERSION).unwrap_or_default();
        let mm = major_minor(requested);
        if !self.inner.config.versions.iter().any(|v| *v == mm) {
            let supported: Vec<&str> = self
                .inner
                .config
                .versions
                .iter()
                .map(String::as_str)
                .collect();
            let err = A2aError::version_not_supported(requested, &supported);
            // 0.3 (asked for, or meant by no version at all) is served
            // here, through its own methods and paths: saying that it is
            // not supported would be wrong. This is a 1.0 call without the
            // 1.0 version.
            if mm == crate::compat::v0_3::V03 && self.serves_v03() {
                let asked = if requested.trim().is_empty() {
                    "no A2A-Version, which means 0.3,".to_owned()
                } else {
                    format!("A2A-Version {requested} (0.3)")
                };
                return Err(A2aError {
                    message: format!(
                        "this is an A2A 1.0 call with {asked} which is served only with the \
                         0.3 methods and paths; send A2A-Version: {} with it",
                        supported.join(" or ")
                    ),
                    ..err
                });
            }
            return Err(err);
        }
        Ok(())
    }

    /// Extensions requested by the client, checked against the card: a
    /// required extension the client did not request is an error.
    pub(super) fn extensions(&self, ctx: &CallContext) -> A2aResult<Vec<String>> {
        let requested: Vec<String> = ctx
            .headers
            .get_all(&A2A_EXTENSIONS)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty())
            .collect();
        let declared = self
            .inner
            .card
            .capabilities
            .as_ref()
            .map(|c| c.extensions.as_slice())
            .unwrap_or_default();
        if let Some(missing) = declared
            .iter()
            .find(|e| e.required && !requested.contains(&e.uri))
        {
            return Err(A2aError::new(
                ErrorKind::ExtensionSupportRequired,
                format!(
                    "this agent requires the extension {}; list it in A2A-Extensions",
                    missing.uri
                ),
            )
            .with_metadata("extension", missing.uri.clone()));
        }
        Ok(requested
            .into_iter()
            .filter(|r| declared.iter().any(|d| d.uri == *r))
            .collect())
    }
}

/// The caller of a call: known at once, or once the authenticator has
/// what it needs (keys to fetch).
pub(super) enum Admitted<'a> {
    Now(A2aResult<Owner>),
    Later(futures::future::BoxFuture<'a, A2aResult<Owner>>),
}

/// A request being handled, counted in [`HandlerConfig::max_in_flight`]
/// until dropped.
pub(super) struct InFlight<'a>(&'a std::sync::atomic::AtomicUsize);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
    }
}

impl RequestHandler {
    /// Counts a request in, or refuses it when as many as
    /// [`HandlerConfig::max_in_flight`] are being handled: refused at once,
    /// so that a flood gets errors rather than a queue that grows.
    pub(super) fn begin(&self) -> A2aResult<InFlight<'_>> {
        use std::sync::atomic::Ordering;
        let count = &self.inner.in_flight;
        let max = self.inner.config.max_in_flight;
        if count.fetch_add(1, Ordering::AcqRel) >= max {
            count.fetch_sub(1, Ordering::AcqRel);
            self.inner
                .open_tasks
                .refused_in_flight
                .fetch_add(1, Ordering::Relaxed);
            return Err(A2aError::unavailable(format!(
                "the server is handling as many requests as it may at once ({max}): \
                 try again later"
            )));
        }
        Ok(InFlight(count))
    }
}

/// The name an authenticator gave, as a task owner's: a name a store
/// cannot keep (over [`agentwire_types::limits::MAX_PRINCIPAL_BYTES`], or
/// holding U+0000) is refused like failed credentials, the same for every
/// store.
fn usable_principal(principal: Option<String>) -> A2aResult<String> {
    let principal = principal.unwrap_or_default();
    match agentwire_types::limits::id_problem_within(
        &principal,
        agentwire_types::limits::MAX_PRINCIPAL_BYTES,
    ) {
        None => Ok(principal),
        Some(why) => Err(A2aError::new(
            ErrorKind::Unauthenticated,
            format!("the authenticated name cannot own tasks: {why}"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn major_minor_versions() {
        assert_eq!(major_minor(""), "0.3");
        assert_eq!(major_minor("1.0.2"), "1.0");
        assert_eq!(major_minor("1"), "1.0");
    }

    #[test]
    fn names_a_store_cannot_keep_do_not_own_tasks() {
        use agentwire_types::limits::MAX_PRINCIPAL_BYTES;
        assert_eq!(usable_principal(None).ok().as_deref(), Some(""));
        let fits = "a".repeat(MAX_PRINCIPAL_BYTES);
        assert_eq!(usable_principal(Some(fits.clone())).ok(), Some(fits));
        for name in ["a".repeat(MAX_PRINCIPAL_BYTES + 1), "jwt:x#a\0b".to_owned()] {
            let e = usable_principal(Some(name)).expect_err("refused");
            assert_eq!(e.kind, ErrorKind::Unauthenticated, "{e}");
        }
    }
}
