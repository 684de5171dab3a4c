//! The process metrics every upstream component exports (client_golang's
//! process collector): `process_cpu_seconds_total`,
//! `process_resident_memory_bytes`, `process_virtual_memory_bytes`,
//! `process_start_time_seconds`, `process_open_fds`, `process_max_fds`,
//! read at each scrape.
//!
//! `/proc` is reached only through the [`Source`] trait: [`ProcFs`] reads
//! the real files, [`FakeProc`] serves given contents in tests. Parsing
//! is pure. A metric whose file cannot be read or parsed is left out of
//! that scrape, never reported as zero.

use std::collections::HashMap;
use std::io;

use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

/// Why a process figure could not be read.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("reading /proc/{path}: {source}")]
    Read {
        path: &'static str,
        #[source]
        source: io::Error,
    },
    #[error("/proc/{path} has no {what}")]
    Parse {
        path: &'static str,
        what: &'static str,
    },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The kernel's clock ticks per second as `/proc` reports times
/// (`USER_HZ`: 100 on every Linux architecture's user ABI).
const USER_HZ: f64 = 100.0;

/// What the collector reads of `/proc`.
pub trait Source: Send + Sync + std::fmt::Debug + 'static {
    /// The text of `/proc/<path>` (`self/stat`, `self/status`,
    /// `self/limits`, `stat`).
    fn read(&self, path: &'static str) -> io::Result<String>;
    /// How many entries `/proc/self/fd` has.
    fn open_fds(&self) -> io::Result<u64>;
}

/// The real `/proc`.
#[derive(Debug, Clone, Copy)]
pub struct ProcFs;

impl Source for ProcFs {
    fn read(&self, path: &'static str) -> io::Result<String> {
        std::fs::read_to_string(format!("/proc/{path}"))
    }

    fn open_fds(&self) -> io::Result<u64> {
        Ok(std::fs::read_dir("/proc/self/fd")?.count() as u64)
    }
}

/// Given `/proc` contents, for tests.
#[derive(Debug, Clone, Default)]
pub struct FakeProc {
    pub files: HashMap<&'static str, String>,
    pub fds: u64,
}

impl Source for FakeProc {
    fn read(&self, path: &'static str) -> io::Result<String> {
        self.files
            .get(path)
            .cloned()
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))
    }

    fn open_fds(&self) -> io::Result<u64> {
        Ok(self.fds)
    }
}

/// One scrape's figures; `None` where the source failed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Figures {
    pub cpu_seconds: Option<f64>,
    pub resident_bytes: Option<f64>,
    pub virtual_bytes: Option<f64>,
    pub start_time_seconds: Option<f64>,
    pub open_fds: Option<f64>,
    pub max_fds: Option<f64>,
}

/// Fields of `/proc/self/stat` after the command name (which may hold
/// spaces and parentheses: everything up to the last `)`), numbered as
/// proc(5) numbers them.
fn stat_field(stat: &str, field: usize) -> Result<f64> {
    let rest = stat
        .rfind(')')
        .and_then(|i| stat.get(i + 1..))
        .ok_or(Error::Parse {
            path: "self/stat",
            what: "command name",
        })?;
    // Field 3 (state) is the first after the name.
    rest.split_whitespace()
        .nth(field - 3)
        .and_then(|v| v.parse::<f64>().ok())
        .ok_or(Error::Parse {
            path: "self/stat",
            what: "field",
        })
}

/// User plus system CPU seconds (fields 14 and 15).
pub fn cpu_seconds(stat: &str) -> Result<f64> {
    Ok((stat_field(stat, 14)? + stat_field(stat, 15)?) / USER_HZ)
}

/// Virtual memory size in bytes (field 23).
pub fn virtual_bytes(stat: &str) -> Result<f64> {
    stat_field(stat, 23)
}

/// Start time since the epoch: boot time (`btime` of `/proc/stat`) plus
/// field 22 (ticks after boot).
pub fn start_time_seconds(stat: &str, proc_stat: &str) -> Result<f64> {
    let btime = proc_stat
        .lines()
        .find_map(|l| l.strip_prefix("btime "))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .ok_or(Error::Parse {
            path: "stat",
            what: "btime",
        })?;
    Ok(btime + stat_field(stat, 22)? / USER_HZ)
}

/// `VmRSS` of `/proc/self/status` in bytes.
pub fn resident_bytes(status: &str) -> Result<f64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map(|kib| kib * 1024.0)
        .ok_or(Error::Parse {
            path: "self/status",
            what: "VmRSS",
        })
}

/// The soft `Max open files` limit of `/proc/self/limits`.
pub fn max_fds(limits: &str) -> Result<f64> {
    limits
        .lines()
        .find_map(|l| l.strip_prefix("Max open files"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse::<f64>().ok())
        .ok_or(Error::Parse {
            path: "self/limits",
            what: "Max open files",
        })
}

/// Reads one scrape's figures from `source`.
pub fn read(source: &dyn Source) -> Figures {
    let file = |path: &'static str| {
        source
            .read(path)
            .map_err(|source| Error::Read { path, source })
    };
    let stat = file("self/stat");
    let from_stat = |f: fn(&str) -> Result<f64>| stat.as_ref().ok().and_then(|s| f(s).ok());
    Figures {
        cpu_seconds: from_stat(cpu_seconds),
        virtual_bytes: from_stat(virtual_bytes),
        start_time_seconds: match (&stat, file("stat")) {
            (Ok(stat), Ok(proc_stat)) => start_time_seconds(stat, &proc_stat).ok(),
            _ => None,
        },
        resident_bytes: file("self/status")
            .ok()
            .and_then(|s| resident_bytes(&s).ok()),
        open_fds: source.open_fds().ok().map(|n| n as f64),
        max_fds: file("self/limits").ok().and_then(|s| max_fds(&s).ok()),
    }
}

