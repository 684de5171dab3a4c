//! Joining a cluster with a token, as the kubelet's TLS bootstrap with
//! kubeadm's discovery and k3s's token form:
//!
//! - [`JoinToken`]: `K10<sha256 of the CA's public key>::<id>.<secret>`,
//!   k3s's form with kubeadm's hash (`--discovery-token-ca-cert-hash
//!   sha256:...`: the SHA-256 of the CA certificate's
//!   SubjectPublicKeyInfo) and a bootstrap token
//!   (`skiff_api::bootstrap_token`);
//! - [`fetch_ca`]: the server's CA, fetched from `/cacerts` without
//!   trusting the connection, then [`verify_ca`] checks it against the
//!   token's hash **before** any secret is sent;
//! - [`bootstrap`]: with the CA trusted, the bootstrap token asks for the
//!   node's client certificate through a CertificateSigningRequest (which
//!   the server approves for `system:bootstrappers` and signs), and the
//!   node's kubeconfig is written only once the certificate is issued.
//!
//! A wrong hash, a refused token or a request never issued leaves nothing
//! on disk. This module never approves or signs anything.

use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine as _;
use skiff_api::bootstrap_token::Token;

use crate::certificate::{authority, kubeconfig, rotation};

/// The prefix of a join token (k3s's "K10": version 1, hash follows).
pub const PREFIX: &str = "K10";

/// The CA path every skiff server serves without authentication.
pub const CA_PATH: &str = "/cacerts";

/// How long the first certificate may take to be issued.
pub const ISSUE_TIMEOUT: Duration = Duration::from_secs(120);

