//! The node agent's own log, as `journalctl -u kubelet` shows upstream's:
//! [`AgentLog`] is a second log destination (beside stderr) that `skiff
//! server` and `skiff agent` write the agent's lines to, in
//! `<agent data dir>/agent.log` (`DIR/node/agent.log` for `skiff server
//! --data-dir DIR`, `DIR/agent.log` for `skiff agent --data-dir DIR`),
//! rotated to `agent.log.1` past [`MAX_BYTES`]; `skiff logs agent` prints
//! it (`--tail N`, `-f` to follow), and `skiff logs containerd` the
//! agent's containerd log the same way.
//!
//! It owns those files' writing and reading only; what goes into them is
//! the tracing subscriber's choice (main.rs).

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The log's file name in the agent's data dir.
pub const FILE: &str = "agent.log";

/// Past this size the log is moved to `agent.log.1` and started anew.
pub const MAX_BYTES: u64 = 50 * 1024 * 1024;

/// Errors of the log files.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("no {what} log under {dir} (looked for {tried})")]
    Missing {
        what: String,
        dir: PathBuf,
        tried: String,
    },
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug)]
struct Inner {
    path: PathBuf,
    /// None until the first line.
    file: Option<File>,
    written: u64,
    /// Whether the first line may make the directory (else lines go to
    /// the file only once someone else made it).
    make_dir: bool,
}

/// The agent's log file, shared by every thread that logs.
#[derive(Clone)]
pub struct AgentLog {
    inner: Arc<Mutex<Inner>>,
}

impl AgentLog {
    /// The log `<dir>/agent.log`, appended to. The file (and `dir`) are
    /// made at the first line written, not here: a server that stops on a
    /// bad flag leaves no data dir behind.
    pub fn new(dir: &Path) -> Self {
        Self {
            inner: Arc::new(Mutex::new(Inner {
                path: dir.join(FILE),
                file: None,
                written: 0,
                make_dir: true,
            })),
        }
    }

    /// [`AgentLog::new`], but lines are kept in the file only once `dir`
    /// exists: an agent joining with a token makes its data dir only when
    /// it has joined (a refused join leaves nothing behind; its lines are
    /// on stderr).
    pub fn in_existing_dir(dir: &Path) -> Self {
        let log = Self::new(dir);
        if let Ok(mut inner) = log.inner.lock() {
            inner.make_dir = false;
        }
        log
    }
}

impl Inner {
    /// The open file, opened (and its dir made) on first use.
    fn file(&mut self) -> std::io::Result<&mut File> {
        if self.file.is_none() {
            if let Some(dir) = self.path.parent() {
                if self.make_dir {
                    std::fs::create_dir_all(dir)?;
                } else if !dir.is_dir() {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::NotFound,
                        "the data dir is not made yet",
                    ));
                }
            }
            let file = OpenOptions::new()
                .create(true)
                .append(true)
                .open(&self.path)?;
            self.written = file.metadata().map(|m| m.len()).unwrap_or(0);
            self.file = Some(file);
        }
        self.file
            .as_mut()
            .ok_or_else(|| std::io::Error::other("agent log not open"))
    }

    /// Moves the full file aside and starts a new one (best effort: on
    /// failure the old one keeps growing).
    fn rotate(&mut self) {
        let old = self.path.with_extension("log.1");
        if std::fs::rename(&self.path, &old).is_err() {
            return;
        }
        if let Ok(file) = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)
        {
            self.file = Some(file);
            self.written = 0;
        }
    }
}

impl std::fmt::Debug for AgentLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        f.debug_struct("AgentLog")
            .field("path", &inner.path)
            .field("written", &inner.written)
            .finish()
    }
}

/// One log line's writer.
#[derive(Debug)]
pub struct LineWriter(Arc<Mutex<Inner>>);

impl Write for LineWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let mut inner = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if inner.written >= MAX_BYTES {
            inner.rotate();
        }
        let n = inner.file()?.write(buf)?;
        inner.written += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for AgentLog {
    type Writer = LineWriter;

    fn make_writer(&'a self) -> Self::Writer {
        LineWriter(self.inner.clone())
    }
}

/// Which log `skiff logs` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Which {
    /// The node agent's (kubelet's) log.
    Agent,
    /// The agent's containerd's log.
    Containerd,
}

