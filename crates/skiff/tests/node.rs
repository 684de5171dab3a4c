//! End to end, as root, on real containerd, runc and CNI: pods created
//! with kubectl run through `skiff server`'s scheduler and node agent.
//! Each test has its own server, data dir, containerd, bridge and pod
//! CIDR (see cluster/), so they run in parallel.

mod cluster;

use std::time::Duration;

use cluster::{http_get, wait_for, Cluster, Options};

/// `kubectl run` of busybox httpd reaches Running and Ready, answers on
/// its pod IP from the host, and its events come in the kubelet's order.
#[test]
fn a_pod_runs_and_serves_on_its_ip() {
    let c = Cluster::start(Options::default());
    c.kubectl(&[
        "run",
        "web",
        "--image=busybox",
        "--",
        "httpd",
        "-f",
        "-p",
        "8080",
    ]);
    c.wait("pod/web", "condition=Ready", 60);
    assert_eq!(c.pod_field("web", "{.status.phase}"), "Running");
    let ip = c.pod_field("web", "{.status.podIP}");
    assert!(
        ip.starts_with(&format!("10.{}.", c.cidr.octet)),
        "pod IP {ip}"
    );
    assert_eq!(c.pod_field("web", "{.status.hostIP}"), "127.0.0.1");
    assert!(c
        .pod_field("web", "{.status.containerStatuses[0].containerID}")
        .starts_with("containerd://"));
    // httpd answers 404 for a missing page: that is an answer.
    let answer = wait_for("httpd to answer", Duration::from_secs(20), || {
        http_get(&format!("{ip}:8080"), "/").ok()
    });
    assert!(answer.starts_with("HTTP/1."), "{answer}");

    let reasons = c.event_reasons("web");
    let order: Vec<&str> = reasons
        .iter()
        .map(String::as_str)
        .filter(|r| ["Scheduled", "Pulled", "Created", "Started"].contains(r))
        .collect();
    assert_eq!(
        order,
        ["Scheduled", "Pulled", "Created", "Started"],
        "{reasons:?}"
    );
    let describe = c.kubectl(&["describe", "pod", "web"]);
    assert!(describe.contains("Started container web"), "{describe}");
    assert!(
        describe.contains("Container image \"busybox\" already present on machine")
            || describe.contains("Successfully pulled image"),
        "{describe}"
    );

    // The node reports itself Ready with upstream's reason.
    let ready = c.kubectl(&[
        "get",
        "node",
        &c.node(),
        "-o",
        "jsonpath={.status.conditions[?(@.type==\"Ready\")].reason}",
    ]);
    assert_eq!(ready, "KubeletReady");

    // Deleting it stops the container and removes the object.
    c.kubectl(&["delete", "pod", "web", "--wait=true", "--timeout=60s"]);
}
