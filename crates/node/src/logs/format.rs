//! The CRI log line format and the PodLogOptions selection, pure:
//!
//! - [`parse_line`]: `<RFC3339Nano> <stdout|stderr> <F|P> <text>` as the
//!   kubelet's `parseCRILog` reads it (a `P` part's line break is the
//!   file's, not the program's, and is dropped);
//! - [`Assembler`]: `P` parts joined with what follows on the same stream
//!   up to its `F` part, into one [`Entry`] stamped with the first part's
//!   time;
//! - [`LogOptions`] and [`Writer`]: sinceSeconds/sinceTime, timestamps and
//!   limitBytes applied to entries as the kubelet's log writer does
//!   (tailLines is the reader's: it needs the end of the file).
//!
//! No I/O here.

use chrono::{DateTime, FixedOffset, SecondsFormat, Utc};

/// Why a line is not a CRI log line (the kubelet's wording).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error("timestamp is not found")]
    NoTimestamp,
    #[error("unexpected timestamp format {0:?}")]
    Timestamp(String),
    #[error("stream type is not found")]
    NoStream,
    #[error("unexpected stream type {0:?}")]
    StreamType(String),
    #[error("log tag is not found")]
    NoTag,
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Which of the container's outputs a line came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

/// One line of a CRI log file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line<'a> {
    pub timestamp: DateTime<FixedOffset>,
    pub stream: Stream,
    /// A `P` (partial) line: the program's line goes on in the next one.
    pub partial: bool,
    /// The text; a full line's keeps its line break, a partial's has none.
    pub content: &'a [u8],
}

fn split_space(bytes: &[u8]) -> Option<(&[u8], &[u8])> {
    let at = bytes.iter().position(|b| *b == b' ')?;
    Some((bytes.get(..at)?, bytes.get(at + 1..)?))
}

/// Parses one line of a CRI log file (with or without its line break).
pub fn parse_line(line: &[u8]) -> Result<Line<'_>> {
    let (timestamp, rest) = split_space(line).ok_or(Error::NoTimestamp)?;
    let timestamp = String::from_utf8_lossy(timestamp);
    let timestamp = DateTime::parse_from_rfc3339(&timestamp)
        .map_err(|_| Error::Timestamp(timestamp.into_owned()))?;
    let (stream, rest) = split_space(rest).ok_or(Error::NoStream)?;
    let stream = match stream {
        b"stdout" => Stream::Stdout,
        b"stderr" => Stream::Stderr,
        other => {
            return Err(Error::StreamType(
                String::from_utf8_lossy(other).into_owned(),
            ))
        }
    };
    let (tags, mut content) = split_space(rest).ok_or(Error::NoTag)?;
    // Tags are `:`-separated, the first says partial or full (the rest is
    // for forward compatibility).
    let partial = tags.split(|b| *b == b':').next() == Some(b"P".as_slice());
    if partial {
        if let Some(stripped) = content.strip_suffix(b"\n") {
            content = stripped;
        }
    }
    Ok(Line {
        timestamp,
        stream,
        partial,
        content,
    })
}

/// A program's line (or, past [`MAX_JOINED`], a piece of one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// When its first part was written.
    pub timestamp: DateTime<FixedOffset>,
    pub stream: Stream,
    /// The text, ending with its line break when it had one.
    pub content: Vec<u8>,
}

/// The most a line's joined partial parts may hold before they go out as
/// a piece of their own (containerd cuts lines at 16 KiB; a program that
/// never ends its line must not make us hold all of it).
pub const MAX_JOINED: usize = 1024 * 1024;

#[derive(Debug, Clone)]
struct Pending {
    timestamp: DateTime<FixedOffset>,
    content: Vec<u8>,
}

/// Joins partial lines, per stream (stdout's and stderr's parts may
/// interleave).
#[derive(Debug, Clone, Default)]
pub struct Assembler {
    stdout: Option<Pending>,
    stderr: Option<Pending>,
}