/// Why a join failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("the join token is not of the form K10<sha256 of the CA's public key>::<id>.<secret> (see <server data dir>/token or `skiff token create`)")]
    Form,
    #[error(transparent)]
    Token(#[from] skiff_api::bootstrap_token::Error),
    #[error("the server's address {0:?} is not an https URL")]
    Server(String),
    #[error("cannot fetch the CA from {url}: {source}")]
    Fetch {
        url: String,
        #[source]
        source: kube::Error,
    },
    #[error("the server sent no usable CA certificate: {0}")]
    Certificate(#[source] authority::Error),
    #[error("the server's CA (sha256:{got}) does not match the join token's hash (sha256:{want}): refusing to send the token; is --server the cluster the token came from?")]
    CaMismatch { got: String, want: String },
    #[error("cannot make a client for {0}")]
    Client(String, #[source] kube::Error),
    #[error("the server refused the join token ({0}): it is wrong, expired or was deleted")]
    Refused(String),
    #[error("the token authenticated, but may not ask for a node certificate ({0}): is the ClusterRoleBinding kubeadm:kubelet-bootstrap there?")]
    Forbidden(String),
    #[error("the node's client certificate was not issued: {0}")]
    Issue(#[source] rotation::Error),
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A join token: the CA hash (hex) and the bootstrap token.
#[derive(Clone, PartialEq, Eq)]
pub struct JoinToken {
    /// SHA-256 of the CA certificate's SubjectPublicKeyInfo, lowercase hex.
    pub ca_hash: String,
    pub token: Token,
}

impl std::fmt::Debug for JoinToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JoinToken")
            .field("ca_hash", &self.ca_hash)
            .field("token", &self.token)
            .finish()
    }
}

impl JoinToken {
    /// Parses `K10<hex>::<id>.<secret>` (surrounding space ignored).
    pub fn parse(text: &str) -> Result<Self> {
        let rest = text.trim().strip_prefix(PREFIX).ok_or(Error::Form)?;
        let (hash, token) = rest.split_once("::").ok_or(Error::Form)?;
        let hash = hash.strip_prefix("sha256:").unwrap_or(hash);
        if hash.len() != 64 || !hash.chars().all(|c| c.is_ascii_hexdigit()) {
            return Err(Error::Form);
        }
        Ok(JoinToken {
            ca_hash: hash.to_ascii_lowercase(),
            token: Token::parse(token)?,
        })
    }

    /// The token's text.
    pub fn text(&self) -> String {
        format!("{PREFIX}{}::{}", self.ca_hash, self.token.text())
    }
}

/// kubeadm's CA hash: SHA-256 of the (first) certificate's
/// SubjectPublicKeyInfo, lowercase hex.
pub fn ca_hash(pem: &[u8]) -> Result<String> {
    let der = authority::first_certificate(pem).map_err(Error::Certificate)?;
    let (_, cert) = x509_parser::parse_x509_certificate(der.as_ref())
        .map_err(|_| Error::Certificate(authority::Error::MalformedCertificate))?;
    let digest = ring::digest::digest(&ring::digest::SHA256, cert.public_key().raw);
    Ok(digest.as_ref().iter().map(|b| format!("{b:02x}")).collect())
}

/// The CA certificate of a fetched bundle that matches the token's hash,
/// alone (DER and PEM): only it is trusted from then on and written to
/// the kubeconfig, never the rest of what the server sent (a reply may
/// append a certificate of its own after the real CA).
pub fn pinned(pem: &[u8], token: &JoinToken) -> Result<(Vec<u8>, String)> {
    verify_ca(pem, token)?;
    let der = authority::first_certificate(pem).map_err(Error::Certificate)?;
    let der = der.as_ref().to_vec();
    let body = base64::engine::general_purpose::STANDARD.encode(&der);
    let mut text = String::from("-----BEGIN CERTIFICATE-----\n");
    for line in body.as_bytes().chunks(64) {
        text.push_str(&String::from_utf8_lossy(line));
        text.push('\n');
    }
    text.push_str("-----END CERTIFICATE-----\n");
    Ok((der, text))
}

/// Checks a fetched CA against the token's hash.
pub fn verify_ca(pem: &[u8], token: &JoinToken) -> Result<()> {
    let got = ca_hash(pem)?;
    if got != token.ca_hash {
        return Err(Error::CaMismatch {
            got,
            want: token.ca_hash.clone(),
        });
    }
    Ok(())
}

fn url(server: &str) -> Result<http::Uri> {
    let uri: http::Uri = server
        .parse()
        .map_err(|_| Error::Server(server.to_string()))?;
    if uri.scheme_str() != Some("https") || uri.host().is_none() {
        return Err(Error::Server(server.to_string()));
    }
    Ok(uri)
}

/// The server's CA (PEM) from `/cacerts`, over a connection whose
/// certificate is not checked (nothing secret is sent on it; what it
/// returns is checked with [`verify_ca`]).
pub async fn fetch_ca(server: &str) -> Result<Vec<u8>> {
    let mut config = kube::Config::new(url(server)?);
    config.accept_invalid_certs = true;
    config.connect_timeout = Some(Duration::from_secs(10));
    config.read_timeout = Some(Duration::from_secs(10));
    let client =
        kube::Client::try_from(config).map_err(|e| Error::Client(server.to_string(), e))?;
    let request = http::Request::get(CA_PATH)
        .body(Vec::new())
        .map_err(|e| Error::Fetch {
            url: format!("{server}{CA_PATH}"),
            source: kube::Error::HttpError(e),
        })?;
    let text = client
        .request_text(request)
        .await
        .map_err(|source| Error::Fetch {
            url: format!("{server}{CA_PATH}"),
            source,
        })?;
    Ok(text.into_bytes())
}

/// Joins: checks the server's CA against the token, asks for node
/// `node_name`'s client certificate with the bootstrap token and writes
/// the node's kubeconfig to `path` (its directory made then, mode 0600).
/// Nothing is written unless the certificate was issued.
pub async fn bootstrap(
    server: &str,
    token: &JoinToken,
    node_name: &str,
    path: &Path,
) -> Result<()> {
    let ca = fetch_ca(server).await?;
    let (ca_der, ca_pem) = pinned(&ca, token)?;
    let mut config = kube::Config::new(url(server)?);
    config.root_cert = Some(vec![ca_der]);
    config.auth_info.token = Some(token.token.text().into());
    config.connect_timeout = Some(Duration::from_secs(10));
    let client =
        kube::Client::try_from(config).map_err(|e| Error::Client(server.to_string(), e))?;
    let issued = match rotation::issue(&client, node_name, ISSUE_TIMEOUT).await {
        Ok(issued) => issued,
        Err(rotation::Error::Api(kube::Error::Api(status))) if status.code == 401 => {
            return Err(Error::Refused(format!("{} {}", status.code, status.reason)));
        }
        Err(rotation::Error::Api(kube::Error::Api(status))) if status.code == 403 => {
            return Err(Error::Forbidden(status.message));
        }
        Err(e) => return Err(Error::Issue(e)),
    };
    tracing::info!(csr = %issued.request, "the node's client certificate was issued");
    let text = kubeconfig::text(
        server,
        &ca_pem,
        &format!("system:node:{node_name}"),
        &issued.cert_pem,
        &issued.key_pem,
    );
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|source| Error::Write {
            path: dir.to_path_buf(),
            source,
        })?;
    }
    kubeconfig::write_atomic(path, text.as_bytes(), true).map_err(|e| Error::Write {
        path: path.to_path_buf(),
        source: std::io::Error::other(e.to_string()),
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const CA: &str = "-----BEGIN CERTIFICATE-----\nMIIBdzCCAR2gAwIBAgIBADAKBggqhkjOPQQDAjAjMSEwHwYDVQQDDBhrM3Mtc2Vy\n-----END CERTIFICATE-----\n";

    #[test]
    fn tokens_round_trip_and_bad_forms_are_refused() {
        let hash = "ab".repeat(32);
        let text = format!("K10{hash}::abcdef.0123456789abcdef");
        let t = JoinToken::parse(&format!(" {text}\n")).unwrap();
        assert_eq!(t.text(), text);
        assert_eq!(t.token.id, "abcdef");
        assert!(JoinToken::parse(&format!("K10sha256:{hash}::abcdef.0123456789abcdef")).is_ok());
        for bad in [
            "abcdef.0123456789abcdef",
            "K10::abcdef.0123456789abcdef",
            &format!("K10{}::abcdef.0123456789abcdef", "ab".repeat(31)),
            &format!("K10{}::abcdef.0123456789abcdef", "zz".repeat(32)),
            &format!("K10{hash}::server:password"),
            &format!("K10{hash}abcdef.0123456789abcdef"),
        ] {
            assert!(JoinToken::parse(bad).is_err(), "{bad}");
        }
        assert!(!format!("{t:?}").contains("0123456789abcdef"));
    }

    #[test]
    fn the_hash_is_of_the_public_key_and_a_mismatch_is_refused() {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let ca = params.self_signed(&key).unwrap();
        let pem = ca.pem();
        let hash = ca_hash(pem.as_bytes()).unwrap();
        assert_eq!(hash.len(), 64);
        // The same key in another certificate has the same hash.
        let again = params.self_signed(&key).unwrap();
        assert_eq!(ca_hash(again.pem().as_bytes()).unwrap(), hash);
        let token = JoinToken::parse(&format!("K10{hash}::abcdef.0123456789abcdef")).unwrap();
        verify_ca(pem.as_bytes(), &token).unwrap();
        let other = rcgen::KeyPair::generate().unwrap();
        let wrong = params.self_signed(&other).unwrap();
        let err = verify_ca(wrong.pem().as_bytes(), &token).unwrap_err();
        assert!(matches!(err, Error::CaMismatch { .. }), "{err}");
        assert!(err.to_string().contains(&hash));
        assert!(ca_hash(CA.as_bytes()).is_err());
        assert!(ca_hash(b"not pem").is_err());
    }

    #[test]
    fn only_the_pinned_certificate_is_trusted() {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let real = params.self_signed(&key).unwrap();
        let attacker = params
            .self_signed(&rcgen::KeyPair::generate().unwrap())
            .unwrap();
        let hash = ca_hash(real.pem().as_bytes()).unwrap();
        let token = JoinToken::parse(&format!("K10{hash}::abcdef.0123456789abcdef")).unwrap();
        let bundle = format!("{}{}", real.pem(), attacker.pem());
        let (der, pem) = pinned(bundle.as_bytes(), &token).unwrap();
        assert_eq!(der, real.der().to_vec());
        assert_eq!(ca_hash(pem.as_bytes()).unwrap(), hash);
        assert_eq!(pem.matches("BEGIN CERTIFICATE").count(), 1);
        // The attacker's certificate first: refused.
        let swapped = format!("{}{}", attacker.pem(), real.pem());
        assert!(pinned(swapped.as_bytes(), &token).is_err());
    }

    #[test]
    fn only_https_servers() {
        assert!(url("https://127.0.0.1:6443").is_ok());
        assert!(url("http://127.0.0.1:6443").is_err());
        assert!(url("127.0.0.1:6443").is_err());
        assert!(url("https://").is_err());
    }
}
