//! TLS serving: the certificate chain and key from PEM files, HTTP/1.1 and
//! HTTP/2 offered by ALPN on the same port (so gRPC works over TLS), the
//! files read again when they change, and optional client certificates
//! (mutual TLS) verified against a CA.
//!
//! rustls (with the *ring* provider, the one the rest of the tree uses)
//! does the protocol; what is here is loading the files, watching them and
//! reading the caller's name from a verified client certificate.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// The process's rustls crypto provider: the one installed (an
/// application's own choice is kept), else *ring*, installed as the
/// process's default so that every rustls user of the process (reqwest,
/// built without a provider of its own: see the workspace's Cargo.toml;
/// tonic; sqlx) agrees. The one place where the server names a provider.
pub(crate) fn crypto_provider() -> Arc<rustls::crypto::CryptoProvider> {
    if let Some(p) = rustls::crypto::CryptoProvider::get_default() {
        return Arc::clone(p);
    }
    let ring = rustls::crypto::ring::default_provider();
    // An error means another thread installed one meanwhile: that one wins.
    let _ = ring.clone().install_default();
    rustls::crypto::CryptoProvider::get_default()
        .cloned()
        .unwrap_or_else(|| Arc::new(ring))
}

/// How a server serves TLS: its certificate chain and private key (PEM
/// files), and, for mutual TLS, the CA whose client certificates it
/// accepts.
///
/// ```no_run
/// use agentwire_server::TlsConfig;
/// let tls = TlsConfig::new("server.crt", "server.key").client_ca("clients-ca.crt");
/// // A2aServer::new(card, agent).tls(tls)
/// # let _ = tls;
/// ```
///
/// The files are checked every [`Self::reload_interval`] (5 s by
/// default): when one changed, they are read again and new connections get
/// the new certificate, while open connections (event streams among them)
/// go on with the one they began with. A reload that fails (a file half
/// written, a key that does not match) keeps the old configuration and logs
/// a warning.
///
/// With a client CA, the server asks every client for a certificate but
/// does not require one at the handshake: a certificate that is presented
/// must be valid (signed by the CA, in date) or the handshake fails, and a
/// call without one is answered like a call without credentials of any
/// other scheme (HTTP 401, gRPC `UNAUTHENTICATED`, JSON-RPC `-31401`)
/// unless anonymous callers are allowed. The caller's principal is the
/// certificate's subject common name, or else its first DNS or URI subject
/// alternative name; see [`crate::auth::AuthSchemes::mutual_tls`].
#[derive(Debug, Clone)]
pub struct TlsConfig {
    cert: PathBuf,
    key: PathBuf,
    client_ca: Option<PathBuf>,
    handshake_timeout: Duration,
    reload_interval: Duration,
}

/// The default of [`TlsConfig::handshake_timeout`].
pub const DEFAULT_TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

impl TlsConfig {
    /// Serves the certificate chain in `cert` (PEM, the server's own
    /// certificate first) with the private key in `key` (PEM: PKCS#8,
    /// PKCS#1 or SEC1).
    pub fn new(cert: impl Into<PathBuf>, key: impl Into<PathBuf>) -> Self {
        Self {
            cert: cert.into(),
            key: key.into(),
            client_ca: None,
            handshake_timeout: DEFAULT_TLS_HANDSHAKE_TIMEOUT,
            reload_interval: Duration::from_secs(5),
        }
    }

    /// Asks clients for a certificate signed by a CA in this PEM file
    /// (mutual TLS).
    pub fn client_ca(mut self, ca: impl Into<PathBuf>) -> Self {
        self.client_ca = Some(ca.into());
        self
    }

    /// How long a client may take to complete the TLS handshake (default
    /// 10 s); a slower one is disconnected.
    pub fn handshake_timeout(mut self, timeout: Duration) -> Self {
        self.handshake_timeout = timeout;
        self
    }

    /// How often the files are checked for changes (default 5 s).
    pub fn reload_interval(mut self, every: Duration) -> Self {
        self.reload_interval = every;
        self
    }

    /// Whether client certificates are asked for.
    pub fn is_mutual(&self) -> bool {
        self.client_ca.is_some()
    }