impl Assembler {
    fn slot(&mut self, stream: Stream) -> &mut Option<Pending> {
        match stream {
            Stream::Stdout => &mut self.stdout,
            Stream::Stderr => &mut self.stderr,
        }
    }

    /// Takes one line; a whole program line (or an overlong piece) when
    /// this completes one.
    pub fn push(&mut self, line: &Line<'_>) -> Option<Entry> {
        let slot = self.slot(line.stream);
        let pending = slot.get_or_insert_with(|| Pending {
            timestamp: line.timestamp,
            content: Vec::new(),
        });
        pending.content.extend_from_slice(line.content);
        if line.partial && pending.content.len() < MAX_JOINED {
            return None;
        }
        slot.take().map(|p| Entry {
            timestamp: p.timestamp,
            stream: line.stream,
            content: p.content,
        })
    }

    /// Whatever partial parts are left (the file ended inside a line),
    /// oldest first.
    pub fn finish(&mut self) -> Vec<Entry> {
        let mut out: Vec<Entry> = [
            (Stream::Stdout, self.stdout.take()),
            (Stream::Stderr, self.stderr.take()),
        ]
        .into_iter()
        .filter_map(|(stream, p)| {
            p.map(|p| Entry {
                timestamp: p.timestamp,
                stream,
                content: p.content,
            })
        })
        .collect();
        out.sort_by_key(|e| e.timestamp);
        out
    }
}

/// What to read and how to print it (upstream's PodLogOptions as the
/// kubelet's `LogOptions` holds them).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogOptions {
    /// Keep reading as the file grows.
    pub follow: bool,
    /// Only the last N lines (none: all).
    pub tail_lines: Option<u64>,
    /// Prefix each line with its time, RFC3339 with nanoseconds.
    pub timestamps: bool,
    /// Leave out lines written before this.
    pub since: Option<DateTime<Utc>>,
    /// Stop after this many bytes of output.
    pub limit_bytes: Option<u64>,
}

impl LogOptions {
    /// The start time from `sinceSeconds` (before `now`) and `sinceTime`,
    /// the later of the two as the kubelet's `NewLogOptions` takes it.
    pub fn since_from(
        since_seconds: Option<i64>,
        since_time: Option<DateTime<Utc>>,
        now: DateTime<Utc>,
    ) -> Option<DateTime<Utc>> {
        let from_seconds = since_seconds
            .and_then(chrono::TimeDelta::try_seconds)
            .and_then(|d| now.checked_sub_signed(d));
        match (from_seconds, since_time) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        }
    }
}

/// The kubelet's timestamp prefix: RFC3339 with nine fraction digits
/// (`2006-01-02T15:04:05.000000000Z07:00`).
pub fn format_timestamp(t: &DateTime<FixedOffset>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Nanos, true)
}

/// Turns entries into output bytes: since, timestamps, limitBytes.
#[derive(Debug, Clone)]
pub struct Writer {
    since: Option<DateTime<Utc>>,
    timestamps: bool,
    remaining: Option<u64>,
    /// Whether the next entry starts a line of output (a piece of an
    /// overlong line does not get a second timestamp).
    at_line_start: bool,
}

impl Writer {
    pub fn new(opts: &LogOptions) -> Self {
        Writer {
            since: opts.since,
            timestamps: opts.timestamps,
            remaining: opts.limit_bytes,
            at_line_start: true,
        }
    }

    /// Whether limitBytes has been reached: nothing more goes out.
    pub fn done(&self) -> bool {
        self.remaining == Some(0)
    }

    /// Appends what `entry` prints to `out`.
    pub fn write(&mut self, entry: &Entry, out: &mut Vec<u8>) {
        let starts_line = self.at_line_start;
        self.at_line_start = entry.content.last().is_none_or(|b| *b == b'\n');
        if self.done() || self.since.is_some_and(|since| entry.timestamp < since) {
            return;
        }
        let mut line = Vec::with_capacity(entry.content.len() + 31);
        if self.timestamps && starts_line {
            line.extend_from_slice(format_timestamp(&entry.timestamp).as_bytes());
            line.push(b' ');
        }
        line.extend_from_slice(&entry.content);
        if let Some(remaining) = self.remaining.as_mut() {
            let keep = usize::try_from(*remaining)
                .unwrap_or(usize::MAX)
                .min(line.len());
            line.truncate(keep);
            *remaining -= keep as u64;
        }
        out.extend_from_slice(&line);
    }
}

