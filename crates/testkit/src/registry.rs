//! A private image registry (Debian's `docker-registry`, the CNCF
//! distribution registry) on a free 127.0.0.1 port with its own storage
//! dir, plain HTTP and no auth, for image-pull tests; images are pushed to
//! it with `skopeo`.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::free_port;

/// Why the registry could not be started, or an image not pushed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0} not found (install Debian's {1} package; see scripts/deps.sh)")]
    NotInstalled(PathBuf, &'static str),
    #[error("cannot start the registry: {0}")]
    Io(#[from] std::io::Error),
    #[error(
        "the registry on {addr} did not answer GET /v2/ with 200 within {after:?}; its log:\n{log}"
    )]
    NotReady {
        addr: String,
        after: Duration,
        log: String,
    },
    #[error("skopeo copy of {archive} to {dest} failed ({status}): {stderr}")]
    Push {
        archive: String,
        dest: String,
        status: String,
        stderr: String,
    },
    #[error("skopeo copy of {archive} to {dest} did not finish within {after:?}: {stderr}")]
    PushTimeout {
        archive: String,
        dest: String,
        after: Duration,
        stderr: String,
    },
}

/// A running registry; killed (and its storage removed) on drop.
#[derive(Debug)]
pub struct Registry {
    child: Option<Child>,
    addr: String,
    dir: tempfile::TempDir,
}

const BINARY: &str = "/usr/bin/docker-registry";
const SKOPEO: &str = "/usr/bin/skopeo";
const READY_TIMEOUT: Duration = Duration::from_secs(20);
const PUSH_TIMEOUT: Duration = Duration::from_secs(60);
const ATTEMPTS: usize = 3;

impl Registry {
    /// Starts a registry and waits until it answers; panics if it cannot
    /// (tests want a registry or a clear failure). See [`Registry::try_start`].
    pub fn start() -> Self {
        match Self::try_start() {
            Ok(r) => r,
            Err(e) => panic!("{e}"),
        }
    }

    /// Starts a registry on a free port and waits (at most 20 s) until
    /// `GET /v2/` answers 200.
    pub fn try_start() -> Result<Self, Error> {
        let binary =
            PathBuf::from(std::env::var("SKIFF_REGISTRY").unwrap_or_else(|_| BINARY.into()));
        if !binary.exists() {
            return Err(Error::NotInstalled(binary, "docker-registry"));
        }
        let mut last = None;
        // A port picked as free can be taken by a parallel test before the
        // registry binds it; then it exits and we try a new port.
        for _ in 0..ATTEMPTS {
            match Self::try_once(&binary) {
                Ok(r) => return Ok(r),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or(Error::NotReady {
            addr: String::new(),
            after: READY_TIMEOUT,
            log: String::new(),
        }))
    }

    fn try_once(binary: &Path) -> Result<Self, Error> {
        let dir = tempfile::Builder::new()
            .prefix("skiff-registry-")
            .tempdir()?;
        let addr = format!("127.0.0.1:{}", free_port()?);
        let storage = dir.path().join("storage");
        std::fs::create_dir_all(&storage)?;
        let config = dir.path().join("config.yml");
        std::fs::write(
            &config,
            format!(
                "version: 0.1\n\
                 log:\n  level: warn\n  accesslog:\n    disabled: true\n\
                 storage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\n\
                 http:\n  addr: {addr}\n",
                storage.display()
            ),
        )?;
        let log = std::fs::File::create(dir.path().join("registry.log"))?;
        let child = Command::new(binary)
            .arg("serve")
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()?;
        let mut registry = Self {
            child: Some(child),
            addr,
            dir,
        };
        registry.wait_ready()?;
        Ok(registry)
    }

    fn wait_ready(&mut self) -> Result<(), Error> {
        let deadline = Instant::now() + READY_TIMEOUT;
        let mut backoff = Duration::from_millis(20);
        loop {
            let exited = match self.child.as_mut() {
                Some(c) => c.try_wait()?.is_some(),
                None => true,
            };
            if !exited && get_status(&self.addr, "/v2/") == Some(200) {
                return Ok(());
            }
            if exited || Instant::now() > deadline {
                return Err(Error::NotReady {
                    addr: self.addr.clone(),
                    after: READY_TIMEOUT,
                    log: self.log(),
                });
            }
            // Retry interval while polling for readiness, not a fixed wait.
            std::thread::sleep(backoff);
            backoff = (backoff * 2).min(Duration::from_millis(200));
        }
    }

    /// `127.0.0.1:PORT`, the host part of image names in this registry.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// The registry's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("registry.log")).unwrap_or_default()
    }

