//! The `StartupTimeline` event's message, from a [`Finished`] timeline:
//! `Started in 1.42s: scheduling 0s, node 3ms, sandbox 112ms (network
//! 41ms), image busybox:latest present, init 0.8s (2 containers), start
//! 25ms, ready after 503ms (readiness probe)`.
//!
//! Every phase is named with its duration, so the parts add up to the
//! total; images are listed where they stand (their time is inside the
//! init or start phase), postStart hooks inside the start phase's. A pod
//! that waited to be scheduled says why, with the scheduler's messages
//! and how often each came: `scheduling 12.3s (waited: 0/1 nodes are
//! available: 1 node(s) had untolerated taint
//! {node-role.kubernetes.io/control-plane: }. (x4))`. Pure text.

use super::compute::Finished;

/// A duration the way the message shows it: `0s`, `25ms`, `1.42s`.
pub fn duration(ms: i64) -> String {
    if ms <= 0 {
        "0s".into()
    } else if ms < 1000 {
        format!("{ms}ms")
    } else {
        let text = format!("{:.2}", ms as f64 / 1000.0);
        format!("{}s", text.trim_end_matches('0').trim_end_matches('.'))
    }
}

/// Bytes as `1.2 MB` (decimal units, as the Pulled event's size is read).
pub fn size(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["kB", "MB", "GB", "TB"];
    if bytes < 1000 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1000.0;
    let mut unit = 0;
    while value >= 1000.0 && unit + 1 < UNITS.len() {
        value /= 1000.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS.get(unit).copied().unwrap_or("TB"))
}

/// Most scheduler messages quoted in the text (the JSON has them all).
const MAX_WAIT_REASONS: usize = 3;

/// ` (waited: MESSAGE (x3); MESSAGE)`, or nothing when the pod did not.
fn waited(f: &Finished) -> String {
    let reasons: Vec<String> = f
        .steps
        .iter()
        .filter(|s| s.name == "unschedulable")
        .filter_map(|s| {
            let message = s.message.as_deref()?;
            Some(match s.count.unwrap_or(1) {
                0 | 1 => message.to_string(),
                n => format!("{message} (x{n})"),
            })
        })
        .collect();
    if reasons.is_empty() {
        return String::new();
    }
    let mut text = reasons
        .iter()
        .take(MAX_WAIT_REASONS)
        .cloned()
        .collect::<Vec<_>>()
        .join("; ");
    if reasons.len() > MAX_WAIT_REASONS {
        text.push_str(&format!("; and {} more", reasons.len() - MAX_WAIT_REASONS));
    }
    format!(" (waited: {text})")
}

