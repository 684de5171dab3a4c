//! The cluster PKI, created on first start the way kubeadm does: a CA, a
//! serving certificate for the API server (SANs: localhost, 127.0.0.1, ::1,
//! the host name, every host IP and the in-cluster `kubernetes.*` names),
//! an admin client certificate (O=system:masters) written into
//! `<data-dir>/admin.kubeconfig`, and the client certificate the API
//! server presents to node agents (`pods/log`), as kubeadm's
//! `apiserver-kubelet-client`. Later starts load the same files.

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SanType,
};
use skiff_client::certificate::authority::Authority;

/// Why the PKI could not be created or loaded.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot read or write {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot create certificate {what}: {source}")]
    Certificate {
        what: &'static str,
        #[source]
        source: rcgen::Error,
    },
    #[error("cannot sign certificate {what}: {source}")]
    Signing {
        what: &'static str,
        #[source]
        source: skiff_client::certificate::authority::Error,
    },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// PEM material of the cluster PKI.
#[derive(Debug, Clone)]
pub struct Pki {
    pub dir: PathBuf,
    pub ca_cert: String,
    pub serving_cert: String,
    pub serving_key: String,
    pub admin_cert: String,
    pub admin_key: String,
    /// What the API server presents to node agents.
    pub kubelet_client_cert: String,
    pub kubelet_client_key: String,
}

const CA_CERT: &str = "ca.crt";
const CA_KEY: &str = "ca.key";
/// The serving certificate's file under the PKI directory.
pub const SERVING_CERT: &str = "apiserver.crt";
/// Its key's.
pub const SERVING_KEY: &str = "apiserver.key";
const ADMIN_CERT: &str = "admin.crt";
const ADMIN_KEY: &str = "admin.key";
const KUBELET_CLIENT_CERT: &str = "apiserver-kubelet-client.crt";
const KUBELET_CLIENT_KEY: &str = "apiserver-kubelet-client.key";

fn read(dir: &Path, name: &str) -> Result<String> {
    let path = dir.join(name);
    std::fs::read_to_string(&path).map_err(|source| Error::Io { path, source })
}

fn write(dir: &Path, name: &str, contents: &str, private: bool) -> Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let path = dir.join(name);
    let io = |source| Error::Io {
        path: path.clone(),
        source,
    };
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .mode(if private { 0o600 } else { 0o644 })
        .open(&path)
        .map_err(io)?;
    file.write_all(contents.as_bytes()).map_err(io)?;
    file.sync_all().map_err(io)
}

fn cert_error(what: &'static str) -> impl FnOnce(rcgen::Error) -> Error {
    move |source| Error::Certificate { what, source }
}

/// The names and addresses the serving certificate covers.
pub fn serving_names() -> (Vec<String>, Vec<IpAddr>) {
    let mut names = vec![
        "localhost".to_string(),
        "kubernetes".to_string(),
        "kubernetes.default".to_string(),
        "kubernetes.default.svc".to_string(),
        "kubernetes.default.svc.cluster.local".to_string(),
    ];
    if let Ok(host) = std::fs::read_to_string("/proc/sys/kernel/hostname") {
        let host = host.trim().to_string();
        if !host.is_empty() && !names.contains(&host) {
            names.push(host);
        }
    }
    let mut ips: Vec<IpAddr> = vec![
        IpAddr::V4(std::net::Ipv4Addr::LOCALHOST),
        IpAddr::V6(std::net::Ipv6Addr::LOCALHOST),
    ];
    if let Ok(interfaces) = if_addrs::get_if_addrs() {
        for interface in interfaces {
            let ip = interface.ip();
            if !ips.contains(&ip) {
                ips.push(ip);
            }
        }
    }
    (names, ips)
}

fn name(cn: &str, org: Option<&str>) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, cn);
    if let Some(org) = org {
        dn.push(DnType::OrganizationName, org);
    }
    dn
}

/// Makes `params` valid from a minute ago for a year, as kubeadm's
/// certificates (`skiff certs renew` renews them for another).
fn valid_for_a_year(params: &mut CertificateParams) {
    let now = time::OffsetDateTime::now_utc();
    params.not_before = now - time::Duration::minutes(1);
    params.not_after = now + time::Duration::days(365);
}

/// kubeadm's certificate lifetime.
const A_YEAR: std::time::Duration = std::time::Duration::from_secs(365 * 86400);

/// The cluster CA of the PKI under `dir`, as skiff-client's signer.
fn authority(dir: &Path) -> Result<Authority> {
    Authority::from_pem(&read(dir, CA_CERT)?, &read(dir, CA_KEY)?)
        .map_err(|source| Error::Signing { what: "CA", source })
}

/// A new key and a client certificate for `user` (CN) in `groups` (one
/// O each, as upstream's x509 authenticator reads them), signed by the CA
/// and valid from a minute ago (slack for clocks a little behind ours)
/// for `valid_for`, never past the CA; both PEM. skiff-client's CA writes
/// it: rcgen's names keep one O.
pub fn client_cert(
    ca: &Authority,
    user: &str,
    groups: &[&str],
    valid_for: std::time::Duration,
) -> Result<(String, String)> {
    use rcgen::PublicKeyData as _;
    let key = KeyPair::generate().map_err(cert_error("client key"))?;
    let now = time::OffsetDateTime::now_utc();
    let not_after = now
        .checked_add(valid_for.try_into().unwrap_or(time::Duration::MAX))
        .unwrap_or_else(|| ca.not_after());
    let cert = ca
        .client_certificate(
            user,
            groups,
            &key.subject_public_key_info(),
            now - time::Duration::minutes(1),
            not_after,
        )
        .map_err(|source| Error::Signing {
            what: "client",
            source,
        })?;
    Ok((cert, key.serialize_pem()))
}

