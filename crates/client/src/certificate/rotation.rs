//! A node agent's client certificate, renewed before it expires as the
//! kubelet's client rotation does: once a jittered 70–90 % of the
//! certificate's life has passed ([`deadline`]), a new key and a
//! CertificateSigningRequest for `system:node:NAME` in `system:nodes`
//! (signer `kubernetes.io/kube-apiserver-client-kubelet`), which the
//! controllers approve (`selfnodeclient`) and sign; the new pair is
//! written where the kubeconfig keeps it and handed to the running
//! client through a [`ClientCert`], the rustls resolver the client
//! presents its certificate from, so new connections use it without a
//! new client or a restart (connections already open keep theirs, and
//! the server does not look at a certificate again once connected).
//!
//! This module owns only the timing, the request and the swap. It does
//! not approve or sign anything, and a rotation that fails leaves the
//! old certificate in use and tries again with a back-off.

use std::sync::{Arc, RwLock};
use std::time::Duration;

use k8s_openapi::api::certificates::v1::{
    CertificateSigningRequest, CertificateSigningRequestSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, PostParams};
use rustls::client::ResolvesClientCert;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::sign::CertifiedKey;
use rustls::SignatureScheme;
use time::OffsetDateTime;
use tokio_util::sync::CancellationToken;

use super::authority;
use super::kubeconfig::{self, Location};

/// The signer of kubelets' client certificates.
pub const SIGNER: &str = "kubernetes.io/kube-apiserver-client-kubelet";
/// How long a request may wait to be issued (upstream: 15 minutes).
pub const ISSUE_TIMEOUT: Duration = Duration::from_secs(15 * 60);