/// The event's message.
pub fn text(f: &Finished) -> String {
    let mut parts: Vec<String> = Vec::new();
    let phase = |name: &str| f.phase(name).map(|p| duration(p.duration_ms));
    if let Some(d) = phase("scheduling") {
        parts.push(format!("scheduling {d}{}", waited(f)));
    }
    if let Some(d) = phase("node") {
        parts.push(format!("node {d}"));
    }
    if let Some(d) = phase("sandbox") {
        match f.steps.iter().find(|s| s.name == "network") {
            Some(net) => parts.push(format!(
                "sandbox {d} (network {})",
                duration(net.duration_ms)
            )),
            None => parts.push(format!("sandbox {d}")),
        }
    }
    let mut images: Vec<&str> = Vec::new();
    for s in f.steps.iter().filter(|s| s.name == "image") {
        let Some(image) = s.image.as_deref() else {
            continue;
        };
        if images.contains(&image) {
            continue;
        }
        images.push(image);
        match (s.present, s.bytes) {
            (Some(false), Some(bytes)) => parts.push(format!(
                "image {image} pulled in {} ({})",
                duration(s.duration_ms),
                size(bytes)
            )),
            _ => parts.push(format!("image {image} present")),
        }
    }
    if let Some(d) = phase("init") {
        let n = f.init_containers;
        let noun = if n == 1 { "container" } else { "containers" };
        parts.push(format!("init {d} ({n} {noun})"));
    }
    if let Some(p) = f.phase("start") {
        // The postStart hooks of the regular containers (an init
        // container's ran in the init phase).
        let hooks: Vec<i64> = f
            .steps
            .iter()
            .filter(|s| s.name == "postStart" && s.start_ms >= p.start_ms)
            .map(|s| s.duration_ms)
            .collect();
        let d = duration(p.duration_ms);
        if hooks.is_empty() {
            parts.push(format!("start {d}"));
        } else {
            let hooks = duration(hooks.iter().sum());
            parts.push(format!("start {d} (postStart {hooks})"));
        }
    }
    if let Some(d) = phase("ready") {
        parts.push(format!("ready after {d} ({})", f.ready_after));
    }
    format!("Started in {}: {}", duration(f.total_ms), parts.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timeline::compute::{Phase, Step, API_VERSION, KIND};

    fn phase(name: &str, start_ms: i64, duration_ms: i64) -> Phase {
        Phase {
            name: name.into(),
            start_ms,
            duration_ms,
        }
    }

    fn step(name: &str, container: Option<&str>, start_ms: i64, duration_ms: i64) -> Step {
        Step {
            name: name.into(),
            container: container.map(str::to_string),
            start_ms,
            duration_ms,
            image: None,
            present: None,
            bytes: None,
            message: None,
            count: None,
        }
    }

    #[test]
    fn durations_and_sizes() {
        assert_eq!(duration(0), "0s");
        assert_eq!(duration(3), "3ms");
        assert_eq!(duration(999), "999ms");
        assert_eq!(duration(1420), "1.42s");
        assert_eq!(duration(1500), "1.5s");
        assert_eq!(duration(2000), "2s");
        assert_eq!(size(512), "512 B");
        assert_eq!(size(1_234_567), "1.2 MB");
        assert_eq!(size(4_400_000_000), "4.4 GB");
    }

    #[test]
    fn the_message_names_every_phase_and_the_images() {
        let mut pulled = step("image", Some("app"), 1_000_300, 700);
        pulled.image = Some("localhost:5000/app:v1".into());
        pulled.present = Some(false);
        pulled.bytes = Some(2_100_000);
        let mut present = step("image", Some("i1"), 1_000_200, 2);
        present.image = Some("busybox:latest".into());
        present.present = Some(true);
        let f = Finished {
            api_version: API_VERSION.into(),
            kind: KIND.into(),
            namespace: "default".into(),
            name: "web".into(),
            uid: "u1".into(),
            node: "n1".into(),
            created_ms: 1_000_000,
            ready_ms: 1_002_420,
            total_ms: 2420,
            ready_after: "readiness probe".into(),
            init_containers: 2,
            phases: vec![
                phase("scheduling", 1_000_000, 3),
                phase("node", 1_000_003, 5),
                phase("sandbox", 1_000_008, 112),
                phase("init", 1_000_120, 800),
                phase("start", 1_000_920, 1000),
                phase("ready", 1_001_920, 500),
            ],
            steps: vec![
                step("sandbox", None, 1_000_010, 110),
                step("network", None, 1_000_030, 41),
                present,
                step("start", Some("i1"), 1_000_210, 10),
                step("start", Some("i2"), 1_000_500, 10),
                pulled,
                step("start", Some("app"), 1_001_900, 20),
            ],
        };
        assert_eq!(
            text(&f),
            "Started in 2.42s: scheduling 3ms, node 5ms, sandbox 112ms (network 41ms), \
             image busybox:latest present, image localhost:5000/app:v1 pulled in 700ms (2.1 MB), \
             init 800ms (2 containers), start 1s, ready after 500ms (readiness probe)"
        );
    }

    #[test]
    fn a_pod_that_waited_says_what_for() {
        let taint = "0/1 nodes are available: 1 node(s) had untolerated taint \
            {node-role.kubernetes.io/control-plane: }.";
        let mut queued = step("queued", None, 1_000_000, 12_300);
        queued.count = Some(5);
        let mut tainted = step("unschedulable", None, 1_000_010, 9_000);
        tainted.message = Some(taint.into());
        tainted.count = Some(4);
        let mut none = step("unschedulable", None, 1_000_005, 0);
        none.message = Some("no nodes available to schedule pods".into());
        none.count = Some(1);
        let f = Finished {
            api_version: API_VERSION.into(),
            kind: KIND.into(),
            namespace: "default".into(),
            name: "web".into(),
            uid: "u1".into(),
            node: "n1".into(),
            created_ms: 1_000_000,
            ready_ms: 1_012_400,
            total_ms: 12_400,
            ready_after: "no probe".into(),
            init_containers: 0,
            phases: vec![
                phase("scheduling", 1_000_000, 12_300),
                phase("node", 1_012_300, 5),
                phase("sandbox", 1_012_305, 70),
                phase("start", 1_012_375, 25),
                phase("ready", 1_012_400, 0),
            ],
            steps: vec![
                queued,
                none,
                tainted,
                step("postStart", Some("app"), 1_012_390, 8),
            ],
        };
        assert_eq!(
            text(&f),
            format!(
                "Started in 12.4s: scheduling 12.3s (waited: no nodes available to schedule \
                 pods; {taint} (x4)), node 5ms, sandbox 70ms, start 25ms (postStart 8ms), \
                 ready after 0s (no probe)"
            )
        );
    }
}