/// The last `n` of `entries` (all when there are fewer).
pub fn tail<T>(entries: &mut std::collections::VecDeque<T>, n: u64) {
    let n = usize::try_from(n).unwrap_or(usize::MAX);
    while entries.len() > n {
        entries.pop_front();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(s: &str) -> DateTime<FixedOffset> {
        DateTime::parse_from_rfc3339(s).unwrap()
    }

    fn entries(lines: &[&str]) -> Vec<Entry> {
        let mut a = Assembler::default();
        let mut out: Vec<Entry> = lines
            .iter()
            .filter_map(|l| a.push(&parse_line(l.as_bytes()).unwrap()))
            .collect();
        out.extend(a.finish());
        out
    }

    fn render(opts: &LogOptions, entries: &[Entry]) -> String {
        let mut w = Writer::new(opts);
        let mut out = Vec::new();
        for e in entries {
            w.write(e, &mut out);
        }
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn parses_cri_lines_as_the_kubelet() {
        let l = parse_line(b"2016-10-06T00:17:09.669794202Z stdout F log content 1\n").unwrap();
        assert_eq!(l.timestamp, ts("2016-10-06T00:17:09.669794202Z"));
        assert_eq!(
            (l.stream, l.partial, l.content),
            (Stream::Stdout, false, b"log content 1\n".as_slice())
        );
        let l = parse_line(b"2016-10-06T00:17:09.669794203+02:00 stderr P part\n").unwrap();
        assert_eq!(
            (l.stream, l.partial, l.content),
            (Stream::Stderr, true, b"part".as_slice())
        );
        // Extra tags after `:` are allowed; an empty line is just its break.
        let l = parse_line(b"2016-10-06T00:17:09Z stdout F:x \n").unwrap();
        assert_eq!((l.partial, l.content), (false, b"\n".as_slice()));
        assert_eq!(parse_line(b"nonsense").unwrap_err(), Error::NoTimestamp);
        assert_eq!(
            parse_line(b"yesterday stdout F x").unwrap_err(),
            Error::Timestamp("yesterday".into())
        );
        assert_eq!(
            parse_line(b"2016-10-06T00:17:09Z stdin F x").unwrap_err(),
            Error::StreamType("stdin".into())
        );
        assert_eq!(
            parse_line(b"2016-10-06T00:17:09Z stdout").unwrap_err(),
            Error::NoStream
        );
        assert_eq!(
            parse_line(b"2016-10-06T00:17:09Z stdout F").unwrap_err(),
            Error::NoTag
        );
    }

    #[test]
    fn joins_partial_lines_per_stream() {
        let got = entries(&[
            "2024-01-01T00:00:01Z stdout P hel\n",
            "2024-01-01T00:00:02Z stderr F oops\n",
            "2024-01-01T00:00:03Z stdout P lo \n",
            "2024-01-01T00:00:04Z stdout F world\n",
            "2024-01-01T00:00:05Z stdout P unfinished\n",
        ]);
        let texts: Vec<(Stream, &str, String)> = got
            .iter()
            .map(|e| {
                (
                    e.stream,
                    std::str::from_utf8(&e.content).unwrap(),
                    e.timestamp.to_rfc3339(),
                )
            })
            .collect();
        assert_eq!(
            texts,
            vec![
                (Stream::Stderr, "oops\n", "2024-01-01T00:00:02+00:00".into()),
                (
                    Stream::Stdout,
                    "hello world\n",
                    "2024-01-01T00:00:01+00:00".into()
                ),
                (
                    Stream::Stdout,
                    "unfinished",
                    "2024-01-01T00:00:05+00:00".into()
                ),
            ]
        );
    }

    #[test]
    fn overlong_partial_lines_go_out_in_pieces_with_one_timestamp() {
        let big = "x".repeat(MAX_JOINED);
        let lines = [
            format!("2024-01-01T00:00:01Z stdout P {big}\n"),
            "2024-01-01T00:00:02Z stdout F end\n".to_string(),
        ];
        let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
        let got = entries(&refs);
        assert_eq!(got.len(), 2);
        let out = render(
            &LogOptions {
                timestamps: true,
                ..Default::default()
            },
            &got,
        );
        assert_eq!(
            out,
            format!("2024-01-01T00:00:01.000000000Z {big}end\n"),
            "one prefix for the whole line"
        );
    }

    #[test]
    fn timestamps_are_printed_with_nanoseconds_and_their_offset() {
        let got = entries(&[
            "2024-01-01T00:00:01.5Z stdout F a\n",
            "2024-01-01T02:00:02.123456789+02:00 stdout F b\n",
        ]);
        assert_eq!(
            render(
                &LogOptions {
                    timestamps: true,
                    ..Default::default()
                },
                &got
            ),
            "2024-01-01T00:00:01.500000000Z a\n2024-01-01T02:00:02.123456789+02:00 b\n"
        );
        assert_eq!(render(&LogOptions::default(), &got), "a\nb\n");
    }

    #[test]
    fn since_leaves_out_older_lines() {
        let got = entries(&[
            "2024-01-01T00:00:01Z stdout F a\n",
            "2024-01-01T00:00:02Z stdout F b\n",
            "2024-01-01T00:00:03Z stdout F c\n",
        ]);
        let since = |s: &str| LogOptions {
            since: Some(DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)),
            ..Default::default()
        };
        assert_eq!(render(&since("2024-01-01T00:00:02Z"), &got), "b\nc\n");
        assert_eq!(render(&since("2024-01-01T00:00:02.5Z"), &got), "c\n");
        assert_eq!(render(&since("2025-01-01T00:00:00Z"), &got), "");
        let now = DateTime::parse_from_rfc3339("2024-01-01T00:01:00Z")
            .unwrap()
            .with_timezone(&Utc);
        let t = |s: &str| DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc);
        assert_eq!(
            LogOptions::since_from(Some(30), None, now),
            Some(t("2024-01-01T00:00:30Z"))
        );
        assert_eq!(
            LogOptions::since_from(Some(30), Some(t("2024-01-01T00:00:50Z")), now),
            Some(t("2024-01-01T00:00:50Z"))
        );
        assert_eq!(
            LogOptions::since_from(None, Some(t("2024-01-01T00:00:10Z")), now),
            Some(t("2024-01-01T00:00:10Z"))
        );
        assert_eq!(LogOptions::since_from(None, None, now), None);
    }

    #[test]
    fn limit_bytes_cuts_the_output() {
        let got = entries(&[
            "2024-01-01T00:00:01Z stdout F abc\n",
            "2024-01-01T00:00:02Z stdout F def\n",
        ]);
        let limit = |n| LogOptions {
            limit_bytes: Some(n),
            ..Default::default()
        };
        assert_eq!(render(&limit(6), &got), "abc\nde");
        assert_eq!(render(&limit(4), &got), "abc\n");
        assert_eq!(render(&limit(100), &got), "abc\ndef\n");
        let mut w = Writer::new(&limit(2));
        let mut out = Vec::new();
        w.write(&got[0], &mut out);
        assert!(w.done());
        // The timestamp counts as output.
        let opts = LogOptions {
            limit_bytes: Some(10),
            timestamps: true,
            ..Default::default()
        };
        assert_eq!(render(&opts, &got), "2024-01-01");
    }

    #[test]
    fn tail_keeps_the_last_lines() {
        let mut d: std::collections::VecDeque<u32> = (1..=5).collect();
        tail(&mut d, 2);
        assert_eq!(d, [4, 5]);
        tail(&mut d, 10);
        assert_eq!(d, [4, 5]);
        tail(&mut d, 0);
        assert!(d.is_empty());
    }
}
