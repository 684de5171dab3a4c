//! The audit log file: events go over a bounded queue to one writer
//! thread, which writes them as JSON lines through a buffer, flushed
//! whenever the queue runs dry, and rotates the file by size as upstream's
//! lumberjack does (`--audit-log-maxsize`, `--audit-log-maxbackup`,
//! `--audit-log-maxage`; backups named `audit-2006-01-02T15-04-05.000.log`
//! beside it). `-` is standard output. A request only hands its event
//! over: it never waits for the disk, only for room in the queue when the
//! writer has fallen 4096 events behind (upstream's blocking mode, rather
//! than losing records). This module owns the file; it must not decide
//! what is logged.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc;

use chrono::{DateTime, NaiveDateTime, Utc};

use super::event::Event;

/// Why the log could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot open audit log {path}: {source}")]
    Open {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot start the audit log writer: {0}")]
    Thread(#[source] std::io::Error),
}

pub type Result<T> = std::result::Result<T, Error>;

/// Where and how much.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// The file; `-` is standard output.
    pub path: PathBuf,
    /// Rotate when the file would grow past this many bytes (upstream's
    /// `--audit-log-maxsize` is in megabytes; 0 there is lumberjack's
    /// 100 MB).
    pub max_size: u64,
    /// Keep at most this many rotated files; 0 keeps all.
    pub max_backups: usize,
    /// Remove rotated files older than this many days; 0 keeps them.
    pub max_age_days: u32,
}

/// Events queued for the writer thread before a request waits.
const QUEUE: usize = 4096;

/// The running log; the writer thread ends when it is dropped, after
/// writing what was queued.
#[derive(Debug)]
pub struct Log {
    queue: mpsc::SyncSender<Event>,
}

impl Log {
    /// Opens (creates, mode 0600, its directory 0700 as upstream) the
    /// file and starts the writer.
    pub fn open(options: &Options) -> Result<Log> {
        let sink = if options.path.as_os_str() == "-" {
            Sink::Stdout
        } else {
            Sink::File(Rotating::open(options)?)
        };
        let (queue, events) = mpsc::sync_channel(QUEUE);
        std::thread::Builder::new()
            .name("audit-log".into())
            .spawn(move || write_all(sink, events))
            .map_err(Error::Thread)?;
        Ok(Log { queue })
    }

    /// Queues `event`; waits only when the queue is full.
    pub fn write(&self, event: Event) {
        let event = match self.queue.try_send(event) {
            Ok(()) => return,
            Err(mpsc::TrySendError::Full(event)) => event,
            Err(mpsc::TrySendError::Disconnected(_)) => return,
        };
        let _ = self.queue.send(event);
    }
}

enum Sink {
    Stdout,
    File(Rotating),
}

/// The writer thread: each batch of queued events, then a flush.
fn write_all(mut sink: Sink, events: mpsc::Receiver<Event>) {
    let mut failing = false;
    let mut report = |result: std::io::Result<()>| match result {
        Ok(()) => failing = false,
        Err(e) => {
            // Once per run of failures, not once per event.
            if !failing {
                tracing::error!(error = %e, "cannot write the audit log");
            }
            failing = true;
        }
    };
    while let Ok(first) = events.recv() {
        match &mut sink {
            Sink::Stdout => {
                let mut out = std::io::stdout().lock();
                for event in std::iter::once(first).chain(events.try_iter()) {
                    report(out.write_all(&event.to_line()));
                }
                report(out.flush());
            }
            Sink::File(file) => {
                for event in std::iter::once(first).chain(events.try_iter()) {
                    report(file.write_line(&event.to_line()));
                }
                report(file.flush());
            }
        }
    }
}

/// A file rotated by size, lumberjack's way.
struct Rotating {
    path: PathBuf,
    file: BufWriter<File>,
    size: u64,
    max_size: u64,
    max_backups: usize,
    max_age_days: u32,
    /// The last backup's time stamp: the next is later, even within one
    /// millisecond (so that age order is name order).
    last_backup: Option<DateTime<Utc>>,
}

/// lumberjack's backup time stamp (UTC).
const BACKUP_TIME: &str = "%Y-%m-%dT%H-%M-%S%.3f";

impl Rotating {
    fn open(options: &Options) -> Result<Rotating> {
        let path = options.path.clone();
        let file = open_append(&path).map_err(|source| Error::Open {
            path: path.clone(),
            source,
        })?;
        let size = file.metadata().map(|m| m.len()).unwrap_or(0);
        Ok(Rotating {
            path,
            file: BufWriter::with_capacity(64 * 1024, file),
            size,
            max_size: options.max_size,
            max_backups: options.max_backups,
            max_age_days: options.max_age_days,
            last_backup: None,
        })
    }

    fn write_line(&mut self, line: &[u8]) -> std::io::Result<()> {
        if self.max_size > 0 && self.size > 0 && self.size + line.len() as u64 > self.max_size {
            self.rotate()?;
        }
        self.file.write_all(line)?;
        self.size += line.len() as u64;
        Ok(())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }

