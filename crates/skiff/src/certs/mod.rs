//! The server's certificates, as kubeadm keeps a control plane's: which
//! certificate files and kubeconfigs a data dir holds ([`discover`]),
//! `skiff certs check-expiration` and `skiff certs renew` ([`expiration`],
//! [`renew`]), the log warning before one expires, the cluster CA handed
//! to the csrsigning controller, and the bindings that let nodes have
//! their client certificate requests approved ([`autoapprove`]).
//!
//! This module owns those files' listing and renewal; it creates no PKI
//! (the API server's `serve::pki` does, at first start) and signs with
//! skiff-client's `certificate::authority`. A running server picks up a
//! renewed serving certificate itself (the API server's reloading
//! certificate resolver).

pub mod autoapprove;
pub mod expiration;
pub mod renew;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use skiff_client::certificate::authority::{self, Authority, Info};
use skiff_client::certificate::kubeconfig::{self, Location};

/// Why the data dir's certificates could not be listed or renewed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A directory or file could not be read or written.
    #[error("cannot read or write {path}")]
    Io {
        /// Which.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A certificate could not be read or signed.
    #[error("certificate {name}")]
    Certificate {
        /// Which.
        name: String,
        /// Why.
        #[source]
        source: authority::Error,
    },
    /// A kubeconfig could not be read or written.
    #[error("kubeconfig {name}")]
    Kubeconfig {
        /// Which.
        name: String,
        /// Why.
        #[source]
        source: kubeconfig::Error,
    },
    /// `skiff certs renew NAME` with a name that is not listed.
    #[error("unknown certificate {0:?}; `skiff certs check-expiration` lists them")]
    Unknown(String),
    /// The CA's key is not in the data dir.
    #[error("the CA key {0} is missing: the certificates are managed externally")]
    External(PathBuf),
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Where a listed certificate lives.
#[derive(Debug, Clone)]
pub enum Source {
    /// A `.crt` file under `<data-dir>/pki` (its key beside it, `.key`).
    File(PathBuf),
    /// The client certificate of a kubeconfig in the data dir; `twin` is
    /// the `pki/` file holding the same certificate (the server writes the
    /// admin kubeconfig from `pki/admin.crt` at every start), renewed
    /// with it.
    Kubeconfig {
        /// The kubeconfig.
        path: PathBuf,
        /// Where its certificate is.
        location: Location,
        /// The `pki/` copy.
        twin: Option<PathBuf>,
    },
}

/// One certificate of the data dir.
#[derive(Debug, Clone)]
pub struct Entry {
    /// Its name in the table (a `pki/` file's stem, a kubeconfig's file
    /// name).
    pub name: String,
    /// Where it is.
    pub source: Source,
    /// What it says.
    pub info: Info,
    /// Its PEM.
    pub pem: String,
}

/// The certificates of a data dir: leaf certificates and CAs, each by
/// name.
#[derive(Debug, Clone, Default)]
pub struct Inventory {
    /// Serving and client certificates.
    pub certificates: Vec<Entry>,
    /// Certificate authorities.
    pub authorities: Vec<Entry>,
}

/// The PKI directory of a data dir.
pub fn pki_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("pki")
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| Error::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn sorted_files(dir: &Path, suffix: &str) -> Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = match std::fs::read_dir(dir) {
        Ok(entries) => entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.is_file())
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.ends_with(suffix) && !n.starts_with('.'))
            })
            .collect(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(io(dir)(e)),
    };
    files.sort();
    Ok(files)
}

/// Lists the certificates of `data_dir`: every `pki/*.crt` and the
/// client certificate of every `*.kubeconfig` in the data dir itself (a
/// `pki/` file holding the same certificate as a kubeconfig is listed
/// once, as the kubeconfig, as kubeadm lists `admin.conf`). Files that
/// are not certificates are skipped.
pub fn discover(data_dir: &Path) -> Result<Inventory> {
    let mut inventory = Inventory::default();
    let mut files = Vec::new();
    for path in sorted_files(&pki_dir(data_dir), ".crt")? {
        let pem = std::fs::read_to_string(&path).map_err(io(&path))?;
        let Ok(info) = authority::inspect(pem.as_bytes()) else {
            continue;
        };
        let name = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let entry = Entry {
            name,
            source: Source::File(path),
            info,
            pem,
        };
        if entry.info.is_ca {
            inventory.authorities.push(entry);
        } else {
            files.push(entry);
        }
    }
    for path in sorted_files(data_dir, ".kubeconfig")? {
        let name = path
            .file_name()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let Ok(Some(credential)) = kubeconfig::read(&path) else {
            continue;
        };
        let Ok(info) = authority::inspect(credential.cert_pem.as_bytes()) else {
            continue;
        };
        let twin = files
            .iter()
            .position(|f| same_certificate(&f.pem, &credential.cert_pem))
            .map(|i| files.remove(i))
            .and_then(|f| match f.source {
                Source::File(p) => Some(p),
                Source::Kubeconfig { .. } => None,
            });
        inventory.certificates.push(Entry {
            name,
            source: Source::Kubeconfig {
                path,
                location: credential.location,
                twin,
            },
            info,
            pem: credential.cert_pem,
        });
    }
    inventory.certificates.extend(files);
    inventory.certificates.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(inventory)
}

fn same_certificate(a: &str, b: &str) -> bool {
    let strip = |s: &str| s.split_whitespace().collect::<String>();
    strip(a) == strip(b)
}

/// `skiff certs ...`.
pub fn run(command: crate::cli::CertsCommand) -> anyhow::Result<()> {
    use std::io::Write as _;
    let text = match command {
        crate::cli::CertsCommand::CheckExpiration { data_dir } => expiration::check(&data_dir)?,
        crate::cli::CertsCommand::Renew { which, data_dir } => {
            let mut lines = renew::renew(&data_dir, &which, time::OffsetDateTime::now_utc())?;
            lines.push(String::new());
            lines.join("\n")
        }
    };
    // A closed stdout (`| head`) is not worth a panic.
    let _ = std::io::stdout().write_all(text.as_bytes());
    Ok(())
}

/// The cluster CA of a data dir, for the csrsigning controller of
/// `skiff server` (`None`, logged, when it cannot be read).
pub fn cluster_signing(data_dir: &Path) -> Option<Arc<Authority>> {
    let dir = pki_dir(data_dir);
    match Authority::load(&dir.join("ca.crt"), &dir.join("ca.key")) {
        Ok(ca) => Some(Arc::new(ca)),
        Err(e) => {
            tracing::warn!(error = %e, "cannot load the cluster CA: certificate requests will not be signed");
            None
        }
    }
}
