//! End to end, as root, on real containerd: the node agent pulls images
//! from a real local registry (Debian's docker-registry on 127.0.0.1, plain
//! HTTP, no auth; see skiff_testkit::registry) per imagePullPolicy, with the
//! kubelet's events and waiting reasons (ErrImagePull, ImagePullBackOff,
//! ErrImageNeverPull, InvalidImageName). Each test has its own cluster and
//! registry, so they run in parallel.

mod cluster;

use std::path::Path;
use std::time::Duration;

use cluster::{Cluster, Options};
use skiff_testkit::Registry;

/// Builds the offline busybox image (an OCI archive from the host's static
/// busybox) and pushes it to `registry` as `name_tag` (`test/busybox:v1`);
/// returns the full image name `ADDR/name_tag`.
fn push_busybox(registry: &Registry, name_tag: &str) -> String {
    let archive = skiff_node::images::builtin::busybox_archive(Path::new("/bin/busybox"))
        .expect("building the busybox image (install busybox-static)");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("busybox.oci.tar");
    std::fs::write(&path, archive).unwrap();
    registry.push(&path, name_tag).unwrap();
    let (name, tag) = name_tag.rsplit_once(':').unwrap();
    assert!(registry.has(name, tag), "{name_tag} is not in the registry");
    format!("{}/{name_tag}", registry.addr())
}

/// A one-container pod running `sleep 3600` from `image`.
fn pod(name: &str, image: &str, policy: &str) -> String {
    format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: {name}
spec:
  terminationGracePeriodSeconds: 0
  containers:
  - name: main
    image: "{image}"
    imagePullPolicy: {policy}
    command: ["sleep", "3600"]
"#
    )
}

/// The (reason, message) of pod `name`'s events, oldest first.
fn events(c: &Cluster, name: &str) -> Vec<(String, String)> {
    let out = c.kubectl(&[
        "get",
        "events",
        "--field-selector",
        &format!("involvedObject.name={name}"),
        "--sort-by=.metadata.creationTimestamp",
        "-o",
        "jsonpath={range .items[*]}{.reason}{\"\\t\"}{.message}{\"\\n\"}{end}",
    ]);
    out.lines()
        .filter_map(|l| l.split_once('\t'))
        .map(|(r, m)| (r.to_string(), m.to_string()))
        .collect()
}

/// Waits (at most 30 s) until pod `name` has an event `reason` whose message
/// satisfies `ok`; returns all its events then.
fn wait_event(
    c: &Cluster,
    name: &str,
    reason: &str,
    ok: impl Fn(&str) -> bool,
) -> Vec<(String, String)> {
    let mut last = Vec::new();
    let found = wait_for_or(Duration::from_secs(30), || {
        last = events(c, name);
        last.iter().any(|(r, m)| r == reason && ok(m)).then_some(())
    });
    assert!(
        found.is_some(),
        "pod {name}: no {reason} event as expected; events: {last:#?}"
    );
    last
}

/// Like `wait_for`, but gives `None` at the deadline instead of failing.
fn wait_for_or<T>(timeout: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return Some(v);
        }
        if std::time::Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn waiting_message(c: &Cluster, name: &str) -> String {
    c.pod_field(name, "{.status.containerStatuses[0].state.waiting.message}")
}

/// Waits (kubectl wait on a watch) until pod `name`'s container waits
/// with `reason`.
fn wait_waiting(c: &Cluster, name: &str, reason: &str, timeout_s: u32) {
    c.wait(
        &format!("pod/{name}"),
        &format!("jsonpath={{.status.containerStatuses[0].state.waiting.reason}}={reason}"),
        timeout_s,
    );
}

/// The STATUS column of `kubectl get pod name`.
fn status_column(c: &Cluster, name: &str) -> String {
    let out = c.kubectl(&["get", "pod", name, "--no-headers"]);
    out.split_whitespace()
        .nth(2)
        .unwrap_or_default()
        .to_string()
}