    /// Whether the process is still running.
    pub fn running(&mut self) -> bool {
        matches!(self.child.as_mut().map(Child::try_wait), Some(Ok(None)))
    }

    /// Kills the registry (SIGKILL to its PID) and waits for it; from then
    /// on its port refuses connections. Idempotent.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Pushes the OCI image-layout archive `archive` (one manifest in its
    /// index) as `ADDR/name_tag` (e.g. `test/busybox:v1`) with
    /// `skopeo copy`, over plain HTTP, within 60 s.
    pub fn push(&self, archive: &Path, name_tag: &str) -> Result<(), Error> {
        let skopeo = PathBuf::from(SKOPEO);
        if !skopeo.exists() {
            return Err(Error::NotInstalled(skopeo, "skopeo"));
        }
        let dest = format!("docker://{}/{name_tag}", self.addr);
        let err_path = self
            .dir
            .path()
            .join(format!("skopeo-{}.err", name_tag.replace(['/', ':'], "_")));
        let stderr_file = std::fs::File::create(&err_path)?;
        // oci-archive:PATH with no reference takes the index's only
        // manifest. --insecure-policy: no signature policy for test images.
        let mut child = Command::new(&skopeo)
            .args([
                "--insecure-policy",
                "copy",
                "--quiet",
                "--dest-tls-verify=false",
            ])
            .arg(format!("oci-archive:{}", archive.display()))
            .arg(&dest)
            .env("TMPDIR", self.dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr_file)
            .spawn()?;
        let deadline = Instant::now() + PUSH_TIMEOUT;
        let status = loop {
            if let Some(status) = child.try_wait()? {
                break status;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                return Err(Error::PushTimeout {
                    archive: archive.display().to_string(),
                    dest,
                    after: PUSH_TIMEOUT,
                    stderr: std::fs::read_to_string(&err_path).unwrap_or_default(),
                });
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        if !status.success() {
            return Err(Error::Push {
                archive: archive.display().to_string(),
                dest,
                status: status.to_string(),
                stderr: std::fs::read_to_string(&err_path).unwrap_or_default(),
            });
        }
        Ok(())
    }

    /// Whether the registry has a manifest for `name:tag` (HEAD-like GET of
    /// /v2/NAME/manifests/TAG answering 200).
    pub fn has(&self, name: &str, tag: &str) -> bool {
        get_status(&self.addr, &format!("/v2/{name}/manifests/{tag}")) == Some(200)
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The status code of `GET path` over plain HTTP/1.0, or `None` when the
/// server cannot be reached or does not answer HTTP.
fn get_status(addr: &str, path: &str) -> Option<u16> {
    let sock = addr.parse().ok()?;
    let mut s = TcpStream::connect_timeout(&sock, Duration::from_secs(1)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    s.set_write_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.0\r\nHost: {addr}\r\nAccept: application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json\r\n\r\n"
    )
    .ok()?;
    let mut head = [0u8; 16];
    let mut n = 0;
    while n < head.len() {
        match s.read(&mut head[n..]) {
            Ok(0) | Err(_) => break,
            Ok(k) => n += k,
        }
    }
    // "HTTP/1.1 200 OK"
    let text = std::str::from_utf8(&head[..n]).ok()?;
    text.split_whitespace().nth(1)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starts_answers_and_stops() {
        if !Path::new(BINARY).exists() {
            eprintln!("skipped: no {BINARY} (install docker-registry)");
            return;
        }
        let mut r = Registry::start();
        assert!(r.addr().starts_with("127.0.0.1:"));
        assert_eq!(get_status(r.addr(), "/v2/"), Some(200));
        assert!(!r.has("nothing", "here"));
        let addr = r.addr().to_owned();
        r.stop();
        assert!(!r.running());
        assert_eq!(get_status(&addr, "/v2/"), None);
    }
}
