//! The checks of the agent's certificate behind [`super::TlsOptions`].
//!
//! [`TrustedCertificates`]: the certificates the caller trusts
//! (`TlsOptions::ca_pem`) are authorities, checked the usual way (rustls's
//! webpki verifier: chain, dates, name); one of them is also accepted as
//! the agent's own certificate when the agent presents exactly it. That is
//! the self-signed certificate people make with
//! `openssl req -x509 -subj /CN=localhost -addext subjectAltName=...`,
//! which OpenSSL marks as an authority (basicConstraints `CA:TRUE`): webpki
//! refuses an authority's certificate as a server's (`CaUsedAsEndEntity`),
//! while curl and browsers accept it when it is the trusted certificate
//! itself. Such a certificate must still name the host called (its subject
//! alternative names), be within its dates and, when it says what it is
//! for (extended key usage), be meant for servers; the handshake signature
//! is checked with the crypto provider's algorithms as for any other.
//!
//! [`AnyCertificate`]: `--insecure`, no check at all.

use std::sync::Arc;
use std::time::Duration;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::{WebPkiServerVerifier, verify_server_name};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, DistinguishedName, SignatureScheme};

/// The webpki verification against trusted certificates, which also
/// accepts one of those certificates presented as it is (see the module
/// documentation).
#[derive(Debug)]
pub(crate) struct TrustedCertificates {
    webpki: Arc<WebPkiServerVerifier>,
    /// The trusted certificates, as given (DER).
    certificates: Vec<CertificateDer<'static>>,
}

impl TrustedCertificates {
    /// A verifier trusting `certificates`, with the algorithms of
    /// `provider`.
    pub(crate) fn new(
        certificates: Vec<CertificateDer<'static>>,
        provider: Arc<rustls::crypto::CryptoProvider>,
    ) -> Result<Self, String> {
        let mut roots = rustls::RootCertStore::empty();
        for c in &certificates {
            roots
                .add(c.clone())
                .map_err(|e| format!("a CA certificate is not usable: {e}"))?;
        }
        let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
            .build()
            .map_err(|e| format!("the CA certificates are not usable: {e}"))?;
        Ok(Self {
            webpki,
            certificates,
        })
    }

    fn is_trusted_itself(&self, end_entity: &CertificateDer<'_>) -> bool {
        self.certificates
            .iter()
            .any(|c| c.as_ref() == end_entity.as_ref())
    }
}

impl ServerCertVerifier for TrustedCertificates {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self.webpki.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        ) {
            Ok(verified) => Ok(verified),
            Err(e) if !self.is_trusted_itself(end_entity) => Err(e),
            Err(_) => {
                valid_as_itself(end_entity, server_name, now)?;
                Ok(ServerCertVerified::assertion())
            }
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.webpki.supported_verify_schemes()
    }

    fn root_hint_subjects(&self) -> Option<&[DistinguishedName]> {
        self.webpki.root_hint_subjects()
    }
}

/// Whether a trusted certificate may stand for the server `server_name`
/// at `now`, by itself: it names the host (DNS or IP subject alternative
/// name, as webpki reads them), it is within its dates, and its extended
/// key usage, if any, allows a server.
fn valid_as_itself(
    cert: &CertificateDer<'_>,
    server_name: &ServerName<'_>,
    now: UnixTime,
) -> Result<(), rustls::Error> {
    let bad = || rustls::Error::InvalidCertificate(CertificateError::BadEncoding);
    let parsed = rustls::server::ParsedCertificate::try_from(cert)?;
    verify_server_name(&parsed, server_name)?;
    let (_, x509) = x509_parser::parse_x509_certificate(cert.as_ref()).map_err(|_| bad())?;
    let seconds = |t: &x509_parser::time::ASN1Time| {
        UnixTime::since_unix_epoch(Duration::from_secs(
            u64::try_from(t.timestamp()).unwrap_or_default(),
        ))
    };
    let validity = x509.validity();
    let (not_before, not_after) = (seconds(&validity.not_before), seconds(&validity.not_after));
    if now < not_before {
        return Err(rustls::Error::InvalidCertificate(
            CertificateError::NotValidYetContext {
                time: now,
                not_before,
            },
        ));
    }
    if now > not_after {
        return Err(rustls::Error::InvalidCertificate(
            CertificateError::ExpiredContext {
                time: now,
                not_after,
            },
        ));
    }
    match x509.extended_key_usage() {
        Ok(None) => Ok(()),
        Ok(Some(eku)) if eku.value.server_auth || eku.value.any => Ok(()),
        Ok(Some(_)) => Err(rustls::Error::InvalidCertificate(
            CertificateError::InvalidPurpose,
        )),
        Err(_) => Err(bad()),
    }
}

/// `--insecure`: every certificate is accepted, its signatures unchecked.
#[derive(Debug)]
pub(crate) struct AnyCertificate {
    schemes: Vec<SignatureScheme>,
}

impl AnyCertificate {
    pub(crate) fn new(provider: &rustls::crypto::CryptoProvider) -> Self {
        Self {
            schemes: provider
                .signature_verification_algorithms
                .supported_schemes(),
        }
    }
}

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        _message: &[u8],
        _cert: &CertificateDer<'_>,
        _dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Ok(HandshakeSignatureValid::assertion())
    }

    fn verify_tls13_signature(
        &self,
        _message: &[u8],
        _cert: &CertificateDer<'_>,
        _dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Ok(HandshakeSignatureValid::assertion())
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.schemes.clone()
    }
}
