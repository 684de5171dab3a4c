//! `skiff-bench store`: create throughput at 1, 16 and 64 concurrent
//! writers (N objects of about 1 KiB), then watch delivery latency with 100
//! watchers under the 64-writer load, for the embedded store and for a
//! local single-member etcd started by the benchmark, printed side by side.
//!
//! Watch delivery latency is measured from the writer's acknowledgement to
//! the watcher receiving the event (0 when the event arrives first), and
//! also from the start of the write call (which includes the commit).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::StreamExt;
use skiff_store::etcd::{EtcdConfig, EtcdStore};
use skiff_store::sqlite::{Config, SqliteStore};
use skiff_store::Store;
use skiff_testkit::EtcdServer;

use crate::stats::{ms, percentile, print_table};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Objects written per run.
    #[arg(long, default_value_t = 10_000)]
    objects: usize,
    /// Concurrent writers per throughput run.
    #[arg(long, value_delimiter = ',', default_value = "1,16,64")]
    writers: Vec<usize>,
    /// Watchers in the latency run.
    #[arg(long, default_value_t = 100)]
    watchers: usize,
    /// Writers in the latency run.
    #[arg(long, default_value_t = 64)]
    latency_writers: usize,
}

struct Figures {
    throughput: Vec<(usize, f64)>,
    latency_writes_per_sec: f64,
    ack_p50: Duration,
    ack_p99: Duration,
    start_p50: Duration,
    start_p99: Duration,
    write_p99: Duration,
}

fn value(i: usize) -> Bytes {
    let mut v = format!("{{\"index\":{i},\"pad\":\"").into_bytes();
    v.resize(1000, b'x');
    v.extend_from_slice(b"\"}");
    Bytes::from(v)
}

/// Writes `objects` keys under `prefix` with `writers` tasks. Records, per
/// object, the start and acknowledgement times (ns since `epoch`).
async fn write_all(
    store: Arc<dyn Store>,
    prefix: &str,
    objects: usize,
    writers: usize,
    epoch: Instant,
    starts: Arc<Vec<AtomicU64>>,
    acks: Arc<Vec<AtomicU64>>,
) -> Duration {
    let began = Instant::now();
    let mut tasks = Vec::new();
    for w in 0..writers {
        let (store, starts, acks, prefix) = (
            store.clone(),
            starts.clone(),
            acks.clone(),
            prefix.to_string(),
        );
        tasks.push(tokio::spawn(async move {
            for i in (w..objects).step_by(writers) {
                starts[i].store(epoch.elapsed().as_nanos() as u64, Ordering::Relaxed);
                store
                    .create(&format!("{prefix}{i:07}"), value(i))
                    .await
                    .expect("create");
                acks[i].store(epoch.elapsed().as_nanos() as u64, Ordering::Relaxed);
            }
        }));
    }
    for t in tasks {
        t.await.expect("writer task");
    }
    began.elapsed()
}

fn stamps(n: usize) -> Arc<Vec<AtomicU64>> {
    Arc::new((0..n).map(|_| AtomicU64::new(0)).collect())
}