/// Registers as a collector: reads [`Figures`] at each scrape.
#[derive(Debug)]
pub struct Collector<S: Source> {
    source: S,
}

impl<S: Source> Collector<S> {
    pub fn new(source: S) -> Self {
        Collector { source }
    }
}

impl<S: Source> prometheus_client::collector::Collector for Collector<S> {
    fn encode(&self, mut encoder: DescriptorEncoder) -> std::result::Result<(), std::fmt::Error> {
        let figures = read(&self.source);
        if let Some(v) = figures.cpu_seconds {
            let counter = ConstCounter::new(v);
            counter.encode(encoder.encode_descriptor(
                "process_cpu_seconds",
                "Total user and system CPU time spent in seconds.",
                None,
                counter.metric_type(),
            )?)?;
        }
        let gauges = [
            (
                "process_open_fds",
                "Number of open file descriptors.",
                figures.open_fds,
            ),
            (
                "process_max_fds",
                "Maximum number of open file descriptors.",
                figures.max_fds,
            ),
            (
                "process_virtual_memory_bytes",
                "Virtual memory size in bytes.",
                figures.virtual_bytes,
            ),
            (
                "process_resident_memory_bytes",
                "Resident memory size in bytes.",
                figures.resident_bytes,
            ),
            (
                "process_start_time_seconds",
                "Start time of the process since unix epoch in seconds.",
                figures.start_time_seconds,
            ),
        ];
        for (name, help, value) in gauges {
            if let Some(v) = value {
                let gauge = ConstGauge::new(v);
                gauge.encode(encoder.encode_descriptor(
                    name,
                    help,
                    None,
                    gauge.metric_type(),
                )?)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A command name with a space and a parenthesis, as a thread may
    /// call itself.
    const STAT: &str = "4242 (tokio (rt) x) S 1 4242 4242 0 -1 4194560 100 0 0 0 \
        250 150 0 0 20 0 12 0 360000 1048576000 12345 18446744073709551615";

    fn fake() -> FakeProc {
        FakeProc {
            files: HashMap::from([
                ("self/stat", STAT.to_string()),
                ("stat", "cpu  1 2 3\nbtime 1700000000\nprocesses 9\n".to_string()),
                (
                    "self/status",
                    "Name:\tskiff\nVmRSS:\t   51200 kB\nThreads:\t12\n".to_string(),
                ),
                (
                    "self/limits",
                    "Limit                     Soft Limit           Hard Limit           Units     \n\
                     Max open files            1024                 524288               files     \n"
                        .to_string(),
                ),
            ]),
            fds: 17,
        }
    }

    #[test]
    fn figures_come_from_the_proc_files() {
        let f = read(&fake());
        assert_eq!(f.cpu_seconds, Some(4.0));
        assert_eq!(f.virtual_bytes, Some(1_048_576_000.0));
        assert_eq!(f.start_time_seconds, Some(1_700_003_600.0));
        assert_eq!(f.resident_bytes, Some(51200.0 * 1024.0));
        assert_eq!(f.open_fds, Some(17.0));
        assert_eq!(f.max_fds, Some(1024.0));
    }

    #[test]
    fn a_missing_file_leaves_its_metrics_out() {
        let mut proc = fake();
        proc.files.remove("self/status");
        proc.files.insert("self/stat", "garbage".into());
        let f = read(&proc);
        assert_eq!(
            (f.resident_bytes, f.cpu_seconds, f.start_time_seconds),
            (None, None, None)
        );
        assert_eq!(f.open_fds, Some(17.0));
    }

    #[test]
    fn the_collector_writes_upstreams_names() {
        let mut registry = prometheus_client::registry::Registry::default();
        registry.register_collector(Box::new(Collector::new(fake())));
        let mut text = String::new();
        prometheus_client::encoding::prometheus_text::encode(&mut text, &registry).unwrap();
        for line in [
            "# TYPE process_cpu_seconds_total counter",
            "process_cpu_seconds_total 4",
            "process_resident_memory_bytes 52428800",
            "process_start_time_seconds 1700003600",
            "process_open_fds 17",
        ] {
            assert!(text.contains(line), "{line} in {text}");
        }
    }

    #[test]
    fn the_real_proc_answers() {
        let f = read(&ProcFs);
        assert!(f.resident_bytes.is_some_and(|b| b > 0.0), "{f:?}");
        assert!(f.open_fds.is_some_and(|n| n > 0.0), "{f:?}");
        assert!(f.start_time_seconds.is_some_and(|t| t > 1.0e9), "{f:?}");
    }
}