/// Why a rotation failed (it is tried again).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A new key or request could not be made.
    #[error("making a key and request")]
    Request(#[source] rcgen::Error),
    /// The certificate or key is not a usable PEM pair.
    #[error("the client certificate and key")]
    Pem(#[source] rustls::pki_types::pem::Error),
    /// rustls refused the pair (the key does not fit the certificate).
    #[error("the client certificate and key do not fit")]
    Key(#[source] rustls::Error),
    /// The current certificate cannot be read.
    #[error("reading the client certificate")]
    Certificate(#[source] authority::Error),
    /// The request could not be created or watched.
    #[error("certificate signing request")]
    Api(#[source] kube::Error),
    /// Watching for the certificate failed.
    #[error("waiting for the certificate")]
    Wait(#[source] kube::runtime::wait::Error),
    /// Nobody issued it in time.
    #[error("certificate signing request {0} was not issued within {1:?}")]
    Timeout(String, Duration),
    /// It was denied, failed or deleted.
    #[error("certificate signing request {name} was {how}")]
    Refused {
        /// Which request.
        name: String,
        /// `denied`, `failed` or `deleted`.
        how: &'static str,
    },
    /// The new pair could not be written.
    #[error("writing the new certificate")]
    Write(#[source] kubeconfig::Error),
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

fn certified(cert_pem: &str, key_pem: &str) -> Result<CertifiedKey> {
    let chain = CertificateDer::pem_slice_iter(cert_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(Error::Pem)?;
    if chain.is_empty() {
        return Err(Error::Key(rustls::Error::NoCertificatesPresented));
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).map_err(Error::Pem)?;
    let provider = rustls::crypto::ring::default_provider();
    CertifiedKey::from_der(chain, key, &provider).map_err(Error::Key)
}

/// The client certificate a client presents, swappable while it runs
/// (a rustls client certificate resolver over a shared cell).
pub struct ClientCert {
    current: RwLock<(Arc<CertifiedKey>, String)>,
}

impl std::fmt::Debug for ClientCert {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientCert").finish_non_exhaustive()
    }
}

impl ClientCert {
    /// A cell holding this pair (PEM).
    pub fn new(cert_pem: &str, key_pem: &str) -> Result<Arc<Self>> {
        Ok(Arc::new(Self {
            current: RwLock::new((
                Arc::new(certified(cert_pem, key_pem)?),
                cert_pem.to_string(),
            )),
        }))
    }

    /// Presents this pair from the next handshake on.
    pub fn set(&self, cert_pem: &str, key_pem: &str) -> Result<()> {
        let key = Arc::new(certified(cert_pem, key_pem)?);
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = (key, cert_pem.to_string());
        Ok(())
    }

    /// The certificate presented now, PEM.
    pub fn certificate_pem(&self) -> String {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .1
            .clone()
    }
}

impl ResolvesClientCert for ClientCert {
    fn resolve(
        &self,
        _root_hint_subjects: &[&[u8]],
        _sigschemes: &[SignatureScheme],
    ) -> Option<Arc<CertifiedKey>> {
        Some(
            self.current
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .0
                .clone(),
        )
    }

    fn has_certs(&self) -> bool {
        true
    }
}

/// When a certificate valid from `not_before` to `not_after` is renewed:
/// after `0.7 + 0.2 * jitter` of its life (`jitter` in 0..=1), as
/// upstream's `nextRotationDeadline`.
pub fn deadline(
    not_before: OffsetDateTime,
    not_after: OffsetDateTime,
    jitter: f64,
) -> OffsetDateTime {
    let life = (not_after - not_before).max(time::Duration::ZERO);
    not_before + life * (0.7 + 0.2 * jitter.clamp(0.0, 1.0))
}

/// A new key and a request for node `node_name`'s client certificate
/// (CN `system:node:NAME`, O `system:nodes`), both PEM.
pub fn request(node_name: &str) -> Result<(String, String)> {
    let key = rcgen::KeyPair::generate().map_err(Error::Request)?;
    let mut params = rcgen::CertificateParams::default();
    params.distinguished_name.push(
        rcgen::DnType::CommonName,
        format!("system:node:{node_name}"),
    );
    params
        .distinguished_name
        .push(rcgen::DnType::OrganizationName, "system:nodes");
    let csr = params.serialize_request(&key).map_err(Error::Request)?;
    Ok((key.serialize_pem(), csr.pem().map_err(Error::Request)?))
}

/// A new client certificate for node `node_name`: a new key and a
/// CertificateSigningRequest (signer [`SIGNER`]) created through `client`,
/// waited for until issued (at most `timeout`), the pair checked to fit.
/// Used to renew a node's certificate and, with a bootstrap token's
/// client, to get a joining node's first one.
pub async fn issue(client: &kube::Client, node_name: &str, timeout: Duration) -> Result<Issued> {
    let (key_pem, request_pem) = request(node_name)?;
    let api: Api<CertificateSigningRequest> = Api::all(client.clone());
    let csr = CertificateSigningRequest {
        metadata: ObjectMeta {
            generate_name: Some("csr-".into()),
            ..ObjectMeta::default()
        },
        spec: CertificateSigningRequestSpec {
            request: k8s_openapi::ByteString(request_pem.into_bytes()),
            signer_name: SIGNER.into(),
            usages: Some(vec!["digital signature".into(), "client auth".into()]),
            ..CertificateSigningRequestSpec::default()
        },
        ..CertificateSigningRequest::default()
    };
    let created = api
        .create(&PostParams::default(), &csr)
        .await
        .map_err(Error::Api)?;
    let name = created.metadata.name.clone().unwrap_or_default();
    tracing::info!(csr = %name, "requested a new client certificate");
    let settled = |csr: Option<&CertificateSigningRequest>| match csr {
        None => true,
        Some(csr) => {
            let status = csr.status.as_ref();
            status
                .and_then(|s| s.certificate.as_ref())
                .is_some_and(|c| !c.0.is_empty())
                || status.and_then(|s| s.conditions.as_ref()).is_some_and(|c| {
                    c.iter()
                        .any(|c| (c.type_ == "Denied" || c.type_ == "Failed") && c.status == "True")
                })
        }
    };
    let waited = tokio::time::timeout(
        timeout,
        kube::runtime::wait::await_condition(api, &name, settled),
    )
    .await
    .map_err(|_| Error::Timeout(name.clone(), timeout))?
    .map_err(Error::Wait)?;
    let Some(done) = waited else {
        return Err(Error::Refused {
            name,
            how: "deleted",
        });
    };
    let Some(cert) = done
        .status
        .as_ref()
        .and_then(|s| s.certificate.as_ref())
        .filter(|c| !c.0.is_empty())
    else {
        let denied = done
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Denied"));
        return Err(Error::Refused {
            name,
            how: if denied { "denied" } else { "failed" },
        });
    };
    let cert_pem = String::from_utf8_lossy(&cert.0).into_owned();
    // Checked before anything is written: a pair that does not fit is
    // never put on disk.
    certified(&cert_pem, &key_pem)?;
    Ok(Issued {
        cert_pem,
        key_pem,
        request: name,
    })
}

/// What [`issue`] got: the certificate and its key (PEM) and the
/// request's name.
#[derive(Clone)]
pub struct Issued {
    pub cert_pem: String,
    pub key_pem: String,
    pub request: String,
}

impl std::fmt::Debug for Issued {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Issued")
            .field("request", &self.request)
            .finish_non_exhaustive()
    }
}

/// "What time is it" for the rotation; tests move it.
pub type Now = Arc<dyn Fn() -> OffsetDateTime + Send + Sync>;

/// A node's client certificate rotation.
pub struct Rotation {
    client: kube::Client,
    node_name: String,
    location: Location,
    cert: Arc<ClientCert>,
    now: Now,
    jitter: f64,
    issue_timeout: Duration,
}

impl std::fmt::Debug for Rotation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Rotation")
            .field("node_name", &self.node_name)
            .field("location", &self.location)
            .finish_non_exhaustive()
    }
}

impl Rotation {
    /// Rotates `cert` (kept at `location`) for node `node_name`, asking
    /// through `client`.
    pub fn new(
        client: kube::Client,
        node_name: &str,
        location: Location,
        cert: Arc<ClientCert>,
    ) -> Self {
        Self {
            client,
            node_name: node_name.to_string(),
            location,
            cert,
            now: Arc::new(OffsetDateTime::now_utc),
            jitter: rand::random::<f64>(),
            issue_timeout: ISSUE_TIMEOUT,
        }
    }

    /// With another clock.
    pub fn with_clock(mut self, now: Now) -> Self {
        self.now = now;
        self
    }

    /// With a fixed jitter (0..=1) instead of a random one.
    pub fn with_jitter(mut self, jitter: f64) -> Self {
        self.jitter = jitter;
        self
    }

    /// When the certificate presented now is due for renewal.
    pub fn next_deadline(&self) -> Result<OffsetDateTime> {
        let info = authority::inspect(self.cert.certificate_pem().as_bytes())
            .map_err(Error::Certificate)?;
        Ok(deadline(info.not_before, info.not_after, self.jitter))
    }

    /// Renews the certificate now: a new key and request, waited for
    /// until issued, written where the kubeconfig keeps it, presented
    /// from the next connection. Returns the request's name.
    pub async fn rotate(&self) -> Result<String> {
        let issued = issue(&self.client, &self.node_name, self.issue_timeout).await?;
        kubeconfig::write(&self.location, &issued.cert_pem, &issued.key_pem)
            .map_err(Error::Write)?;
        self.cert.set(&issued.cert_pem, &issued.key_pem)?;
        tracing::info!(csr = %issued.request, "rotated the client certificate");
        Ok(issued.request)
    }

    /// Whether the certificate presented now is this node's own
    /// (`system:node:NAME` in `system:nodes`): only that one is rotated,
    /// never, say, an admin's certificate an agent was started with.
    pub fn is_own(&self) -> bool {
        authority::inspect(self.cert.certificate_pem().as_bytes()).is_ok_and(|info| {
            info.common_name == format!("system:node:{}", self.node_name)
                && info.organizations.iter().any(|o| o == "system:nodes")
        })
    }

    /// Renews the certificate each time it is due, until `shutdown`; does
    /// nothing unless it is the node's own ([`Rotation::is_own`]).
    pub async fn run(self, shutdown: CancellationToken) {
        if !self.is_own() {
            tracing::info!(node = %self.node_name, "the client certificate is not this node's own (system:node:NAME); not rotating it");
            return;
        }
        let mut failures = 0u32;
        loop {
            let wait = match self.next_deadline() {
                Ok(at) => {
                    let left = at - (self.now)();
                    Duration::try_from(left).unwrap_or(Duration::ZERO)
                }
                Err(e) => {
                    tracing::warn!(error = %e, "cannot read the client certificate; not rotating it");
                    return;
                }
            };
            if !wait.is_zero() {
                tracing::info!(in_ = ?wait, "client certificate rotation scheduled");
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    _ = tokio::time::sleep(wait) => {}
                }
                // Woken early by a clock that moved differently: look again.
                if self.next_deadline().is_ok_and(|at| at > (self.now)()) {
                    continue;
                }
            }
            let rotated = tokio::select! {
                _ = shutdown.cancelled() => return,
                r = self.rotate() => r,
            };
            match rotated {
                Ok(_) => failures = 0,
                Err(e) => {
                    failures = failures.saturating_add(1);
                    let backoff = Duration::from_secs(2u64 << failures.min(8).saturating_sub(1))
                        .min(Duration::from_secs(300));
                    tracing::warn!(error = %e, retry_in = ?backoff, "client certificate rotation failed");
                    tokio::select! {
                        _ = shutdown.cancelled() => return,
                        _ = tokio::time::sleep(backoff) => {}
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: i64) -> OffsetDateTime {
        OffsetDateTime::from_unix_timestamp(s).unwrap()
    }

    #[test]
    fn the_deadline_is_70_to_90_percent_of_the_life() {
        let (nb, na) = (at(1_000_000), at(1_000_000 + 1000));
        assert_eq!(deadline(nb, na, 0.0), at(1_000_700));
        assert_eq!(deadline(nb, na, 1.0), at(1_000_900));
        assert_eq!(deadline(nb, na, 0.5), at(1_000_800));
        // Out of range jitter is clamped; a backwards certificate is due
        // at once.
        assert_eq!(deadline(nb, na, 7.0), at(1_000_900));
        assert_eq!(deadline(na, nb, 0.5), na);
    }

    #[test]
    fn the_request_is_a_nodes() {
        let (key, csr) = request("n1").unwrap();
        let parsed = authority::Request::from_pem(csr.as_bytes()).unwrap();
        assert_eq!(parsed.common_name, "system:node:n1");
        assert_eq!(parsed.organizations, ["system:nodes"]);
        assert!(parsed.dns_names.is_empty() && parsed.ip_addresses.is_empty());
        assert!(key.contains("PRIVATE KEY"));
    }

    fn pair(cn: &str) -> (String, String) {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::default();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, cn);
        let cert = params.self_signed(&key).unwrap();
        (cert.pem(), key.serialize_pem())
    }

    #[test]
    fn the_resolver_presents_the_pair_set_last_and_refuses_a_misfit() {
        let (c1, k1) = pair("one");
        let (c2, k2) = pair("two");
        let cell = ClientCert::new(&c1, &k1).unwrap();
        let first = cell.resolve(&[], &[]).unwrap().cert[0].clone();
        assert!(
            cell.set(&c2, &k1).is_err(),
            "a key that is not the certificate's"
        );
        assert_eq!(cell.resolve(&[], &[]).unwrap().cert[0], first);
        cell.set(&c2, &k2).unwrap();
        assert_ne!(cell.resolve(&[], &[]).unwrap().cert[0], first);
        assert_eq!(cell.certificate_pem(), c2);
    }
}
