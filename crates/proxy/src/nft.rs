//! The boundary to the kernel: [`Nft`] applies a batch of nft commands as
//! one transaction (all or nothing) and removes the table. [`NftCommand`]
//! runs Debian's `nft -f -`, the way upstream's knftables drives nftables
//! (nft parses and validates the batch and commits it atomically through
//! netlink); [`FakeNft`] records the batches for unit tests.
//!
//! It must not build rules (see [`crate::rules`]).

use std::io::Write as _;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};

/// Errors from nft.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot run {program}: {source}")]
    Spawn {
        program: String,
        #[source]
        source: std::io::Error,
    },
    #[error("nft refused the batch: {0}")]
    Refused(String),
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// How long one nft run may take.
const TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// Applies nft batches.
pub trait Nft: Send + Sync + std::fmt::Debug {
    /// Runs `script` (nft commands, one per line) as one transaction.
    fn apply(&self, script: &str) -> Result<()>;
    /// Removes `ip <table>`; a missing table is not an error.
    fn delete_table(&self, table: &str) -> Result<()>;
}

/// The real nft binary, optionally behind a prefix (`ip netns exec NS`).
#[derive(Debug, Clone)]
pub struct NftCommand {
    pub argv: Vec<String>,
}

impl Default for NftCommand {
    fn default() -> Self {
        Self {
            argv: vec!["nft".into()],
        }
    }
}

impl NftCommand {
    /// nft run as `prefix… nft`.
    pub fn with_prefix(prefix: &[&str]) -> Self {
        let mut argv: Vec<String> = prefix.iter().map(|s| s.to_string()).collect();
        argv.push("nft".into());
        Self { argv }
    }

    fn run(&self, args: &[&str], stdin: Option<&str>) -> Result<()> {
        let program = PathBuf::from(&self.argv[0]);
        let mut cmd = Command::new(&program);
        cmd.args(&self.argv[1..])
            .args(args)
            .stdin(if stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let spawn = |source| Error::Spawn {
            program: program.display().to_string(),
            source,
        };
        let mut child = cmd.spawn().map_err(spawn)?;
        if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
            if let Err(e) = pipe.write_all(text.as_bytes()) {
                let _ = child.kill();
                let _ = child.wait();
                return Err(spawn(e));
            }
        }
        // nft never takes long; one that hangs is killed, not waited on
        // forever (the proxy's loop and shutdown wait for it).
        let deadline = std::time::Instant::now() + TIMEOUT;
        let mut pause = std::time::Duration::from_micros(50);
        loop {
            match child.try_wait().map_err(spawn)? {
                Some(_) => break,
                None if std::time::Instant::now() > deadline => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(Error::Refused(format!("nft took more than {TIMEOUT:?}")));
                }
                None => {
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(std::time::Duration::from_millis(2));
                }
            }
        }
        let out = child.wait_with_output().map_err(spawn)?;
        if out.status.success() {
            Ok(())
        } else {
            Err(Error::Refused(
                String::from_utf8_lossy(&out.stderr).trim().to_string(),
            ))
        }
    }
}

impl Nft for NftCommand {
    fn apply(&self, script: &str) -> Result<()> {
        self.run(&["-f", "-"], Some(script))
    }

    fn delete_table(&self, table: &str) -> Result<()> {
        // `destroy` is newer than Debian 12's nft: add then delete is the
        // same in one batch and never fails on a missing table.
        self.apply(&format!("add table ip {table}\ndelete table ip {table}\n"))
    }
}

/// Records batches; fails the next ones when told to.
#[derive(Debug, Clone, Default)]
pub struct FakeNft {
    pub batches: Arc<Mutex<Vec<String>>>,
    pub fail_next: Arc<Mutex<usize>>,
}

impl FakeNft {
    pub fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.batches.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

impl Nft for FakeNft {
    fn apply(&self, script: &str) -> Result<()> {
        let mut fail = self.fail_next.lock().unwrap_or_else(|e| e.into_inner());
        if *fail > 0 {
            *fail -= 1;
            return Err(Error::Refused("told to fail".into()));
        }
        self.batches
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(script.to_string());
        Ok(())
    }

    fn delete_table(&self, table: &str) -> Result<()> {
        self.apply(&format!("delete table ip {table}\n"))
    }
}
