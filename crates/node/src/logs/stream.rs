//! Reading one CRI log file out as output bytes (chunks on a channel),
//! with the PodLogOptions of [`LogOptions`]: tailLines picks the last
//! lines of what the file held when it was opened (so a follow with
//! `tailLines=0` gets exactly what is written after [`open`]), follow
//! keeps reading as the file grows. A follow ends when the caller cancels or stops receiving, when
//! the container is no longer running (the caller's check), when a newer
//! restart's file appears beside this one, or when the file is gone and
//! nothing says the container still runs; it first reads what is left.
//! A file replaced under the same name (rotation) is reopened.
//!
//! It only reads; what the bytes travel over is the caller's.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::format::{self, Assembler, Entry, LogOptions, Writer};

/// Why a log file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot open log file {path}: {source}")]
    Open {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot read log file {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Whether the container still writes its file.
pub type RunningCheck = Arc<dyn Fn() -> bool + Send + Sync>;

/// How a follow waits and when it stops.
#[derive(Clone)]
pub struct Follow {
    /// Whether the container still runs; without one a follow ends only
    /// on a newer restart's file, the file's removal, or the caller.
    pub running: Option<RunningCheck>,
    /// How often to look for more bytes at the end of the file.
    pub poll: Duration,
    /// How often to ask whether the container still runs and look for a
    /// newer file or a rotation.
    pub check_every: Duration,
}

impl Default for Follow {
    fn default() -> Self {
        Follow {
            running: None,
            poll: Duration::from_millis(100),
            check_every: Duration::from_secs(1),
        }
    }
}

impl std::fmt::Debug for Follow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Follow")
            .field("running", &self.running.as_ref().map(|_| "Fn"))
            .field("poll", &self.poll)
            .field("check_every", &self.check_every)
            .finish()
    }
}

/// An open log file, ready to be read out.
#[derive(Debug)]
pub struct LogFile {
    path: PathBuf,
    reader: BufReader<tokio::fs::File>,
    identity: (u64, u64),
    /// The file's length when opened: tailLines counts lines up to here.
    initial_len: u64,
    /// Bytes read so far.
    position: u64,
}

/// The (device, inode) pair that tells a replaced file from the old one.
fn identity(meta: &std::fs::Metadata) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    (meta.dev(), meta.ino())
}

/// Opens the log file at `path`.
pub async fn open(path: &Path) -> Result<LogFile> {
    let open_error = |source| Error::Open {
        path: path.to_path_buf(),
        source,
    };
    let file = tokio::fs::File::open(path).await.map_err(open_error)?;
    let meta = file.metadata().await.map_err(open_error)?;
    Ok(LogFile {
        path: path.to_path_buf(),
        reader: BufReader::with_capacity(64 * 1024, file),
        identity: identity(&meta),
        initial_len: meta.len(),
        position: 0,
    })
}

/// Output is sent in chunks of about this size (and at every pause).
const CHUNK: usize = 32 * 1024;

/// Whether to go on after handing output over.
#[derive(Debug, PartialEq, Eq)]
enum Flow {
    Go,
    /// The receiver is gone or limitBytes is reached.
    Stop,
}

/// Entries turned into output and sent.
struct Output {
    writer: Writer,
    /// The last tailLines entries, until the first end of file.
    tail: Option<(VecDeque<Entry>, u64)>,
    buf: Vec<u8>,
    out: mpsc::Sender<Vec<u8>>,
}

impl Output {
    async fn emit(&mut self, entry: Entry) -> Flow {
        if let Some((entries, n)) = self.tail.as_mut() {
            entries.push_back(entry);
            format::tail(entries, *n);
            return Flow::Go;
        }
        self.writer.write(&entry, &mut self.buf);
        if self.buf.len() >= CHUNK || self.writer.done() {
            return self.flush().await;
        }
        Flow::Go
    }

    /// The kept tail goes out; from now on entries go straight through.
    async fn end_tail(&mut self) -> Flow {
        if let Some((entries, _)) = self.tail.take() {
            for entry in entries {
                if self.emit(entry).await == Flow::Stop {
                    return Flow::Stop;
                }
            }
        }
        self.flush().await
    }

