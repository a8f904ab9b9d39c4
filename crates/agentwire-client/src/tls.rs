//! TLS settings of the client's connections: the certificate authorities
//! to trust for the agent's certificate, and a client certificate for
//! mutual TLS (spec 7: an agent may ask callers for a certificate), applied
//! alike to the HTTP client of JSON-RPC, HTTP+JSON and card fetches and to
//! the gRPC channel; and the classification of a failed TLS handshake
//! ([`tls_failure`]).
//!
//! A certificate given as trusted ([`TlsOptions::ca_pem`]) is an authority
//! whose certificates are accepted, and is also accepted as the agent's own
//! certificate when the agent presents exactly it, for its host name and
//! within its dates: the self-signed certificate of
//! `openssl req -x509 -subj /CN=localhost -addext subjectAltName=...`,
//! which OpenSSL marks as an authority, works as it does with curl's
//! `--cacert`.
//!
//! ```no_run
//! # fn demo() -> Result<(), agentwire_client::ClientError> {
//! use agentwire_client::{Client, tls::TlsOptions};
//! # let card = agentwire_client::agentwire_types::AgentCard::default();
//! let tls = TlsOptions::new()
//!     .ca_file("ca.pem")?
//!     .identity_files("client.pem", "client.key")?;
//! let client = Client::builder().tls(tls).build(card)?;
//! # Ok(()) }
//! ```

use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

use crate::error::ClientError;

mod verify;

/// The TLS settings of a client (see the module documentation).
///
/// Without any setting, certificates are checked against the system's
/// roots (HTTP) and the webpki roots (gRPC), and no client certificate is
/// presented.
#[derive(Clone, Default)]
pub struct TlsOptions {
    /// PEM certificates of the authorities to trust, instead of the roots.
    ca_pem: Option<Vec<u8>>,
    /// The client certificate chain and its private key (PEM).
    identity: Option<(Vec<u8>, Vec<u8>)>,
    /// No verification of the agent's certificate (`--insecure`).
    insecure: bool,
}

impl std::fmt::Debug for TlsOptions {
    // The private key is never printed.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsOptions")
            .field("custom_roots", &self.ca_pem.is_some())
            .field("client_certificate", &self.identity.is_some())
            .field("insecure", &self.insecure)
            .finish()
    }
}

fn read(path: &Path, what: &str) -> Result<Vec<u8>, ClientError> {
    std::fs::read(path).map_err(|e| {
        ClientError::InvalidRequest(format!("cannot read the {what} {}: {e}", path.display()))
    })
}

impl TlsOptions {
    /// No setting: the default roots, no client certificate.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether nothing is set.
    pub fn is_empty(&self) -> bool {
        self.ca_pem.is_none() && self.identity.is_none() && !self.insecure
    }

    /// Accepts any certificate of the agent, unverified, when `accept`
    /// (development only: anyone on the way can then pose as the agent),
    /// on every binding. The default is to verify.
    pub fn danger_accept_invalid_certs(mut self, accept: bool) -> Self {
        self.insecure = accept;
        self
    }

    /// Whether the agent's certificate goes unverified
    /// ([`TlsOptions::danger_accept_invalid_certs`]).
    pub fn accepts_invalid_certs(&self) -> bool {
        self.insecure
    }

    /// Whether a client certificate is set.
    pub fn has_identity(&self) -> bool {
        self.identity.is_some()
    }

    /// Trusts the certificate authorities of this PEM text (one or more
    /// certificates) for the agent's certificate, instead of the default
    /// roots. A certificate of the text is also accepted as the agent's own
    /// when the agent presents exactly it (a self-signed certificate), if
    /// it names the host called and is within its dates.
    pub fn ca_pem(mut self, pem: impl Into<Vec<u8>>) -> Result<Self, ClientError> {
        let pem = pem.into();
        let certs = reqwest::Certificate::from_pem_bundle(&pem).map_err(|e| {
            ClientError::InvalidRequest(format!("the CA certificates are not valid PEM: {e}"))
        })?;
        if certs.is_empty() {
            return Err(ClientError::InvalidRequest(
                "the CA file holds no PEM certificate (-----BEGIN CERTIFICATE-----)".into(),
            ));
        }
        self.ca_pem = Some(pem);
        Ok(self)
    }

