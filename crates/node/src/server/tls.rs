//! The agent endpoint's TLS: a serving certificate the agent makes for
//! itself on first start (self-signed, as the kubelet's without
//! `--tls-cert-file`: the API server does not verify it by default),
//! kept as `kubelet.crt`/`kubelet.key` in the agent's PKI directory, and
//! a rustls configuration that requires a client certificate signed by
//! the cluster's client CA.
//!
//! It must not issue client certificates or touch the cluster CA.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rcgen::{
    CertificateParams, DnType, ExtendedKeyUsagePurpose, KeyPair, KeyUsagePurpose, SanType,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;

/// The serving certificate's file in the PKI directory (the kubelet's name).
pub const SERVING_CERT: &str = "kubelet.crt";
/// Its key.
pub const SERVING_KEY: &str = "kubelet.key";

/// Why the endpoint's TLS could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot read or write {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot create the serving certificate: {0}")]
    Certificate(#[source] rcgen::Error),
    #[error("bad PEM in {what}: {source}")]
    Pem {
        what: &'static str,
        #[source]
        source: rustls::pki_types::pem::Error,
    },
    #[error("the client CA bundle holds no certificate")]
    NoClientCa,
    #[error("TLS configuration: {0}")]
    Tls(#[from] rustls::Error),
    #[error("client certificate verifier: {0}")]
    Verifier(#[from] rustls::server::VerifierBuilderError),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| Error::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn write_file(path: &Path, contents: &str, private: bool) -> Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .mode(if private { 0o600 } else { 0o644 })
        .open(path)
        .map_err(io_error(path))?;
    file.write_all(contents.as_bytes())
        .map_err(io_error(path))?;
    file.sync_all().map_err(io_error(path))
}

/// The serving certificate and key (PEM) under `pki_dir`, made if
/// either is missing: CN `<node>@<unix time>` as the kubelet's, for
/// `node_name`, localhost and the loopback addresses plus `ips`.
pub fn ensure_serving_cert(
    pki_dir: &Path,
    node_name: &str,
    ips: &[IpAddr],
) -> Result<(String, String)> {
    let cert_path = pki_dir.join(SERVING_CERT);
    let key_path = pki_dir.join(SERVING_KEY);
    if cert_path.exists() && key_path.exists() {
        let cert = std::fs::read_to_string(&cert_path).map_err(io_error(&cert_path))?;
        let key = std::fs::read_to_string(&key_path).map_err(io_error(&key_path))?;
        return Ok((cert, key));
    }
    std::fs::create_dir_all(pki_dir).map_err(io_error(pki_dir))?;
    let mut names = vec!["localhost".to_string()];
    if !node_name.is_empty() && node_name != "localhost" {
        names.insert(0, node_name.to_string());
    }
    let mut params = CertificateParams::new(names).map_err(Error::Certificate)?;
    let mut all_ips = vec![
        IpAddr::V4(std::net::Ipv4Addr::LOCALHOST),
        IpAddr::V6(std::net::Ipv6Addr::LOCALHOST),
    ];
    for ip in ips {
        if !all_ips.contains(ip) && !ip.is_unspecified() {
            all_ips.push(*ip);
        }
    }
    params
        .subject_alt_names
        .extend(all_ips.into_iter().map(SanType::IpAddress));
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    params
        .distinguished_name
        .push(DnType::CommonName, format!("{node_name}@{now}"));
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    let key = KeyPair::generate().map_err(Error::Certificate)?;
    let cert = params.self_signed(&key).map_err(Error::Certificate)?;
    let (cert, key) = (cert.pem(), key.serialize_pem());
    write_file(&key_path, &key, true)?;
    write_file(&cert_path, &cert, false)?;
    Ok((cert, key))
}

/// A rustls server configuration serving `cert_pem`/`key_pem` that
/// refuses any client without a certificate signed by `client_ca_pem`.
pub fn server_config(
    cert_pem: &str,
    key_pem: &str,
    client_ca_pem: &str,
) -> Result<Arc<rustls::ServerConfig>> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    for ca in CertificateDer::pem_slice_iter(client_ca_pem.as_bytes()) {
        roots.add(ca.map_err(|source| Error::Pem {
            what: "the client CA",
            source,
        })?)?;
    }
    if roots.is_empty() {
        return Err(Error::NoClientCa);
    }
    let verifier =
        WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone()).build()?;
    let certs = CertificateDer::pem_slice_iter(cert_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|source| Error::Pem {
            what: "the serving certificate",
            source,
        })?;
    let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).map_err(|source| Error::Pem {
        what: "the serving key",
        source,
    })?;
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_client_cert_verifier(verifier)
        .with_single_cert(certs, key)?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn makes_the_serving_certificate_once() {
        let dir = tempfile::tempdir().unwrap();
        let pki = dir.path().join("pki");
        let ip: IpAddr = "10.0.0.5".parse().unwrap();
        let (cert, key) = ensure_serving_cert(&pki, "node-a", &[ip]).unwrap();
        let again = ensure_serving_cert(&pki, "node-a", &[]).unwrap();
        assert_eq!(again, (cert.clone(), key.clone()));
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(pki.join(SERVING_KEY))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        assert!(cert.starts_with("-----BEGIN CERTIFICATE-----"));
        // Any CA will do for building; an empty bundle will not.
        assert!(matches!(
            server_config(&cert, &key, ""),
            Err(Error::NoClientCa)
        ));
        assert!(server_config(&cert, &key, &cert).is_ok());
    }
}