    async fn flush(&mut self) -> Flow {
        if !self.buf.is_empty() && self.out.send(std::mem::take(&mut self.buf)).await.is_err() {
            return Flow::Stop;
        }
        if self.writer.done() {
            Flow::Stop
        } else {
            Flow::Go
        }
    }
}

impl LogFile {
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn read_error(&self, source: std::io::Error) -> Error {
        Error::Read {
            path: self.path.clone(),
            source,
        }
    }

    /// Reads the complete lines there are now into `output`; an
    /// unfinished last line stays in `line` for the next read.
    async fn read_available(
        &mut self,
        line: &mut Vec<u8>,
        assembler: &mut Assembler,
        output: &mut Output,
    ) -> Result<Flow> {
        loop {
            if output.tail.is_some()
                && self.position >= self.initial_len
                && output.end_tail().await == Flow::Stop
            {
                return Ok(Flow::Stop);
            }
            let n = self
                .reader
                .read_until(b'\n', line)
                .await
                .map_err(|e| self.read_error(e))?;
            self.position += n as u64;
            if n == 0 || line.last() != Some(&b'\n') {
                return Ok(Flow::Go);
            }
            let flow = take_line(line, assembler, output).await;
            if flow == Flow::Stop {
                return Ok(Flow::Stop);
            }
        }
    }

    /// Streams the file as `opts` asks to `out` until it ends (see the
    /// module docs), `out`'s receiver is dropped or `cancel` fires.
    pub async fn stream(
        mut self,
        opts: LogOptions,
        follow: Follow,
        out: mpsc::Sender<Vec<u8>>,
        cancel: CancellationToken,
    ) -> Result<()> {
        let mut output = Output {
            writer: Writer::new(&opts),
            tail: opts.tail_lines.map(|n| (VecDeque::new(), n)),
            buf: Vec::new(),
            out,
        };
        let mut assembler = Assembler::default();
        let mut line = Vec::new();
        let mut last_check: Option<tokio::time::Instant> = None;
        loop {
            if self
                .read_available(&mut line, &mut assembler, &mut output)
                .await?
                == Flow::Stop
            {
                output.flush().await;
                return Ok(());
            }
            if !opts.follow {
                finish(&mut line, &mut assembler, &mut output).await;
                return Ok(());
            }
            if output.end_tail().await == Flow::Stop {
                return Ok(());
            }
            let due = last_check.is_none_or(|at| at.elapsed() >= follow.check_every);
            if due {
                last_check = Some(tokio::time::Instant::now());
                match self.check(&follow).await {
                    Check::Going => {}
                    Check::Ended => {
                        // What was written before it ended, then stop.
                        if self
                            .read_available(&mut line, &mut assembler, &mut output)
                            .await?
                            == Flow::Go
                        {
                            finish(&mut line, &mut assembler, &mut output).await;
                        }
                        return Ok(());
                    }
                    Check::Replaced => {
                        if self
                            .read_available(&mut line, &mut assembler, &mut output)
                            .await?
                            == Flow::Stop
                        {
                            output.flush().await;
                            return Ok(());
                        }
                        let _ = take_line(&mut line, &mut assembler, &mut output).await;
                        let reopened = open(&self.path).await?;
                        self.reader = reopened.reader;
                        self.identity = reopened.identity;
                        self.position = 0;
                        self.initial_len = 0;
                        continue;
                    }
                }
            }
            tokio::select! {
                _ = cancel.cancelled() => return Ok(()),
                _ = output.out.closed() => return Ok(()),
                _ = tokio::time::sleep(follow.poll) => {}
            }
        }
    }