    /// [`TlsOptions::ca_pem`] with the text of a file.
    pub fn ca_file(self, path: impl AsRef<Path>) -> Result<Self, ClientError> {
        let path = path.as_ref();
        let pem = read(path, "CA certificate file")?;
        self.ca_pem(pem).map_err(|e| match e {
            ClientError::InvalidRequest(m) => {
                ClientError::InvalidRequest(format!("{}: {m}", path.display()))
            }
            other => other,
        })
    }

    /// Presents this client certificate (PEM chain, the client's own
    /// certificate first) with its private key (PEM) when the agent asks
    /// for one (mutual TLS).
    pub fn identity_pem(
        mut self,
        cert: impl Into<Vec<u8>>,
        key: impl Into<Vec<u8>>,
    ) -> Result<Self, ClientError> {
        let (cert, key) = (cert.into(), key.into());
        let certs = reqwest::Certificate::from_pem_bundle(&cert).unwrap_or_default();
        if certs.is_empty() {
            return Err(ClientError::InvalidRequest(
                "the client certificate holds no PEM certificate (-----BEGIN CERTIFICATE-----)"
                    .into(),
            ));
        }
        reqwest::Identity::from_pem(&joined(&cert, &key)).map_err(|e| {
            ClientError::InvalidRequest(format!(
                "the client certificate and key are not a usable PEM pair: {e}"
            ))
        })?;
        self.identity = Some((cert, key));
        Ok(self)
    }

    /// [`TlsOptions::identity_pem`] with the texts of two files.
    pub fn identity_files(
        self,
        cert: impl AsRef<Path>,
        key: impl AsRef<Path>,
    ) -> Result<Self, ClientError> {
        let cert_text = read(cert.as_ref(), "client certificate file")?;
        let key_text = read(key.as_ref(), "client key file")?;
        self.identity_pem(cert_text, key_text).map_err(|e| match e {
            ClientError::InvalidRequest(m) => ClientError::InvalidRequest(format!(
                "{} and {}: {m}",
                cert.as_ref().display(),
                key.as_ref().display()
            )),
            other => other,
        })
    }

    /// These settings applied to a `reqwest` client builder (the HTTP
    /// bindings and card fetches). Call [`crate::install_crypto_provider`]
    /// before building the client.
    ///
    /// With trusted certificates ([`TlsOptions::ca_pem`]) or
    /// [`TlsOptions::danger_accept_invalid_certs`], the builder gets the
    /// rustls configuration of [`TlsOptions::rustls_client_config`], which
    /// replaces the builder's own TLS settings and offers HTTP/1.1 only by
    /// ALPN (as [`crate::http_client_builder`] speaks); otherwise the
    /// system's roots stay, and the client certificate is added.
    pub fn configure_reqwest(
        &self,
        builder: reqwest::ClientBuilder,
    ) -> Result<reqwest::ClientBuilder, ClientError> {
        if self.ca_pem.is_some() || self.insecure {
            let mut config = self.rustls_client_config()?;
            config.alpn_protocols = vec![b"http/1.1".to_vec()];
            return Ok(builder.tls_backend_preconfigured(config));
        }
        match &self.identity {
            Some((cert, key)) => {
                let identity = reqwest::Identity::from_pem(&joined(cert, key)).map_err(|e| {
                    ClientError::InvalidRequest(format!(
                        "the client certificate is not usable: {e}"
                    ))
                })?;
                Ok(builder.identity(identity))
            }
            None => Ok(builder),
        }
    }

    /// An HTTP client with these settings and the defaults of
    /// [`crate::default_http_client`] (its own connection pool).
    pub fn http_client(&self) -> Result<reqwest::Client, ClientError> {
        crate::install_crypto_provider();
        self.configure_reqwest(crate::http_client_builder())?
            .build()
            .map_err(|e| ClientError::InvalidRequest(format!("cannot set up TLS: {e}")))
    }

