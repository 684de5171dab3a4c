//! Percentiles and table printing.

use std::time::Duration;

/// The `p`-th percentile (0..=100) of `samples` (sorted in place).
pub fn percentile(samples: &mut [Duration], p: f64) -> Duration {
    if samples.is_empty() {
        return Duration::ZERO;
    }
    samples.sort_unstable();
    let rank = ((p / 100.0) * (samples.len() - 1) as f64).round() as usize;
    samples[rank.min(samples.len() - 1)]
}

pub fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

/// Prints a four-column markdown table under `title`.
pub fn print_table(title: &str, headers: [&str; 4], rows: &[(String, String, String, String)]) {
    let headers = (
        headers[0].to_string(),
        headers[1].to_string(),
        headers[2].to_string(),
        headers[3].to_string(),
    );
    let all: Vec<_> = std::iter::once(&headers).chain(rows).collect();
    let width = |f: fn(&(String, String, String, String)) -> &String| {
        all.iter().map(|r| f(r).len()).max().unwrap_or(0)
    };
    let w = [
        width(|r| &r.0),
        width(|r| &r.1),
        width(|r| &r.2),
        width(|r| &r.3),
    ];
    println!("\n{title}");
    for (i, r) in all.iter().enumerate() {
        println!(
            "| {:<a$} | {:>b$} | {:>c$} | {:>d$} |",
            r.0,
            r.1,
            r.2,
            r.3,
            a = w[0],
            b = w[1],
            c = w[2],
            d = w[3]
        );
        if i == 0 {
            println!(
                "|{}|{}|{}|{}|",
                "-".repeat(w[0] + 2),
                "-".repeat(w[1] + 2),
                "-".repeat(w[2] + 2),
                "-".repeat(w[3] + 2)
            );
        }
    }
}

/// Prints a markdown table with any number of columns under `title`
/// (the first column left-aligned, the others right-aligned).
pub fn print_grid(title: &str, headers: &[&str], rows: &[Vec<String>]) {
    let columns = headers.len();
    let mut width: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate().take(columns) {
            width[i] = width[i].max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let mut out = String::from("|");
        for (i, w) in width.iter().enumerate() {
            let cell = cells.get(i).copied().unwrap_or("");
            let pad = w.saturating_sub(cell.chars().count());
            if i == 0 {
                out.push_str(&format!(" {cell}{} |", " ".repeat(pad)));
            } else {
                out.push_str(&format!(" {}{cell} |", " ".repeat(pad)));
            }
        }
        out
    };
    println!("\n{title}");
    println!("{}", line(headers.to_vec()));
    let rule: String = width
        .iter()
        .map(|w| format!("|{}", "-".repeat(w + 2)))
        .collect();
    println!("{rule}|");
    for row in rows {
        println!("{}", line(row.iter().map(String::as_str).collect()));
    }
}

/// How fast this machine runs control-plane work right now: the median of
/// five rounds of 2,000 serialize + parse passes over a pod-sized JSON
/// object, on the calling thread. The machines these benchmarks run on
/// swing by a third within an hour; a run's absolute times compare with
/// another run's only when their figures here are close.
pub fn host_speed() -> Duration {
    let pod = serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "calibrate", "namespace": "default", "uid": "6b1f9c1e-0d3c-4c51-9f5e-0d0f5a2d2a11",
                     "labels": {"app": "calibrate", "tier": "bench"}, "resourceVersion": "123456"},
        "spec": {"nodeName": "sim-node-1", "restartPolicy": "Always",
                 "containers": [{"name": "c", "image": "busybox", "command": ["sleep", "3600"],
                                 "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]},
        "status": {"phase": "Running", "podIP": "10.0.1.2", "hostIP": "192.168.0.2",
                   "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}],
                   "containerStatuses": [{"name": "c", "ready": true, "restartCount": 0, "image": "busybox",
                                          "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}}]},
    });
    let mut rounds: Vec<Duration> = (0..5)
        .map(|_| {
            let start = std::time::Instant::now();
            for _ in 0..2000 {
                let bytes = serde_json::to_vec(std::hint::black_box(&pod)).unwrap_or_default();
                let back: serde_json::Value =
                    serde_json::from_slice(std::hint::black_box(&bytes)).unwrap_or_default();
                std::hint::black_box(back);
            }
            start.elapsed()
        })
        .collect();
    percentile(&mut rounds, 50.0)
}