async fn measure(name: &str, store: Arc<dyn Store>, args: &Args) -> anyhow::Result<Figures> {
    let epoch = Instant::now();
    let mut throughput = Vec::new();
    for &writers in &args.writers {
        let prefix = format!("/bench/tp{writers}/");
        let took = write_all(
            store.clone(),
            &prefix,
            args.objects,
            writers,
            epoch,
            stamps(args.objects),
            stamps(args.objects),
        )
        .await;
        let rate = args.objects as f64 / took.as_secs_f64();
        eprintln!("{name}: {writers} writers: {rate:.0} creates/s");
        throughput.push((writers, rate));
    }

    // Latency run: watchers first, then the load.
    let prefix = "/bench/watch/";
    let start = store.current_revision().await?;
    let mut watchers = Vec::new();
    for _ in 0..args.watchers {
        let mut stream = store.watch(prefix, start).await?;
        let objects = args.objects;
        watchers.push(tokio::spawn(async move {
            let mut seen = Vec::with_capacity(objects);
            while seen.len() < objects {
                match stream.next().await {
                    Some(Ok(event)) => {
                        let index: usize = event
                            .kv
                            .key
                            .rsplit('/')
                            .next()
                            .and_then(|s| s.parse().ok())
                            .expect("bench key");
                        seen.push((index, epoch.elapsed().as_nanos() as u64));
                    }
                    other => panic!("watch failed: {other:?}"),
                }
            }
            seen
        }));
    }
    let (starts, acks) = (stamps(args.objects), stamps(args.objects));
    let took = write_all(
        store.clone(),
        prefix,
        args.objects,
        args.latency_writers,
        epoch,
        starts.clone(),
        acks.clone(),
    )
    .await;
    let mut from_ack = Vec::new();
    let mut from_start = Vec::new();
    for w in watchers {
        for (index, at) in w.await? {
            let ack = acks[index].load(Ordering::Relaxed);
            let began = starts[index].load(Ordering::Relaxed);
            from_ack.push(Duration::from_nanos(at.saturating_sub(ack)));
            from_start.push(Duration::from_nanos(at.saturating_sub(began)));
        }
    }
    let mut writes: Vec<Duration> = (0..args.objects)
        .map(|i| {
            Duration::from_nanos(
                acks[i].load(Ordering::Relaxed) - starts[i].load(Ordering::Relaxed),
            )
        })
        .collect();
    let figures = Figures {
        throughput,
        latency_writes_per_sec: args.objects as f64 / took.as_secs_f64(),
        ack_p50: percentile(&mut from_ack, 50.0),
        ack_p99: percentile(&mut from_ack, 99.0),
        start_p50: percentile(&mut from_start, 50.0),
        start_p99: percentile(&mut from_start, 99.0),
        write_p99: percentile(&mut writes, 99.0),
    };
    eprintln!(
        "{name}: watch delivery p99 {} from ack",
        ms(figures.ack_p99)
    );
    Ok(figures)
}

pub async fn run(args: Args) -> anyhow::Result<()> {
    let dir = tempfile::Builder::new().prefix("skiff-bench-").tempdir()?;
    let sqlite: Arc<dyn Store> = Arc::new(SqliteStore::open(
        dir.path().join("state.db"),
        Config::default(),
    )?);
    let ours = measure("embedded", sqlite, &args).await?;

    let etcd_server = EtcdServer::start().await?;
    let etcd: Arc<dyn Store> = Arc::new(
        EtcdStore::connect(EtcdConfig::new(vec![etcd_server.endpoint().to_string()])).await?,
    );
    let theirs = measure("etcd", etcd, &args).await?;

    let mut rows = Vec::new();
    for ((writers, a), (_, b)) in ours.throughput.iter().zip(&theirs.throughput) {
        rows.push((
            format!("creates/s, {writers} writers"),
            format!("{a:.0}"),
            format!("{b:.0}"),
            format!("{:.2}", a / b),
        ));
    }
    let lat = |name: &str, a: Duration, b: Duration| {
        (
            name.to_string(),
            ms(a),
            ms(b),
            format!("{:.2}", a.as_secs_f64() / b.as_secs_f64().max(1e-9)),
        )
    };
    let w = args.latency_writers;
    let n = args.watchers;
    rows.push((
        format!("creates/s, {w} writers + {n} watchers"),
        format!("{:.0}", ours.latency_writes_per_sec),
        format!("{:.0}", theirs.latency_writes_per_sec),
        format!(
            "{:.2}",
            ours.latency_writes_per_sec / theirs.latency_writes_per_sec
        ),
    ));
    rows.push(lat(
        "create p99 under that load",
        ours.write_p99,
        theirs.write_p99,
    ));
    rows.push(lat(
        "watch delivery p50 (from ack)",
        ours.ack_p50,
        theirs.ack_p50,
    ));
    rows.push(lat(
        "watch delivery p99 (from ack)",
        ours.ack_p99,
        theirs.ack_p99,
    ));
    rows.push(lat(
        "watch delivery p50 (from write start)",
        ours.start_p50,
        theirs.start_p50,
    ));
    rows.push(lat(
        "watch delivery p99 (from write start)",
        ours.start_p99,
        theirs.start_p99,
    ));
    print_table(
        &format!(
            "Store benchmark: {} objects of ~1 KiB per run, {} cores",
            args.objects,
            std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(0)
        ),
        ["metric", "embedded", "etcd", "embedded/etcd"],
        &rows,
    );
    Ok(())
}