    /// The rustls configuration of these settings, without ALPN protocols
    /// (the caller sets those): the agent's certificate checked against
    /// the trusted certificates (see [`TlsOptions::ca_pem`]), else the
    /// webpki roots, or not at all ([`TlsOptions::danger_accept_invalid_certs`]);
    /// the client certificate when set. With the process's crypto provider
    /// (*ring* when none is installed), TLS 1.2 and 1.3. Used for gRPC
    /// over TLS, and for the HTTP client when certificates are given.
    pub fn rustls_client_config(&self) -> Result<rustls::ClientConfig, ClientError> {
        let setup = |e: String| ClientError::InvalidRequest(format!("cannot set up TLS: {e}"));
        let provider = crate::http::crypto_provider();
        let builder = rustls::ClientConfig::builder_with_provider(Arc::clone(&provider))
            .with_safe_default_protocol_versions()
            .map_err(|e| setup(e.to_string()))?;
        let builder = if self.insecure {
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(verify::AnyCertificate::new(&provider)))
        } else if let Some(pem) = &self.ca_pem {
            let certs = CertificateDer::pem_slice_iter(pem)
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| {
                    ClientError::InvalidRequest(format!(
                        "the CA certificates are not valid PEM: {e}"
                    ))
                })?;
            let verifier = verify::TrustedCertificates::new(certs, provider).map_err(setup)?;
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(verifier))
        } else {
            let mut roots = rustls::RootCertStore::empty();
            roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
            builder.with_root_certificates(roots)
        };
        match &self.identity {
            Some((cert, key)) => {
                let chain = CertificateDer::pem_slice_iter(cert)
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| {
                        ClientError::InvalidRequest(format!(
                            "the client certificate is not valid PEM: {e}"
                        ))
                    })?;
                let key = rustls::pki_types::PrivateKeyDer::from_pem_slice(key).map_err(|e| {
                    ClientError::InvalidRequest(format!("the client key is not valid PEM: {e}"))
                })?;
                builder.with_client_auth_cert(chain, key).map_err(|e| {
                    ClientError::InvalidRequest(format!(
                        "the client certificate is not usable: {e}"
                    ))
                })
            }
            None => Ok(builder.with_no_client_auth()),
        }
    }

    /// The connector of a gRPC channel over TLS with these settings
    /// (HTTP/2 by ALPN).
    #[cfg(feature = "grpc-tls")]
    pub(crate) fn grpc_connector(&self) -> Result<GrpcTlsConnector, ClientError> {
        let mut config = self.rustls_client_config()?;
        config.alpn_protocols = vec![b"h2".to_vec()];
        Ok(GrpcTlsConnector {
            tls: tokio_rustls::TlsConnector::from(Arc::new(config)),
        })
    }
}

/// Connects a gRPC channel over TLS: TCP to the host and port of the URI
/// it is given, then the TLS handshake for that host, with the rustls
/// configuration of [`TlsOptions`]. (tonic's own TLS takes no certificate
/// verifier of ours.) The channel's connect timeout bounds both.
#[cfg(feature = "grpc-tls")]
#[derive(Clone)]
pub(crate) struct GrpcTlsConnector {
    tls: tokio_rustls::TlsConnector,
}

#[cfg(feature = "grpc-tls")]
impl tonic::codegen::Service<http::Uri> for GrpcTlsConnector {
    type Response = hyper_util::rt::TokioIo<tokio_rustls::client::TlsStream<tokio::net::TcpStream>>;
    type Error = Box<dyn std::error::Error + Send + Sync>;
    type Future = std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<Self::Response, Self::Error>> + Send>,
    >;

    fn poll_ready(
        &mut self,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: http::Uri) -> Self::Future {
        let tls = self.tls.clone();
        Box::pin(async move {
            let host = uri
                .host()
                .ok_or("the gRPC URL names no host")?
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_owned();
            let port = uri.port_u16().unwrap_or(443);
            let name = rustls::pki_types::ServerName::try_from(host.clone())?;
            let tcp = tokio::net::TcpStream::connect((host.as_str(), port)).await?;
            tcp.set_nodelay(true)?;
            let stream = tls.connect(name, tcp).await?;
            Ok(hyper_util::rt::TokioIo::new(stream))
        })
    }
}