    /// Moves the file aside under a time-stamped name, starts a new one,
    /// and removes backups beyond the count and age limits.
    fn rotate(&mut self) -> std::io::Result<()> {
        self.file.flush()?;
        let (dir, stem, ext) = parts(&self.path);
        let mut at = Utc::now();
        // Two rotations in one millisecond: the later one a millisecond on.
        let step = chrono::Duration::milliseconds(1);
        if let Some(last) = self.last_backup.filter(|last| at < *last + step) {
            at = last + step;
        }
        let mut backup = dir.join(format!("{stem}-{}{ext}", at.format(BACKUP_TIME)));
        while backup.exists() {
            at += step;
            backup = dir.join(format!("{stem}-{}{ext}", at.format(BACKUP_TIME)));
        }
        std::fs::rename(&self.path, &backup)?;
        self.last_backup = Some(at);
        self.file = BufWriter::with_capacity(64 * 1024, open_append(&self.path)?);
        self.size = 0;
        self.remove_old_backups(Utc::now())
    }

    fn remove_old_backups(&self, now: DateTime<Utc>) -> std::io::Result<()> {
        if self.max_backups == 0 && self.max_age_days == 0 {
            return Ok(());
        }
        let mut backups = backups(&self.path)?;
        // Newest first.
        backups.sort_by_key(|b| std::cmp::Reverse(b.0));
        let cutoff = now - chrono::Duration::days(i64::from(self.max_age_days));
        for (i, (at, path)) in backups.iter().enumerate() {
            let too_many = self.max_backups > 0 && i >= self.max_backups;
            let too_old = self.max_age_days > 0 && *at < cutoff;
            if too_many || too_old {
                std::fs::remove_file(path)?;
            }
        }
        Ok(())
    }
}

/// The log's directory, file stem and extension (with its dot).
fn parts(path: &Path) -> (PathBuf, String, String) {
    let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let ext = path
        .extension()
        .map(|e| format!(".{}", e.to_string_lossy()))
        .unwrap_or_default();
    (dir, stem, ext)
}

/// The rotated files of the log at `path`, with their time stamps.
fn backups(path: &Path) -> std::io::Result<Vec<(DateTime<Utc>, PathBuf)>> {
    let (dir, stem, ext) = parts(path);
    let prefix = format!("{stem}-");
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        &dir
    };
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let stamp = name
            .strip_prefix(&prefix)
            .and_then(|rest| rest.strip_suffix(&ext));
        if let Some(at) = stamp.and_then(|s| NaiveDateTime::parse_from_str(s, BACKUP_TIME).ok()) {
            found.push((at.and_utc(), entry.path()));
        }
    }
    Ok(found)
}

fn open_append(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
    }
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rotating(dir: &Path, max_size: u64, max_backups: usize, max_age_days: u32) -> Rotating {
        Rotating::open(&Options {
            path: dir.join("audit.log"),
            max_size,
            max_backups,
            max_age_days,
        })
        .unwrap()
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn the_file_rotates_by_size_and_keeps_max_backups() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = rotating(dir.path(), 25, 2, 0);
        for i in 0..10 {
            // 9 bytes a line: two lines a file.
            log.write_line(format!("line {i:03}\n").as_bytes()).unwrap();
        }
        log.flush().unwrap();
        let names = names(dir.path());
        assert_eq!(names.len(), 3, "{names:?}");
        assert_eq!(names[2], "audit.log");
        for backup in &names[..2] {
            let stamp = backup
                .strip_prefix("audit-")
                .unwrap()
                .strip_suffix(".log")
                .unwrap();
            assert!(
                NaiveDateTime::parse_from_str(stamp, BACKUP_TIME).is_ok(),
                "{backup}"
            );
        }
        let read = |name: &str| std::fs::read_to_string(dir.path().join(name)).unwrap();
        assert_eq!(read("audit.log"), "line 008\nline 009\n");
        // The newest backups, in order.
        assert_eq!(read(&names[0]), "line 004\nline 005\n");
        assert_eq!(read(&names[1]), "line 006\nline 007\n");
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.path().join("audit.log"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn old_backups_go_after_max_age_days() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("audit-2020-01-01T00-00-00.000.log"),
            "old\n",
        )
        .unwrap();
        std::fs::write(dir.path().join("audit-notastamp.log"), "kept\n").unwrap();
        let mut log = rotating(dir.path(), 10, 0, 7);
        log.write_line(b"0123456789\n").unwrap();
        log.write_line(b"0123456789\n").unwrap();
        let names = names(dir.path());
        assert!(
            !names.iter().any(|n| n.starts_with("audit-2020")),
            "{names:?}"
        );
        assert!(
            names.contains(&"audit-notastamp.log".to_string()),
            "{names:?}"
        );
        assert_eq!(names.len(), 3, "{names:?}");
    }

    #[test]
    fn an_existing_file_is_appended_to() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("audit.log"), "before\n").unwrap();
        let log = Log::open(&Options {
            path: dir.path().join("audit.log"),
            max_size: 0,
            max_backups: 0,
            max_age_days: 0,
        })
        .unwrap();
        log.write(Event::new("id".into(), "/".into(), Utc::now()));
        let path = dir.path().join("audit.log");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let text = std::fs::read_to_string(&path).unwrap();
            if text.lines().count() == 2 {
                assert!(text.starts_with("before\n{\"kind\":\"Event\""), "{text}");
                break;
            }
            assert!(std::time::Instant::now() < deadline, "{text}");
            std::thread::yield_now();
        }
    }
}