    async fn check(&self, follow: &Follow) -> Check {
        let running = follow.running.as_ref().map(|f| f());
        if running == Some(false) {
            return Check::Ended;
        }
        if newer_restart_exists(&self.path).await {
            return Check::Ended;
        }
        match tokio::fs::metadata(&self.path).await {
            Ok(meta) if identity(&meta) != self.identity => Check::Replaced,
            Ok(_) => Check::Going,
            // Between a rotation's rename and the runtime's reopening the
            // name may be missing for a moment; without word that the
            // container runs, a missing file is the end.
            Err(_) if running == Some(true) => Check::Going,
            Err(_) => Check::Ended,
        }
    }
}

#[derive(Debug, PartialEq, Eq)]
enum Check {
    Going,
    Ended,
    Replaced,
}

/// Parses the raw line in `line` (if any) into the assembler and emits
/// what it completes; `line` is left empty.
async fn take_line(line: &mut Vec<u8>, assembler: &mut Assembler, output: &mut Output) -> Flow {
    if line.is_empty() {
        return Flow::Go;
    }
    let parsed = format::parse_line(line).map(|l| assembler.push(&l));
    let flow = match parsed {
        Ok(Some(entry)) => output.emit(entry).await,
        Ok(None) => Flow::Go,
        Err(e) => {
            tracing::debug!(error = %e, "skipping a line that is not in CRI log format");
            Flow::Go
        }
    };
    line.clear();
    flow
}

/// The end of the file for good: an unfinished last line and pending
/// partial parts go out as they are, then the kept tail and the rest.
async fn finish(line: &mut Vec<u8>, assembler: &mut Assembler, output: &mut Output) {
    if take_line(line, assembler, output).await == Flow::Stop {
        output.flush().await;
        return;
    }
    for entry in assembler.finish() {
        if output.emit(entry).await == Flow::Stop {
            output.flush().await;
            return;
        }
    }
    output.end_tail().await;
}