/// A certificate chain and a key as one PEM text (what reqwest reads).
fn joined(cert: &[u8], key: &[u8]) -> Vec<u8> {
    let mut pem = cert.to_vec();
    if !pem.ends_with(b"\n") {
        pem.push(b'\n');
    }
    pem.extend_from_slice(key);
    pem
}

/// Why a TLS connection failed, as far as the client can tell.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum TlsFailure {
    /// The agent's certificate was not accepted: signed by an authority
    /// this client does not trust, expired, or for another name.
    ServerCertificate(String),
    /// The agent refused the connection over the client certificate: none
    /// was presented and it requires one, or it does not trust the one
    /// presented (signed by another authority, expired, revoked).
    ClientCertificate(String),
    /// Another TLS failure (no common protocol version or cipher, a
    /// malformed message...).
    Other(String),
    /// A plaintext call (`http://`) reached a port that speaks TLS: the
    /// URL to call instead (`https://`).
    PlaintextToTls(String),
}

impl TlsFailure {
    /// The description of the failure (rustls's words).
    pub fn detail(&self) -> &str {
        match self {
            TlsFailure::ServerCertificate(s)
            | TlsFailure::ClientCertificate(s)
            | TlsFailure::Other(s)
            | TlsFailure::PlaintextToTls(s) => s,
        }
    }
}

fn classify(e: &rustls::Error) -> TlsFailure {
    use rustls::AlertDescription as A;
    match e {
        rustls::Error::InvalidCertificate(c) => {
            use rustls::CertificateError as C;
            let why = match c {
                C::UnknownIssuer => {
                    "it is signed by an authority this client does not trust".into()
                }
                C::Expired | C::ExpiredContext { .. } => "it has expired".into(),
                C::NotValidYet | C::NotValidYetContext { .. } => "it is not valid yet".into(),
                C::NotValidForName | C::NotValidForNameContext { .. } => {
                    "it is not valid for this host name".into()
                }
                C::InvalidPurpose | C::InvalidPurposeContext { .. } => {
                    "it is not meant for a server (extended key usage)".into()
                }
                // webpki's error, named in its Display form (rustls keeps
                // it as an opaque "other" error).
                C::Other(o) if o.to_string().contains("CaUsedAsEndEntity") => {
                    "it is a certificate authority's certificate (CA:TRUE) that this client \
                     does not trust as the agent's own"
                        .into()
                }
                other => format!("{other:?}"),
            };
            TlsFailure::ServerCertificate(why)
        }
        rustls::Error::AlertReceived(
            alert @ (A::BadCertificate
            | A::UnsupportedCertificate
            | A::CertificateRevoked
            | A::CertificateExpired
            | A::CertificateUnknown
            | A::UnknownCA
            | A::CertificateRequired
            | A::AccessDenied),
        ) => TlsFailure::ClientCertificate(format!("the agent sent the TLS alert {alert:?}")),
        other => TlsFailure::Other(other.to_string()),
    }
}

/// The TLS failure behind a client error, when the error comes from a TLS
/// handshake (of any binding): the chain of its sources is searched for a
/// rustls error, including the ones wrapped in I/O errors.
pub fn tls_failure(e: &ClientError) -> Option<TlsFailure> {
    let source: &(dyn std::error::Error + 'static) = match e {
        ClientError::Connect {
            source: Some(s), ..
        }
        | ClientError::Transport {
            source: Some(s), ..
        } => s.as_ref(),
        _ => return None,
    };
    if let Some(p) = find_plaintext(source) {
        return Some(TlsFailure::PlaintextToTls(p.https_url.clone()));
    }
    find_rustls(source).map(classify)
}

/// The cause [`diagnose`] gives a plaintext call to a TLS port.
#[derive(Debug)]
struct PlaintextToTls {
    https_url: String,
}

impl std::fmt::Display for PlaintextToTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the agent answers with TLS on this port: call {}",
            self.https_url
        )
    }
}