/// Where `which` is for a data dir of `skiff server` (`DIR/node/...`) or
/// of `skiff agent` (`DIR/...`): the candidates in order.
pub fn candidates(data_dir: &Path, which: Which) -> Vec<PathBuf> {
    let file = match which {
        Which::Agent => PathBuf::from(FILE),
        Which::Containerd => Path::new("containerd").join("containerd.log"),
    };
    vec![data_dir.join("node").join(&file), data_dir.join(&file)]
}

/// The last `n` lines of `text` (all of it for `None`).
pub fn tail(text: &str, n: Option<usize>) -> &str {
    let Some(n) = n else { return text };
    if n == 0 {
        return "";
    }
    let body = text.strip_suffix('\n').unwrap_or(text);
    let mut start = body.len();
    for _ in 0..n {
        match body.get(..start).and_then(|b| b.rfind('\n')) {
            Some(i) => start = i,
            None => return text,
        }
    }
    text.get(start + 1..).unwrap_or(text)
}

/// `skiff logs`: prints the log, the last `lines` of it, and with
/// `follow` what is written next until interrupted.
pub fn print(data_dir: &Path, which: Which, lines: Option<usize>, follow: bool) -> Result<()> {
    let tried = candidates(data_dir, which);
    let Some(path) = tried.iter().find(|p| p.exists()).cloned() else {
        return Err(Error::Missing {
            what: format!("{which:?}").to_lowercase(),
            dir: data_dir.to_path_buf(),
            tried: tried
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
        });
    };
    let read_err = |source| Error::Read {
        path: path.clone(),
        source,
    };
    let mut file = File::open(&path).map_err(read_err)?;
    let mut text = String::new();
    file.read_to_string(&mut text).map_err(read_err)?;
    let mut out = std::io::stdout().lock();
    // A closed stdout (`| head`) ends the command quietly.
    if out.write_all(tail(&text, lines).as_bytes()).is_err() {
        return Ok(());
    }
    if !follow {
        return Ok(());
    }
    let mut pos = file.stream_position().map_err(read_err)?;
    loop {
        std::thread::sleep(Duration::from_millis(200));
        let len = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        if len < pos {
            // Rotated: read the new file from its start.
            file = File::open(&path).map_err(read_err)?;
            pos = 0;
        }
        file.seek(SeekFrom::Start(pos)).map_err(read_err)?;
        let mut more = Vec::new();
        file.read_to_end(&mut more).map_err(read_err)?;
        pos += more.len() as u64;
        if out.write_all(&more).and_then(|()| out.flush()).is_err() {
            return Ok(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tails() {
        let text = "a\nb\nc\n";
        assert_eq!(tail(text, None), text);
        assert_eq!(tail(text, Some(2)), "b\nc\n");
        assert_eq!(tail(text, Some(5)), text);
        assert_eq!(tail(text, Some(0)), "");
        assert_eq!(tail("a\nb", Some(1)), "b");
    }

    #[test]
    fn a_joining_agent_logs_to_its_file_only_once_the_dir_exists() {
        let dir = tempfile::tempdir().unwrap();
        let dir_path = dir.path().join("agent");
        let log = AgentLog::in_existing_dir(&dir_path);
        let mut w = tracing_subscriber::fmt::MakeWriter::make_writer(&log);
        assert!(w.write_all(b"refused\n").is_err());
        assert!(!dir_path.exists());
        std::fs::create_dir(&dir_path).unwrap();
        w.write_all(b"joined\n").unwrap();
        assert_eq!(
            std::fs::read_to_string(dir_path.join(FILE)).unwrap(),
            "joined\n"
        );
    }

    #[test]
    fn the_log_is_written_and_rotated() {
        let dir = tempfile::tempdir().unwrap();
        let dir_path = dir.path().join("node");
        let log = AgentLog::new(&dir_path);
        // Nothing is made before the first line.
        assert!(!dir_path.exists());
        let mut w = tracing_subscriber::fmt::MakeWriter::make_writer(&log);
        w.write_all(b"first line\n").unwrap();
        log.inner.lock().unwrap().written = MAX_BYTES;
        w.write_all(b"second line\n").unwrap();
        let now = std::fs::read_to_string(dir_path.join(FILE)).unwrap();
        let old = std::fs::read_to_string(dir_path.join("agent.log.1")).unwrap();
        assert_eq!(
            (old.as_str(), now.as_str()),
            ("first line\n", "second line\n")
        );
        assert_eq!(
            candidates(Path::new("/d"), Which::Agent),
            [
                PathBuf::from("/d/node/agent.log"),
                PathBuf::from("/d/agent.log")
            ]
        );
    }
}