    /// Reads the files and builds the rustls configuration; the error says
    /// which file is wrong and how.
    pub fn load(&self) -> Result<rustls::ServerConfig, String> {
        let provider = crypto_provider();
        let certs = read_certs(&self.cert)?;
        let key = PrivateKeyDer::from_pem_file(&self.key).map_err(|e| {
            format!(
                "cannot read the TLS private key {}: {}",
                self.key.display(),
                pem_error(&e)
            )
        })?;
        let builder = rustls::ServerConfig::builder_with_provider(Arc::clone(&provider))
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS set-up failed: {e}"))?;
        let builder = match &self.client_ca {
            None => builder.with_no_client_auth(),
            Some(ca) => {
                let mut roots = rustls::RootCertStore::empty();
                for c in read_certs(ca)? {
                    roots.add(c).map_err(|e| {
                        format!("the client CA file {} is not usable: {e}", ca.display())
                    })?;
                }
                let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                    Arc::new(roots),
                    provider,
                )
                .allow_unauthenticated()
                .build()
                .map_err(|e| format!("the client CA file {} is not usable: {e}", ca.display()))?;
                builder.with_client_cert_verifier(verifier)
            }
        };
        let mut config = builder.with_single_cert(certs, key).map_err(|e| {
            format!(
                "the TLS certificate {} and key {} do not go together: {e}",
                self.cert.display(),
                self.key.display()
            )
        })?;
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(config)
    }

    /// The names the server's certificate (the first of the chain) is
    /// valid for: its DNS and IP subject alternative names, which clients
    /// check the host they call against.
    pub fn certificate_names(&self) -> Result<CertificateNames, String> {
        use x509_parser::prelude::{FromDer, GeneralName, X509Certificate};
        let certs = read_certs(&self.cert)?;
        let first = certs.first().ok_or("no certificate")?;
        let (_, cert) = X509Certificate::from_der(first.as_ref())
            .map_err(|e| format!("cannot parse the certificate {}: {e}", self.cert.display()))?;
        let mut names = CertificateNames::default();
        if let Ok(Some(san)) = cert.subject_alternative_name() {
            for n in &san.value.general_names {
                match n {
                    GeneralName::DNSName(d) => names.dns.push(d.to_ascii_lowercase()),
                    GeneralName::IPAddress(b) => {
                        if let Ok(v4) = <[u8; 4]>::try_from(*b) {
                            names.ips.push(IpAddr::from(v4));
                        } else if let Ok(v6) = <[u8; 16]>::try_from(*b) {
                            names.ips.push(IpAddr::from(v6));
                        }
                    }
                    _ => {}
                }
            }
        }
        Ok(names)
    }

    /// The `host:port` to advertise in the card for a server reachable at
    /// `addr`, one that the certificate covers: the address itself when the
    /// certificate names it, else `localhost` for a loopback address when
    /// the certificate names it, else the certificate's first DNS name
    /// (not a wildcard); `addr` when the certificate names none of these
    /// (or cannot be read).
    pub fn advertised_authority(&self, addr: SocketAddr) -> String {
        let host = self
            .certificate_names()
            .ok()
            .and_then(|names| names.host_for(addr.ip()));
        match host {
            Some(h) => format!("{h}:{}", addr.port()),
            None => addr.to_string(),
        }
    }

    fn files(&self) -> Vec<&Path> {
        let mut files = vec![self.cert.as_path(), self.key.as_path()];
        files.extend(self.client_ca.as_deref());
        files
    }
}

/// The DNS names and IP addresses a certificate is valid for (its subject
/// alternative names); see [`TlsConfig::certificate_names`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CertificateNames {
    /// DNS names, lowercase; `*.example.com` covers one label.
    pub dns: Vec<String>,
    /// IP addresses.
    pub ips: Vec<IpAddr>,
}

impl CertificateNames {
    /// Whether a client calling `host` (a DNS name, an IP address, or an
    /// IPv6 address in brackets) accepts the certificate's name.
    pub fn covers(&self, host: &str) -> bool {
        let host = host.trim_start_matches('[').trim_end_matches(']');
        if let Ok(ip) = host.parse::<IpAddr>() {
            return self.ips.contains(&ip);
        }
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        self.dns
            .iter()
            .any(|pattern| match pattern.strip_prefix("*.") {
                Some(suffix) => host
                    .split_once('.')
                    .is_some_and(|(label, rest)| !label.is_empty() && rest == suffix),
                None => *pattern == host,
            })
    }

