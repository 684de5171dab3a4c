//! [`AcceptAnyServerCert`]: the rustls verifier for TLS clients that do
//! not verify the server's certificate (Go's `InsecureSkipVerify`), as
//! upstream does towards kubelets without
//! `--kubelet-certificate-authority` and for HTTPS probes.
//!
//! It still checks the handshake's signatures with the provider's
//! algorithms, so the server must prove it holds the certificate's key;
//! it never checks the chain, the name or the validity period. It makes
//! no connection and no client configuration of its own.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};

/// Accepts any server certificate, checking the handshake's signatures
/// with `provider`'s algorithms. Give it to
/// `ClientConfig::dangerous().with_custom_certificate_verifier`.
#[derive(Debug)]
pub struct AcceptAnyServerCert(Arc<CryptoProvider>);

impl AcceptAnyServerCert {
    /// A verifier checking signatures with `provider`'s algorithms (the
    /// provider the client configuration is built with).
    pub fn new(provider: Arc<CryptoProvider>) -> Self {
        Self(provider)
    }
}

impl ServerCertVerifier for AcceptAnyServerCert {
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
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
