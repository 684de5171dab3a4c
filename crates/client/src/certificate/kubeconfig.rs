//! The client certificate of a kubeconfig: where it is (inline data or
//! files beside the kubeconfig) and writing a new one there, each file
//! replaced atomically (a new file renamed over the old), so a reader
//! sees the old pair or the new one.
//!
//! This module owns only reading and rewriting those fields; it signs
//! nothing and keeps everything else in the kubeconfig as it was.

use std::path::{Path, PathBuf};

use base64::Engine as _;

/// Why a kubeconfig's client certificate could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The kubeconfig is not readable as one.
    #[error("cannot read kubeconfig {path}")]
    Kubeconfig {
        /// Which.
        path: PathBuf,
        /// Why.
        #[source]
        source: kube::config::KubeconfigError,
    },
    /// A file could not be read or written.
    #[error("cannot read or write {path}")]
    Io {
        /// Which.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Inline data that is not base64.
    #[error("the kubeconfig's {0} is not base64")]
    Base64(&'static str),
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Where a kubeconfig keeps its client certificate and key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// `client-certificate-data` and `client-key-data` in the kubeconfig
    /// file itself.
    Inline(PathBuf),
    /// `client-certificate` and `client-key` files.
    Files {
        /// The certificate's file.
        cert: PathBuf,
        /// The key's file.
        key: PathBuf,
    },
}

/// A client certificate and key, PEM, and where they came from.
#[derive(Debug, Clone)]
pub struct ClientCredential {
    /// Where they are kept.
    pub location: Location,
    /// The certificate, PEM.
    pub cert_pem: String,
    /// The key, PEM.
    pub key_pem: String,
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| Error::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn decode(data: &str, what: &'static str) -> Result<String> {
    let raw = base64::engine::general_purpose::STANDARD
        .decode(data.trim())
        .map_err(|_| Error::Base64(what))?;
    Ok(String::from_utf8_lossy(&raw).into_owned())
}

/// The client certificate of the current context's user of the
/// kubeconfig at `path`, if it has one (a token user has none).
pub fn read(path: &Path) -> Result<Option<ClientCredential>> {
    let kc = kube::config::Kubeconfig::read_from(path).map_err(|source| Error::Kubeconfig {
        path: path.to_path_buf(),
        source,
    })?;
    let current = kc.current_context.clone().unwrap_or_default();
    let user = kc
        .contexts
        .iter()
        .find(|c| c.name == current)
        .and_then(|c| c.context.as_ref())
        .and_then(|c| c.user.clone());
    let Some(auth) = kc
        .auth_infos
        .iter()
        .find(|a| Some(&a.name) == user.as_ref())
        .and_then(|a| a.auth_info.as_ref())
    else {
        return Ok(None);
    };
    let base = path.parent().unwrap_or(Path::new("."));
    use secrecy::ExposeSecret as _;
    match (
        &auth.client_certificate_data,
        &auth.client_key_data,
        &auth.client_certificate,
        &auth.client_key,
    ) {
        (Some(cert), Some(key), _, _) => Ok(Some(ClientCredential {
            location: Location::Inline(path.to_path_buf()),
            cert_pem: decode(cert, "client-certificate-data")?,
            key_pem: decode(key.expose_secret(), "client-key-data")?,
        })),
        (None, None, Some(cert), Some(key)) => {
            let (cert, key) = (base.join(cert), base.join(key));
            Ok(Some(ClientCredential {
                cert_pem: std::fs::read_to_string(&cert).map_err(io(&cert))?,
                key_pem: std::fs::read_to_string(&key).map_err(io(&key))?,
                location: Location::Files { cert, key },
            }))
        }
        _ => Ok(None),
    }
}

/// Writes `contents` to `path` atomically: a temporary file beside it
/// (mode 0600 for keys and kubeconfigs, 0644 otherwise), synced, renamed
/// over it.
pub fn write_atomic(path: &Path, contents: &[u8], private: bool) -> Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = path.with_file_name(format!(".{name}.tmp-{}", std::process::id()));
    let result = (|| {
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(true)
            .mode(if private { 0o600 } else { 0o644 })
            .open(&tmp)?;
        file.write_all(contents)?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result.map_err(io(path))
}

/// Replaces the value of every `client-certificate-data:` and
/// `client-key-data:` line of `text` (the kubeconfigs Skiff writes have
/// one user).
pub fn replace_inline(text: &str, cert_pem: &str, key_pem: &str) -> String {
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let body = line.trim_end_matches(['\n', '\r']);
        let indent = &body[..body.len() - body.trim_start().len()];
        let field = body.trim_start();
        let newline = &line[body.len()..];
        if field.starts_with("client-certificate-data:") {
            out.push_str(&format!(
                "{indent}client-certificate-data: {}{newline}",
                b64(cert_pem)
            ));
        } else if field.starts_with("client-key-data:") {
            out.push_str(&format!(
                "{indent}client-key-data: {}{newline}",
                b64(key_pem)
            ));
        } else {
            out.push_str(line);
        }
    }
    out
}

/// Writes a new client certificate and key where `location` keeps them:
/// the key first, so the certificate on disk never names a key that is
/// not there yet.
pub fn write(location: &Location, cert_pem: &str, key_pem: &str) -> Result<()> {
    match location {
        Location::Inline(path) => {
            let text = std::fs::read_to_string(path).map_err(io(path))?;
            write_atomic(
                path,
                replace_inline(&text, cert_pem, key_pem).as_bytes(),
                true,
            )
        }
        Location::Files { cert, key } => {
            write_atomic(key, key_pem.as_bytes(), true)?;
            write_atomic(cert, cert_pem.as_bytes(), false)
        }
    }
}

/// A kubeconfig for `server` trusting `ca_pem`, as `user` with a client
/// certificate and key (PEM): the form of every kubeconfig skiff writes
/// (the server's admin and users', a joined node's).
pub fn text(server: &str, ca_pem: &str, user: &str, cert: &str, key: &str) -> String {
    use base64::Engine as _;
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let user = serde_json::to_string(user).unwrap_or_default();
    format!(
        "apiVersion: v1
kind: Config
clusters:
- name: skiff
  cluster:
    server: {server}
    certificate-authority-data: {ca}
users:
- name: {user}
  user:
    client-certificate-data: {cert}
    client-key-data: {key}
contexts:
- name: skiff
  context:
    cluster: skiff
    user: {user}
current-context: skiff
",
        ca = b64(ca_pem),
        cert = b64(cert),
        key = b64(key),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const KUBECONFIG: &str = "apiVersion: v1
kind: Config
clusters:
- name: skiff
  cluster:
    server: https://127.0.0.1:6443
users:
- name: u
  user:
    client-certificate-data: Y2VydA==
    client-key-data: a2V5
contexts:
- name: skiff
  context:
    cluster: skiff
    user: u
current-context: skiff
";

    #[test]
    fn inline_credentials_are_read_and_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kc");
        std::fs::write(&path, KUBECONFIG).unwrap();
        let cred = read(&path).unwrap().unwrap();
        assert_eq!(
            (cred.cert_pem.as_str(), cred.key_pem.as_str()),
            ("cert", "key")
        );
        write(&cred.location, "new cert", "new key").unwrap();
        let cred = read(&path).unwrap().unwrap();
        assert_eq!(
            (cred.cert_pem.as_str(), cred.key_pem.as_str()),
            ("new cert", "new key")
        );
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("server: https://127.0.0.1:6443\n"));
        assert!(text.ends_with("current-context: skiff\n"));
    }

    #[test]
    fn file_credentials_are_read_and_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kc");
        let text = KUBECONFIG
            .replace(
                "client-certificate-data: Y2VydA==",
                "client-certificate: c.crt",
            )
            .replace("client-key-data: a2V5", "client-key: c.key");
        std::fs::write(&path, text).unwrap();
        std::fs::write(dir.path().join("c.crt"), "cert").unwrap();
        std::fs::write(dir.path().join("c.key"), "key").unwrap();
        let cred = read(&path).unwrap().unwrap();
        assert_eq!(
            cred.location,
            Location::Files {
                cert: dir.path().join("c.crt"),
                key: dir.path().join("c.key")
            }
        );
        write(&cred.location, "new cert", "new key").unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.path().join("c.crt")).unwrap(),
            "new cert"
        );
    }
}