impl std::error::Error for PlaintextToTls {}

fn find_plaintext<'a>(
    mut cur: &'a (dyn std::error::Error + 'static),
) -> Option<&'a PlaintextToTls> {
    for _ in 0..32 {
        if let Some(p) = cur.downcast_ref::<PlaintextToTls>() {
            return Some(p);
        }
        cur = cur.source()?;
    }
    None
}

fn find_rustls<'a>(mut cur: &'a (dyn std::error::Error + 'static)) -> Option<&'a rustls::Error> {
    // Bounded: a chain is short, but a cyclic one must not hang the caller.
    for _ in 0..32 {
        if let Some(r) = cur.downcast_ref::<rustls::Error>() {
            return Some(r);
        }
        // `io::Error::source` skips the error it wraps, and an HTTP/2
        // error keeps its I/O error without naming it as a source: look
        // inside both.
        let io = cur
            .downcast_ref::<std::io::Error>()
            .or_else(|| cur.downcast_ref::<h2::Error>().and_then(h2::Error::get_io));
        if let Some(inner) = io.and_then(std::io::Error::get_ref) {
            if let Some(r) = find_rustls(inner) {
                return Some(r);
            }
        }
        cur = cur.source()?;
    }
    None
}

/// Diagnoses a failed call over TLS whose error does not say why: with
/// TLS 1.3 a server refuses a client certificate (or its absence) only
/// after the client considers the handshake done, and HTTP/2 may report
/// the connection's end ("channel closed") without the alert that ended
/// it. When `e` is such an error for an `https://` / `grpcs://` URL, one
/// bounded handshake with the same settings is made to the same address,
/// without sending anything, and the server's answer read: a TLS alert
/// about the certificate becomes the error's cause (so that
/// [`tls_failure`] names it), anything else leaves `e` as it is.
///
/// Written here because no HTTP or gRPC client exposes the alert that
/// ended a connection after the handshake; it is what tokio-rustls and
/// rustls read.
pub async fn diagnose(e: ClientError, url: &str, tls: Option<&TlsOptions>) -> ClientError {
    let unexplained = matches!(
        e,
        ClientError::Transport { .. } | ClientError::Connect { .. }
    ) && tls_failure(&e).is_none();
    if !unexplained {
        return e;
    }
    if let Some(https_url) = speaks_tls(url).await {
        let cause = PlaintextToTls { https_url };
        return ClientError::Connect {
            url: url.to_owned(),
            message: cause.to_string(),
            source: Some(Box::new(cause)),
        };
    }
    let default = TlsOptions::default();
    match probe(url, tls.unwrap_or(&default)).await {
        Some(cause) => {
            let message = match &e {
                ClientError::Transport { message, .. } | ClientError::Connect { message, .. } => {
                    format!("{message}: {cause}")
                }
                other => other.to_string(),
            };
            ClientError::Transport {
                message,
                source: Some(Box::new(cause)),
            }
        }
        None => e,
    }
}

/// How long the diagnosis of [`diagnose`] may take in all.
const PROBE_LIMIT: std::time::Duration = std::time::Duration::from_secs(3);

/// One handshake to the host of `url`; the rustls error the server's
/// answer makes (an alert about the client's certificate), if any.
async fn probe(url: &str, tls: &TlsOptions) -> Option<rustls::Error> {
    let uri: http::Uri = url.trim().parse().ok()?;
    let scheme = uri.scheme_str()?.to_ascii_lowercase();
    if scheme != "https" && scheme != "grpcs" {
        return None;
    }
    let host = uri.host()?.trim_start_matches('[').trim_end_matches(']');
    let port = uri.port_u16().unwrap_or(443);
    let config = probe_config(tls)?;
    let name = rustls::pki_types::ServerName::try_from(host.to_owned()).ok()?;
    let attempt = async {
        let tcp = tokio::net::TcpStream::connect((host, port)).await.ok()?;
        let connector = tokio_rustls::TlsConnector::from(std::sync::Arc::new(config));
        let mut stream = match connector.connect(name, tcp).await {
            Ok(s) => s,
            Err(io) => return alert_of(&io),
        };
        // Accepted: the server sends session tickets after checking the
        // client's certificate; refused: an alert. Nothing is sent, so the
        // server never has data of ours to discard (its close is clean).
        let mut buf = [0u8; 1];
        loop {
            let read = tokio::io::AsyncReadExt::read(&mut stream, &mut buf);
            match tokio::time::timeout(std::time::Duration::from_millis(100), read).await {
                Ok(Err(io)) => return alert_of(&io),
                Ok(Ok(_)) => return None,
                Err(_) if stream.get_ref().1.tls13_tickets_received() > 0 => return None,
                Err(_) => {}
            }
        }
    };
    tokio::time::timeout(PROBE_LIMIT, attempt).await.ok()?
}

/// For a plaintext URL (`http://`, `grpc://`, `host:port`): whether its
/// port completes a TLS handshake (any certificate accepted, nothing sent
/// after it); the `https://` form of the URL if so.
async fn speaks_tls(url: &str) -> Option<String> {
    let trimmed = url.trim();
    let (scheme, rest) = trimmed.split_once("://").unwrap_or(("http", trimmed));
    let scheme = scheme.to_ascii_lowercase();
    if scheme != "http" && scheme != "grpc" {
        return None;
    }
    let uri: http::Uri = format!("http://{rest}").parse().ok()?;
    let host = uri.host()?.trim_start_matches('[').trim_end_matches(']');
    let port = uri.port_u16().unwrap_or(80);
    let mut config = TlsOptions::new()
        .danger_accept_invalid_certs(true)
        .rustls_client_config()
        .ok()?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let name = rustls::pki_types::ServerName::try_from(host.to_owned()).ok()?;
    let attempt = async {
        let tcp = tokio::net::TcpStream::connect((host, port)).await.ok()?;
        let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
        connector.connect(name, tcp).await.ok()
    };
    tokio::time::timeout(PROBE_LIMIT, attempt).await.ok()??;
    Some(format!("https://{rest}"))
}

fn alert_of(io: &std::io::Error) -> Option<rustls::Error> {
    let r = find_rustls(io)?;
    matches!(classify(r), TlsFailure::ClientCertificate(_)).then(|| r.clone())
}

/// The rustls configuration of the probe: the options' (see
/// [`TlsOptions::rustls_client_config`]).
fn probe_config(tls: &TlsOptions) -> Option<rustls::ClientConfig> {
    let mut config = tls.rustls_client_config().ok()?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Some(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rustls_errors_are_found_inside_io_errors() {
        let inner = rustls::Error::AlertReceived(rustls::AlertDescription::UnknownCA);
        let io = std::io::Error::new(std::io::ErrorKind::InvalidData, inner);
        let e = ClientError::Transport {
            message: "x".into(),
            source: Some(Box::new(io)),
        };
        assert!(matches!(
            tls_failure(&e),
            Some(TlsFailure::ClientCertificate(_))
        ));
        let untrusted = rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer);
        let e = ClientError::Connect {
            url: "https://a".into(),
            message: "x".into(),
            source: Some(Box::new(std::io::Error::other(untrusted))),
        };
        assert_eq!(
            tls_failure(&e),
            Some(TlsFailure::ServerCertificate(
                "it is signed by an authority this client does not trust".into()
            ))
        );
        let refused = ClientError::Connect {
            url: "http://a".into(),
            message: "refused".into(),
            source: Some(Box::new(std::io::Error::from(
                std::io::ErrorKind::ConnectionRefused,
            ))),
        };
        assert_eq!(tls_failure(&refused), None);
    }

    #[test]
    fn files_that_are_not_pem_are_refused() {
        let e = TlsOptions::new().ca_pem(b"not a certificate".to_vec());
        assert!(matches!(e, Err(ClientError::InvalidRequest(_))));
        let e = TlsOptions::new().identity_pem(b"nothing".to_vec(), b"nothing".to_vec());
        assert!(matches!(e, Err(ClientError::InvalidRequest(_))));
    }
}