/// `kubectl get pods -w` of one pod, started before the pod exists, so
/// that it sees every status the agent writes, even short-lived ones (an
/// ErrImagePull that becomes ImagePullBackOff at the next sync). Each line
/// is `REASON|MESSAGE` of the first container's waiting state. Killed (by
/// its PID) on drop.
struct Watch {
    child: std::process::Child,
    lines: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl Watch {
    fn start(c: &Cluster, name: &str) -> Self {
        use std::io::BufRead;
        use std::process::{Command, Stdio};
        let mut child = Command::new(cluster::KUBECTL)
            .arg("--kubeconfig")
            .arg(&c.kubeconfig)
            .args([
                "get",
                "pods",
                "--watch",
                "-v=6",
                "--field-selector",
                &format!("metadata.name={name}"),
                "-o",
                "jsonpath={.status.containerStatuses[0].state.waiting.reason}|{.status.containerStatuses[0].state.waiting.message}{\"\\n\"}",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let lines = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let out = std::io::BufReader::new(child.stdout.take().unwrap());
        let sink = lines.clone();
        std::thread::spawn(move || {
            for line in out.lines().map_while(Result::ok) {
                sink.lock().unwrap().push(line);
            }
        });
        // -v=6 logs each request; the watch is open once its GET answered.
        let (tx, rx) = std::sync::mpsc::channel();
        let err = std::io::BufReader::new(child.stderr.take().unwrap());
        std::thread::spawn(move || {
            let mut log = Vec::new();
            for line in err.lines().map_while(Result::ok) {
                if line.contains("watch=true") && line.contains("200 OK") {
                    let _ = tx.send(Ok(()));
                }
                log.push(line);
            }
            let _ = tx.send(Err(log.join("\n")));
        });
        match rx.recv_timeout(Duration::from_secs(20)) {
            Ok(Ok(())) => {}
            other => panic!("kubectl get pods --watch did not start watching: {other:?}"),
        }
        Self { child, lines }
    }

    fn lines(&self) -> Vec<String> {
        self.lines.lock().unwrap().clone()
    }

    /// Waits (at most `timeout`) for a line `reason|...`; its message.
    fn wait_reason(&self, reason: &str, timeout: Duration) -> String {
        let prefix = format!("{reason}|");
        let found = wait_for_or(timeout, || {
            self.lines()
                .iter()
                .find_map(|l| l.strip_prefix(&prefix).map(str::to_string))
        });
        found.unwrap_or_else(|| {
            panic!(
                "the watch saw no waiting reason {reason} within {timeout:?}: {:#?}",
                self.lines()
            )
        })
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// How many times pod `name` got an event `reason` (the recorder folds
/// repeats into one event with a count), and the seconds between the
/// first and the last.
fn event_count(c: &Cluster, name: &str, reason: &str) -> (u32, i64) {
    let out = c.kubectl(&[
        "get",
        "events",
        "--field-selector",
        &format!("involvedObject.name={name},reason={reason}"),
        "-o",
        "jsonpath={range .items[*]}{.count}|{.firstTimestamp}|{.lastTimestamp}{\"\\n\"}{end}",
    ]);
    let secs = |t: &str| -> i64 {
        // RFC 3339 in UTC, e.g. 2025-01-02T03:04:05Z: seconds since 1970.
        let n = |a: usize, b: usize| t.get(a..b).and_then(|x| x.parse::<i64>().ok()).unwrap_or(0);
        let (y, m, d) = (n(0, 4), n(5, 7), n(8, 10));
        // Days from civil (Howard Hinnant's algorithm).
        let y = if m <= 2 { y - 1 } else { y };
        let era = y.div_euclid(400);
        let yoe = y - era * 400;
        let doy = (153 * ((m + 9) % 12) + 2) / 5 + d - 1;
        let days = era * 146_097 + (yoe * 365 + yoe / 4 - yoe / 100 + doy) - 719_468;
        days * 86_400 + n(11, 13) * 3600 + n(14, 16) * 60 + n(17, 19)
    };
    let (mut count, mut first, mut last) = (0, i64::MAX, i64::MIN);
    for l in out.lines() {
        let f: Vec<&str> = l.split('|').collect();
        count += f[0].parse::<u32>().unwrap_or(1).max(1);
        first = first.min(secs(f[1]));
        last = last.max(secs(f[2]));
    }
    (count, if count > 0 { last - first } else { 0 })
}

/// A pulled image runs; its events say Pulling then Pulled with the
/// duration and size; a second pod (IfNotPresent) uses the present image
/// without pulling; a third (Always) pulls again.
#[test]
fn pulls_from_a_registry_then_reuses_the_image() {
    let registry = Registry::start();
    let image = push_busybox(&registry, "test/busybox:v1");
    let c = Cluster::start(Options::default());

    c.apply(&pod("first", &image, "IfNotPresent"));
    c.wait("pod/first", "condition=Ready", 90);
    assert_eq!(c.pod_field("first", "{.status.phase}"), "Running");
    let pulled_prefix = format!("Successfully pulled image \"{image}\" in ");
    let is_pulled = |m: &str| {
        m.starts_with(&pulled_prefix) && m.contains("Image size: ") && m.ends_with(" bytes.")
    };
    let ev = wait_event(&c, "first", "Pulled", is_pulled);
    let pulling = ev
        .iter()
        .position(|(r, m)| r == "Pulling" && *m == format!("Pulling image \"{image}\""))
        .unwrap_or_else(|| panic!("no Pulling event: {ev:#?}"));
    let pulled = ev
        .iter()
        .position(|(r, m)| r == "Pulled" && is_pulled(m))
        .unwrap();
    assert!(pulling < pulled, "Pulling after Pulled: {ev:#?}");
    // "... Image size: 1234567 bytes." with a real size.
    let size: u64 = ev[pulled]
        .1
        .rsplit_once("Image size: ")
        .and_then(|(_, s)| s.strip_suffix(" bytes."))
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no size in {:?}", ev[pulled].1));
    assert!(size > 100_000, "image size {size}");
    let image_id = c.pod_field("first", "{.status.containerStatuses[0].imageID}");
    assert!(image_id.contains("sha256:"), "imageID {image_id:?}");
    eprintln!(
        "first: image {:?} imageID {image_id:?}; events {ev:#?}",
        c.pod_field("first", "{.status.containerStatuses[0].image}")
    );

    // Present now: IfNotPresent does not pull.
    c.apply(&pod("second", &image, "IfNotPresent"));
    c.wait("pod/second", "condition=Ready", 60);
    let present = format!("Container image \"{image}\" already present on machine");
    let ev = wait_event(&c, "second", "Pulled", |m| m == present);
    assert!(
        !ev.iter().any(|(r, _)| r == "Pulling"),
        "second pulled: {ev:#?}"
    );

    // Always pulls even so.
    c.apply(&pod("third", &image, "Always"));
    c.wait("pod/third", "condition=Ready", 60);
    let ev = wait_event(&c, "third", "Pulled", is_pulled);
    assert!(
        ev.iter()
            .any(|(r, m)| r == "Pulling" && *m == format!("Pulling image \"{image}\"")),
        "third did not pull: {ev:#?}"
    );
}

/// A tag the registry does not have: ErrImagePull with the registry's
/// "not found" as the waiting message, then ImagePullBackOff, a second
/// pull once the 10 s back-off has passed, and ImagePullBackOff again
/// during the 20 s back-off after it.
#[test]
fn a_missing_tag_is_err_image_pull_then_back_off() {
    let registry = Registry::start();
    let pushed = push_busybox(&registry, "test/busybox:v1");
    let image = pushed.replace(":v1", ":nope");
    let c = Cluster::start(Options::default());

    let watch = Watch::start(&c, "nope");
    c.apply(&pod("nope", &image, "IfNotPresent"));
    let pull_error = watch.wait_reason("ErrImagePull", Duration::from_secs(60));
    let failed = format!("Failed to pull image \"{image}\": {pull_error}");
    assert!(pull_error.contains("not found"), "{pull_error}");
    let ev = wait_event(&c, "nope", "Failed", |m| m == failed);
    assert!(
        ev.iter()
            .any(|(r, m)| r == "Failed" && m == "Error: ErrImagePull"),
        "{ev:#?}"
    );
    let status = status_column(&c, "nope");
    assert!(
        ["ErrImagePull", "ImagePullBackOff"].contains(&status.as_str()),
        "STATUS {status}"
    );

    // The back-off starts at 10 s.
    c.wait(
        "pod/nope",
        "jsonpath={.status.containerStatuses[0].state.waiting.reason}=ImagePullBackOff",
        60,
    );
    let message = waiting_message(&c, "nope");
    assert!(
        message.starts_with(&format!("Back-off pulling image \"{image}\"")),
        "{message}"
    );
    let ev = wait_event(&c, "nope", "BackOff", |m| {
        m == format!("Back-off pulling image \"{image}\"")
    });
    assert!(
        ev.iter()
            .any(|(r, m)| r == "Failed" && m == "Error: ImagePullBackOff"),
        "{ev:#?}"
    );
    assert_eq!(status_column(&c, "nope"), "ImagePullBackOff");
    assert_eq!(c.pod_field("nope", "{.status.phase}"), "Pending");

    // After the back-off it pulls again (and fails again).
    let (pulls, apart) = wait_for_or(Duration::from_secs(40), || {
        let (n, apart) = event_count(&c, "nope", "Pulling");
        (n >= 2).then_some((n, apart))
    })
    .unwrap_or_else(|| panic!("no second pull: {:#?}", events(&c, "nope")));
    assert!(apart >= 9, "pulled {pulls} times within {apart} s");

    // Each failed pull is ErrImagePull, and the longer back-off after the
    // second (20 s) is seen as ImagePullBackOff before the third pull:
    // the watch alternates (upstream's pod worker syncs again after 10 s).
    let alternated = |lines: &[String]| {
        let mut reasons: Vec<&str> = lines
            .iter()
            .filter_map(|l| l.split('|').next())
            .filter(|r| !r.is_empty())
            .collect();
        reasons.dedup();
        let mut seen = reasons.iter();
        [
            "ErrImagePull",
            "ImagePullBackOff",
            "ErrImagePull",
            "ImagePullBackOff",
        ]
        .iter()
        .all(|want| seen.any(|r| r == want))
    };
    wait_for_or(Duration::from_secs(60), || {
        alternated(&watch.lines()).then_some(())
    })
    .unwrap_or_else(|| {
        panic!(
            "the watch did not alternate ErrImagePull / ImagePullBackOff after the second pull: {:#?}\nevents {:#?}",
            watch.lines(),
            events(&c, "nope")
        )
    });
    eprintln!(
        "nope: watch {:#?}\nwaiting {message:?}; {pulls} pulls {apart} s apart; events {:#?}",
        watch.lines(),
        events(&c, "nope")
    );
}

/// imagePullPolicy Never with an image the node does not have.
#[test]
fn never_with_an_absent_image_is_err_image_never_pull() {
    let c = Cluster::start(Options::default());
    let image = "127.0.0.1:1/test/absent:v1";
    c.apply(&pod("never", image, "Never"));
    wait_waiting(&c, "never", "ErrImageNeverPull", 60);
    let want = format!("Container image \"{image}\" is not present with pull policy of Never");
    assert_eq!(waiting_message(&c, "never"), want);
    let ev = wait_event(&c, "never", "ErrImageNeverPull", |m| m == want);
    assert!(!ev.iter().any(|(r, _)| r == "Pulling"), "{ev:#?}");
    assert_eq!(status_column(&c, "never"), "ErrImageNeverPull");
    eprintln!("never: events {ev:#?}");
}

/// A name the API server accepts (it only wants it non-empty) that is not
/// an image reference.
#[test]
fn an_invalid_image_name_is_invalid_image_name() {
    let c = Cluster::start(Options::default());
    c.apply(&pod("upper", "BUSYBOX:1", "IfNotPresent"));
    wait_waiting(&c, "upper", "InvalidImageName", 60);
    let message = waiting_message(&c, "upper");
    assert!(
        message.starts_with(
            "Failed to apply default image tag \"BUSYBOX:1\": couldn't parse image name \"BUSYBOX:1\": invalid reference format"
        ),
        "{message}"
    );
    let ev = wait_event(&c, "upper", "InspectFailed", |m| m == message);
    assert!(
        ev.iter()
            .any(|(r, m)| r == "Failed" && m == "Error: InvalidImageName"),
        "{ev:#?}"
    );
    assert!(!ev.iter().any(|(r, _)| r == "Pulling"), "{ev:#?}");
    assert_eq!(status_column(&c, "upper"), "InvalidImageName");
    eprintln!("upper: waiting {message:?}; events {ev:#?}");
}

/// With the registry gone, pulling a tag the node does not have fails with
/// the dial error; an image the node has still runs (the agent's offline
/// fallback for Always).
#[test]
fn a_stopped_registry_is_err_image_pull_connection_refused() {
    let mut registry = Registry::start();
    let image = push_busybox(&registry, "test/busybox:v1");
    let c = Cluster::start(Options::default());
    c.apply(&pod("before", &image, "Always"));
    c.wait("pod/before", "condition=Ready", 90);

    registry.stop();
    let gone = image.replace(":v1", ":gone");
    let watch = Watch::start(&c, "gone");
    c.apply(&pod("gone", &gone, "Always"));
    let pull_error = watch.wait_reason("ErrImagePull", Duration::from_secs(60));
    assert!(pull_error.contains("connection refused"), "{pull_error}");
    let failed = format!("Failed to pull image \"{gone}\": {pull_error}");
    let ev = wait_event(&c, "gone", "Failed", |m| m == failed);
    assert_eq!(c.pod_field("gone", "{.status.phase}"), "Pending");
    eprintln!("gone: watch {:#?}; events {ev:#?}", watch.lines());

    // Present on the node: Always falls back to it when the registry
    // cannot be reached.
    c.apply(&pod("after", &image, "Always"));
    c.wait("pod/after", "condition=Ready", 60);
    let ev = wait_event(&c, "after", "Pulled", |m| {
        m == format!("Container image \"{image}\" already present on machine")
    });
    assert!(
        ev.iter()
            .any(|(r, m)| r == "Failed" && m.contains("connection refused")),
        "{ev:#?}"
    );
}
