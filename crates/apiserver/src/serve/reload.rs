//! The API server's serving certificate, read again from its files when
//! they change: a rustls [`ResolvesServerCert`] that, at most every
//! [`CHECK_EVERY`], compares the certificate's and key's modification
//! times with the ones it loaded and, when they differ, loads the pair
//! again (kept only if the key matches the certificate). So `skiff certs
//! renew` takes effect on the next handshakes without a restart, and
//! connections already open keep theirs.
//!
//! This module owns only that reload; it writes no file, and a pair that
//! does not load leaves the previous one served (and a warning logged).

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

/// How often the files are looked at, at most.
pub const CHECK_EVERY: Duration = Duration::from_secs(2);

/// Why a certificate and key could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file could not be read.
    #[error("cannot read {path}")]
    Read {
        /// Which.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Not PEM.
    #[error("bad PEM in {path}")]
    Pem {
        /// Which.
        path: PathBuf,
        /// Why.
        #[source]
        source: rustls::pki_types::pem::Error,
    },
    /// The key is unusable or not the certificate's.
    #[error("the key does not fit the certificate")]
    Key(#[source] rustls::Error),
}

struct Loaded {
    key: Arc<CertifiedKey>,
    mtimes: (Option<SystemTime>, Option<SystemTime>),
    checked: Instant,
}

/// Serves the certificate in `cert` with the key in `key`, following
/// changes to the files.
pub struct ReloadingCert {
    cert: PathBuf,
    key: PathBuf,
    provider: Arc<CryptoProvider>,
    every: Duration,
    loaded: Mutex<Loaded>,
}

impl std::fmt::Debug for ReloadingCert {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReloadingCert")
            .field("cert", &self.cert)
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

fn mtime(path: &std::path::Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

fn load(
    cert: &std::path::Path,
    key: &std::path::Path,
    provider: &CryptoProvider,
) -> Result<CertifiedKey, Error> {
    let read = |path: &std::path::Path| {
        std::fs::read(path).map_err(|source| Error::Read {
            path: path.to_path_buf(),
            source,
        })
    };
    let pem_error = |path: &std::path::Path| {
        let path = path.to_path_buf();
        move |source| Error::Pem { path, source }
    };
    let chain = CertificateDer::pem_slice_iter(&read(cert)?)
        .collect::<Result<Vec<_>, _>>()
        .map_err(pem_error(cert))?;
    let private = PrivateKeyDer::from_pem_slice(&read(key)?).map_err(pem_error(key))?;
    if chain.is_empty() {
        return Err(Error::Key(rustls::Error::NoCertificatesPresented));
    }
    CertifiedKey::from_der(chain, private, provider).map_err(Error::Key)
}

impl ReloadingCert {
    /// Loads `cert` and `key` now (an error if they do not load), then
    /// follows them, looking at most every `every`.
    pub fn new(
        cert: PathBuf,
        key: PathBuf,
        provider: Arc<CryptoProvider>,
        every: Duration,
    ) -> Result<Self, Error> {
        let mtimes = (mtime(&cert), mtime(&key));
        let loaded = load(&cert, &key, &provider)?;
        Ok(Self {
            loaded: Mutex::new(Loaded {
                key: Arc::new(loaded),
                mtimes,
                checked: Instant::now(),
            }),
            cert,
            key,
            provider,
            every,
        })
    }

    /// The pair served now, loading it again first if the files changed
    /// and the last look is older than the period.
    pub fn current(&self) -> Arc<CertifiedKey> {
        let mut loaded = self.loaded.lock().unwrap_or_else(|e| e.into_inner());
        if loaded.checked.elapsed() >= self.every {
            loaded.checked = Instant::now();
            let mtimes = (mtime(&self.cert), mtime(&self.key));
            if mtimes != loaded.mtimes {
                match load(&self.cert, &self.key, &self.provider) {
                    Ok(new) => {
                        loaded.key = Arc::new(new);
                        loaded.mtimes = mtimes;
                        tracing::info!(cert = %self.cert.display(), "serving certificate reloaded");
                    }
                    // Half-written (a key and certificate written one
                    // after the other) or broken: the old pair stays, and
                    // the next look tries again.
                    Err(e) => {
                        tracing::warn!(cert = %self.cert.display(), error = %e, "serving certificate not reloaded")
                    }
                }
            }
        }
        loaded.key.clone()
    }
}

impl ResolvesServerCert for ReloadingCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(cn: &str) -> (String, String) {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec![cn.to_string()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        (cert.pem(), key.serialize_pem())
    }

    #[test]
    fn a_changed_pair_is_served_after_the_period_and_a_broken_one_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let (cert, key) = (dir.path().join("a.crt"), dir.path().join("a.key"));
        let (c1, k1) = pair("one");
        std::fs::write(&cert, &c1).unwrap();
        std::fs::write(&key, &k1).unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let reloading =
            ReloadingCert::new(cert.clone(), key.clone(), provider, Duration::ZERO).unwrap();
        let first = reloading.current().cert[0].clone();
        // A certificate without its key: the old pair stays.
        let (c2, k2) = pair("two");
        std::fs::write(&cert, &c2).unwrap();
        let mtime = SystemTime::now() + Duration::from_secs(5);
        std::fs::File::options()
            .write(true)
            .open(&cert)
            .unwrap()
            .set_modified(mtime)
            .unwrap();
        assert_eq!(reloading.current().cert[0], first);
        // With its key: the new pair.
        std::fs::write(&key, &k2).unwrap();
        std::fs::File::options()
            .write(true)
            .open(&key)
            .unwrap()
            .set_modified(mtime)
            .unwrap();
        let second = reloading.current().cert[0].clone();
        assert_ne!(second, first);
        assert_eq!(
            second.as_ref(),
            CertificateDer::from_pem_slice(c2.as_bytes())
                .unwrap()
                .as_ref()
        );
    }
}