/// Whether a `<n>.log` with a higher `n` than `path`'s sits beside it.
async fn newer_restart_exists(path: &Path) -> bool {
    let (Some(dir), Some(mine)) = (
        path.parent(),
        path.file_name()
            .and_then(|n| n.to_str())
            .and_then(super::restart_of),
    ) else {
        return false;
    };
    let Ok(mut entries) = tokio::fs::read_dir(dir).await else {
        return false;
    };
    while let Ok(Some(entry)) = entries.next_entry().await {
        if entry
            .file_name()
            .to_str()
            .and_then(super::restart_of)
            .is_some_and(|n| n > mine)
        {
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn line(i: u32, text: &str) -> String {
        format!("2024-01-01T00:00:{i:02}Z stdout F {text}\n")
    }

    async fn read_all(path: &Path, opts: LogOptions) -> String {
        let (tx, mut rx) = mpsc::channel(16);
        let file = open(path).await.unwrap();
        file.stream(opts, Follow::default(), tx, CancellationToken::new())
            .await
            .unwrap();
        let mut out = Vec::new();
        while let Some(chunk) = rx.recv().await {
            out.extend(chunk);
        }
        String::from_utf8(out).unwrap()
    }

    /// Receives chunks until their concatenation contains `want`.
    async fn until(rx: &mut mpsc::Receiver<Vec<u8>>, got: &mut String, want: &str) {
        tokio::time::timeout(Duration::from_secs(10), async {
            while !got.contains(want) {
                let chunk = rx.recv().await.expect("stream ended early");
                got.push_str(std::str::from_utf8(&chunk).unwrap());
            }
        })
        .await
        .unwrap_or_else(|_| panic!("no {want:?} in {got:?}"));
    }

    fn fast() -> Follow {
        Follow {
            poll: Duration::from_millis(10),
            check_every: Duration::from_millis(20),
            ..Follow::default()
        }
    }

    #[tokio::test]
    async fn reads_with_tail_since_and_limits() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("0.log");
        // Lines not in CRI format are skipped; an unfinished last line (no
        // break yet) is read as it is.
        let text = [line(1, "one"), "not a cri line\n".into()].concat();
        std::fs::write(&path, format!("{text}{}", line(3, "three").trim_end())).unwrap();
        assert_eq!(read_all(&path, LogOptions::default()).await, "one\nthree");

        let text = [
            line(1, "one"),
            "2024-01-01T00:00:02Z stdout P tw\n".into(),
            "2024-01-01T00:00:02Z stdout F o\n".into(),
            line(3, "three"),
        ]
        .concat();
        std::fs::write(&path, text).unwrap();
        assert_eq!(
            read_all(&path, LogOptions::default()).await,
            "one\ntwo\nthree\n"
        );
        let tail = |n| LogOptions {
            tail_lines: Some(n),
            ..Default::default()
        };
        assert_eq!(read_all(&path, tail(2)).await, "two\nthree\n");
        assert_eq!(read_all(&path, tail(0)).await, "");
        assert_eq!(read_all(&path, tail(9)).await, "one\ntwo\nthree\n");
        let opts = LogOptions {
            tail_lines: Some(2),
            timestamps: true,
            limit_bytes: Some(39),
            ..Default::default()
        };
        assert_eq!(
            read_all(&path, opts).await,
            "2024-01-01T00:00:02.000000000Z two\n2024"
        );
        let since = chrono::DateTime::parse_from_rfc3339("2024-01-01T00:00:02Z")
            .unwrap()
            .to_utc();
        let opts = LogOptions {
            since: Some(since),
            ..Default::default()
        };
        assert_eq!(read_all(&path, opts).await, "two\nthree\n");
        // tailLines counts lines before since leaves some out.
        let opts = LogOptions {
            since: Some(since),
            tail_lines: Some(3),
            limit_bytes: Some(5),
            ..Default::default()
        };
        assert_eq!(read_all(&path, opts).await, "two\nt");
    }

    #[tokio::test]
    async fn follow_streams_appended_lines_until_a_newer_restart() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("0.log");
        std::fs::write(&path, [line(1, "one"), line(2, "two")].concat()).unwrap();
        let (tx, mut rx) = mpsc::channel(16);
        let opts = LogOptions {
            follow: true,
            tail_lines: Some(1),
            ..Default::default()
        };
        let task = tokio::spawn(open(&path).await.unwrap().stream(
            opts,
            fast(),
            tx,
            CancellationToken::new(),
        ));
        let mut got = String::new();
        until(&mut rx, &mut got, "two\n").await;
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        // Half a line first: nothing goes out until its end arrives.
        f.write_all(b"2024-01-01T00:00:03Z stdout P thr").unwrap();
        f.flush().unwrap();
        f.write_all(b"\n2024-01-01T00:00:03Z stdout F ee\n")
            .unwrap();
        until(&mut rx, &mut got, "three\n").await;
        assert_eq!(got, "two\nthree\n");
        f.write_all(line(4, "four").as_bytes()).unwrap();
        std::fs::write(dir.path().join("1.log"), line(5, "next")).unwrap();
        tokio::time::timeout(Duration::from_secs(10), task)
            .await
            .expect("the follow ends on a newer file")
            .unwrap()
            .unwrap();
        while let Some(chunk) = rx.recv().await {
            got.push_str(std::str::from_utf8(&chunk).unwrap());
        }
        assert_eq!(got, "two\nthree\nfour\n");
    }

    #[tokio::test]
    async fn tail_counts_what_the_file_held_when_opened() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("0.log");
        std::fs::write(&path, [line(1, "one"), line(2, "two")].concat()).unwrap();
        let file = open(&path).await.unwrap();
        // Written after opening, before reading starts: not part of the tail.
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(line(3, "three").as_bytes())
            .unwrap();
        let (tx, mut rx) = mpsc::channel(16);
        let opts = LogOptions {
            follow: true,
            tail_lines: Some(0),
            ..Default::default()
        };
        let task = tokio::spawn(file.stream(opts, fast(), tx, CancellationToken::new()));
        let mut got = String::new();
        until(&mut rx, &mut got, "three\n").await;
        assert_eq!(got, "three\n");
        drop(rx);
        tokio::time::timeout(Duration::from_secs(10), task)
            .await
            .unwrap()
            .unwrap()
            .unwrap();

        // Without follow: the last line of what was there, then the rest.
        let file = open(&path).await.unwrap();
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(line(4, "four").as_bytes())
            .unwrap();
        let (tx, mut rx) = mpsc::channel(16);
        let opts = LogOptions {
            tail_lines: Some(1),
            ..Default::default()
        };
        file.stream(opts, fast(), tx, CancellationToken::new())
            .await
            .unwrap();
        let mut got = Vec::new();
        while let Some(chunk) = rx.recv().await {
            got.extend(chunk);
        }
        assert_eq!(String::from_utf8(got).unwrap(), "three\nfour\n");
    }

    #[tokio::test]
    async fn follow_ends_when_the_container_stops_or_the_reader_goes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("3.log");
        std::fs::write(&path, line(1, "one")).unwrap();
        let running = Arc::new(std::sync::atomic::AtomicBool::new(true));
        let flag = running.clone();
        let follow = Follow {
            running: Some(Arc::new(move || {
                flag.load(std::sync::atomic::Ordering::SeqCst)
            })),
            ..fast()
        };
        let opts = LogOptions {
            follow: true,
            ..Default::default()
        };
        let (tx, mut rx) = mpsc::channel(16);
        let task = tokio::spawn(open(&path).await.unwrap().stream(
            opts.clone(),
            follow.clone(),
            tx,
            CancellationToken::new(),
        ));
        let mut got = String::new();
        until(&mut rx, &mut got, "one\n").await;
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(line(2, "last words").as_bytes())
            .unwrap();
        running.store(false, std::sync::atomic::Ordering::SeqCst);
        tokio::time::timeout(Duration::from_secs(10), task)
            .await
            .expect("the follow ends with the container")
            .unwrap()
            .unwrap();
        while let Some(chunk) = rx.recv().await {
            got.push_str(std::str::from_utf8(&chunk).unwrap());
        }
        assert_eq!(got, "one\nlast words\n");

        // A reader that goes away ends the follow.
        running.store(true, std::sync::atomic::Ordering::SeqCst);
        let (tx, rx) = mpsc::channel(16);
        let task = tokio::spawn(open(&path).await.unwrap().stream(
            opts.clone(),
            follow.clone(),
            tx,
            CancellationToken::new(),
        ));
        drop(rx);
        tokio::time::timeout(Duration::from_secs(10), task)
            .await
            .expect("the follow ends without a reader")
            .unwrap()
            .unwrap();

        // So does cancelling.
        let (tx, _rx) = mpsc::channel(16);
        let cancel = CancellationToken::new();
        let task = tokio::spawn(open(&path).await.unwrap().stream(
            opts,
            follow,
            tx,
            cancel.clone(),
        ));
        cancel.cancel();
        tokio::time::timeout(Duration::from_secs(10), task)
            .await
            .expect("the follow ends when cancelled")
            .unwrap()
            .unwrap();
    }

    #[tokio::test]
    async fn follow_reopens_a_rotated_file_and_ends_when_it_is_removed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("0.log");
        std::fs::write(&path, line(1, "one")).unwrap();
        let opts = LogOptions {
            follow: true,
            ..Default::default()
        };
        let (tx, mut rx) = mpsc::channel(16);
        let task = tokio::spawn(open(&path).await.unwrap().stream(
            opts,
            fast(),
            tx,
            CancellationToken::new(),
        ));
        let mut got = String::new();
        until(&mut rx, &mut got, "one\n").await;
        // Rotation: a last line in the old file, then a new file put in its
        // place (in one rename, so the name is never missing).
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(line(2, "two").as_bytes())
            .unwrap();
        let fresh = dir.path().join("0.log.new");
        std::fs::write(&fresh, line(3, "three")).unwrap();
        std::fs::rename(&fresh, &path).unwrap();
        until(&mut rx, &mut got, "three\n").await;
        assert_eq!(got, "one\ntwo\nthree\n");
        std::fs::remove_file(&path).unwrap();
        tokio::time::timeout(Duration::from_secs(10), task)
            .await
            .expect("the follow ends with its file")
            .unwrap()
            .unwrap();
    }
}