    /// The host name to advertise for a server at `ip`, when it is not
    /// `ip` itself: `None` when the certificate names `ip` (or names no
    /// usable host), else `localhost` for a loopback `ip` if covered, else
    /// the first DNS name that is not a wildcard.
    fn host_for(&self, ip: IpAddr) -> Option<String> {
        if self.ips.contains(&ip) {
            return None;
        }
        if ip.is_loopback() && self.covers("localhost") {
            return Some("localhost".into());
        }
        self.dns.iter().find(|n| !n.starts_with("*.")).cloned()
    }

    /// The names, for messages: `DNS:localhost, IP:127.0.0.1`.
    pub fn describe(&self) -> String {
        let all: Vec<String> = self
            .dns
            .iter()
            .map(|d| format!("DNS:{d}"))
            .chain(self.ips.iter().map(|ip| format!("IP:{ip}")))
            .collect();
        if all.is_empty() {
            "no DNS or IP name".into()
        } else {
            all.join(", ")
        }
    }
}

fn read_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|e| {
            format!(
                "cannot read the certificates in {}: {}",
                path.display(),
                pem_error(&e)
            )
        })?;
    if certs.is_empty() {
        return Err(format!(
            "{} holds no certificate (expected PEM: -----BEGIN CERTIFICATE-----)",
            path.display()
        ));
    }
    Ok(certs)
}

fn pem_error(e: &rustls::pki_types::pem::Error) -> String {
    match e {
        rustls::pki_types::pem::Error::Io(io) => io.to_string(),
        rustls::pki_types::pem::Error::NoItemsFound => {
            "no PEM item of the expected kind in the file".into()
        }
        other => format!("not valid PEM ({other:?})"),
    }
}

/// The TLS acceptor in force, replaced when the files change.
#[derive(Clone)]
pub(crate) struct Tls {
    current: Arc<RwLock<tokio_rustls::TlsAcceptor>>,
    pub(crate) handshake_timeout: Duration,
}

impl Tls {
    /// Loads the configuration (the error names the file at fault) and
    /// starts watching the files (until `stop` is cancelled).
    pub(crate) fn start(
        config: &TlsConfig,
        stop: tokio_util::sync::CancellationToken,
    ) -> Result<Self, String> {
        let first = config.load()?;
        let tls = Self {
            current: Arc::new(RwLock::new(Arc::new(first).into())),
            handshake_timeout: config.handshake_timeout,
        };
        let watched = tls.clone();
        let config = config.clone();
        tokio::spawn(async move {
            let mut seen = mtimes(&config);
            let mut tick = tokio::time::interval(config.reload_interval);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = tick.tick() => {}
                    () = stop.cancelled() => return,
                }
                let now = mtimes(&config);
                if now == seen {
                    continue;
                }
                match config.load() {
                    Ok(c) => {
                        seen = now;
                        if let Ok(mut cur) = watched.current.write() {
                            *cur = Arc::new(c).into();
                        }
                        tracing::info!("TLS certificate files changed: reloaded");
                    }
                    // (Not remembered as seen: tried again at the next
                    // tick, the files may be half written.)
                    Err(e) => tracing::warn!(
                        error = %e,
                        "TLS certificate files changed but could not be loaded; keeping the previous ones"
                    ),
                }
            }
        });
        Ok(tls)
    }

    /// The acceptor for a new connection.
    pub(crate) fn acceptor(&self) -> tokio_rustls::TlsAcceptor {
        match self.current.read() {
            Ok(a) => a.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }
}

fn mtimes(config: &TlsConfig) -> Vec<Option<SystemTime>> {
    config
        .files()
        .into_iter()
        .map(|p| std::fs::metadata(p).and_then(|m| m.modified()).ok())
        .collect()
}

/// The principal named by a verified client certificate: its subject
/// common name, or else its first DNS or URI subject alternative name.
pub(crate) fn principal_of(cert: &CertificateDer<'_>) -> Option<String> {
    use x509_parser::prelude::{FromDer, GeneralName, X509Certificate};
    let (_, cert) = X509Certificate::from_der(cert.as_ref()).ok()?;
    if let Some(cn) = cert
        .subject()
        .iter_common_name()
        .find_map(|a| a.as_str().ok())
        .filter(|s| !s.is_empty())
    {
        return Some(cn.to_owned());
    }
    let san = cert.subject_alternative_name().ok().flatten()?;
    san.value.general_names.iter().find_map(|n| match n {
        GeneralName::DNSName(s) | GeneralName::URI(s) => Some((*s).to_owned()),
        _ => None,
    })
}