/// Loads the PKI under `dir`, creating whatever is missing.
pub fn ensure(dir: &Path) -> Result<Pki> {
    ensure_with(dir, &[])
}

/// [`ensure`], a new serving certificate also naming `extra_ips` (the
/// `kubernetes` Service's ClusterIP, which in-cluster clients dial, as
/// kubeadm adds it).
pub fn ensure_with(dir: &Path, extra_ips: &[IpAddr]) -> Result<Pki> {
    std::fs::create_dir_all(dir).map_err(|source| Error::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    if !dir.join(CA_CERT).exists() || !dir.join(CA_KEY).exists() {
        let key = KeyPair::generate().map_err(cert_error("CA key"))?;
        let mut params = CertificateParams::default();
        params.distinguished_name = name("skiff-ca", None);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        params.not_after = rcgen::date_time_ymd(2036, 1, 1);
        let cert = params.self_signed(&key).map_err(cert_error("CA"))?;
        write(dir, CA_KEY, &key.serialize_pem(), true)?;
        write(dir, CA_CERT, &cert.pem(), false)?;
        // A new CA invalidates every certificate it did not sign.
        for stale in [
            SERVING_CERT,
            SERVING_KEY,
            ADMIN_CERT,
            ADMIN_KEY,
            KUBELET_CLIENT_CERT,
            KUBELET_CLIENT_KEY,
        ] {
            let _ = std::fs::remove_file(dir.join(stale));
        }
    }
    let ca_cert = read(dir, CA_CERT)?;
    let ca_key = KeyPair::from_pem(&read(dir, CA_KEY)?).map_err(cert_error("CA key"))?;
    let ca = Issuer::from_ca_cert_pem(&ca_cert, ca_key).map_err(cert_error("CA"))?;

    if !dir.join(SERVING_CERT).exists() || !dir.join(SERVING_KEY).exists() {
        let key = KeyPair::generate().map_err(cert_error("serving key"))?;
        let (names, mut ips) = serving_names();
        ips.extend(
            extra_ips
                .iter()
                .filter(|ip| !ips.contains(ip))
                .collect::<Vec<_>>(),
        );
        let mut params = CertificateParams::new(names).map_err(cert_error("serving"))?;
        params
            .subject_alt_names
            .extend(ips.into_iter().map(SanType::IpAddress));
        params.distinguished_name = name("kube-apiserver", None);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        valid_for_a_year(&mut params);
        let cert = params.signed_by(&key, &ca).map_err(cert_error("serving"))?;
        write(dir, SERVING_KEY, &key.serialize_pem(), true)?;
        write(dir, SERVING_CERT, &cert.pem(), false)?;
    }
    let authority = authority(dir)?;
    if !dir.join(ADMIN_CERT).exists() || !dir.join(ADMIN_KEY).exists() {
        let (cert, key) = client_cert(&authority, "kubernetes-admin", &["system:masters"], A_YEAR)?;
        write(dir, ADMIN_KEY, &key, true)?;
        write(dir, ADMIN_CERT, &cert, false)?;
    }
    if !dir.join(KUBELET_CLIENT_CERT).exists() || !dir.join(KUBELET_CLIENT_KEY).exists() {
        let (cert, key) = client_cert(
            &authority,
            "kube-apiserver-kubelet-client",
            &["system:masters"],
            A_YEAR,
        )?;
        write(dir, KUBELET_CLIENT_KEY, &key, true)?;
        write(dir, KUBELET_CLIENT_CERT, &cert, false)?;
    }
    Ok(Pki {
        dir: dir.to_path_buf(),
        ca_cert,
        serving_cert: read(dir, SERVING_CERT)?,
        serving_key: read(dir, SERVING_KEY)?,
        admin_cert: read(dir, ADMIN_CERT)?,
        admin_key: read(dir, ADMIN_KEY)?,
        kubelet_client_cert: read(dir, KUBELET_CLIENT_CERT)?,
        kubelet_client_key: read(dir, KUBELET_CLIENT_KEY)?,
    })
}

/// An admin kubeconfig for `server` (e.g. `https://127.0.0.1:6443`).
pub fn admin_kubeconfig(pki: &Pki, server: &str) -> String {
    kubeconfig(
        &pki.ca_cert,
        server,
        "skiff-admin",
        &pki.admin_cert,
        &pki.admin_key,
    )
}

/// A kubeconfig for `server` trusting `ca_cert`, as `user_name` with a
/// client certificate and key (PEM): the form every skiff kubeconfig has.
fn kubeconfig(ca_cert: &str, server: &str, user_name: &str, cert: &str, key: &str) -> String {
    skiff_client::certificate::kubeconfig::text(server, ca_cert, user_name, cert, key)
}

/// A kubeconfig for a user of the cluster whose PKI is under `dir`: a
/// new client certificate for `user` in `groups` (the certificate's CN
/// and O, as upstream's x509 authenticator reads them), signed by the
/// cluster CA and valid for `valid_for` from now (kubeadm's `kubeconfig
/// user` gives a year), for `server`. Nothing is written.
pub fn user_kubeconfig(
    dir: &Path,
    server: &str,
    user: &str,
    groups: &[&str],
    valid_for: std::time::Duration,
) -> Result<String> {
    let ca_cert = read(dir, CA_CERT)?;
    let (cert, key) = client_cert(&authority(dir)?, user, groups, valid_for)?;
    Ok(kubeconfig(&ca_cert, server, user, &cert, &key))
}

/// Writes the admin kubeconfig to `path` (mode 0600).
pub fn write_admin_kubeconfig(pki: &Pki, server: &str, path: &Path) -> Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("admin.kubeconfig");
    write(dir, name, &admin_kubeconfig(pki, server), true)
}
