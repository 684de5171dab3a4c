//! The scheduler against the real API server and store, with Node objects
//! only (no node agent): failure diagnostics, tolerations, node selectors
//! fixed by labelling, resources, spreading, and leader failover.

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{DeleteParams, PostParams};
use kube::Api;
use skiff_api::scheduling_wait::SchedulingWait;
use skiff_client::testing::{node, pod};
use support::{
    node_of, pod_scheduled, test_config, wait_for, wait_for_or, RunningScheduler, TestServer,
};
use tokio_util::sync::CancellationToken;

const CONTROL_PLANE: &str = "node-role.kubernetes.io/control-plane";

/// Waits until pod `name` is bound; returns its node.
async fn bound(server: &TestServer, name: &str) -> String {
    let pods = server.pods();
    wait_for(&format!("pod {name} bound"), || {
        let pods = pods.clone();
        async move { pods.get(name).await.ok().as_ref().and_then(node_of) }
    })
    .await
}

/// Waits until pod `name` has PodScheduled=False/Unschedulable with
/// `message`, and checks it is still unbound. (Upstream's message really
/// ends in ".." when preemption adds its own sentence.)
async fn pending_with(server: &TestServer, name: &str, message: &str) {
    let pods = server.pods();
    let want = (
        "False".to_string(),
        Some("Unschedulable".to_string()),
        Some(message.to_string()),
    );
    let pod = wait_for_or(&format!("PodScheduled=False on {name}"), || {
        let pods = pods.clone();
        let want = want.clone();
        async move {
            let pod = pods.get(name).await.map_err(|e| e.to_string())?;
            let got = pod_scheduled(&pod);
            if got == Some(want) {
                Ok(pod)
            } else {
                Err(format!("{got:?}"))
            }
        }
    })
    .await;
    assert_eq!(node_of(&pod), None);
    assert_eq!(pod.status.and_then(|s| s.phase).as_deref(), Some("Pending"));
}

/// Waits for exactly one FailedScheduling event about `name` with
/// `message`, whose count reaches `count`.
async fn failed_scheduling(server: &TestServer, name: &str, message: &str, count: i32) {
    let ev = wait_for(&format!("FailedScheduling x{count} for {name}"), || async {
        let events = server.events_for(name, "FailedScheduling").await;
        let same: Vec<_> = events
            .into_iter()
            .filter(|e| e.message.as_deref() == Some(message))
            .collect();
        assert!(same.len() <= 1, "duplicated events: {same:#?}");
        same.into_iter().find(|e| e.count == Some(count))
    })
    .await;
    assert_eq!(ev.type_.as_deref(), Some("Warning"));
    let source = ev.source.and_then(|s| s.component);
    assert_eq!(source.as_deref(), Some("default-scheduler"));
    assert_eq!(ev.reporting_component.as_deref(), Some("default-scheduler"));
    let name_prefix = format!("{name}.");
    assert!(ev
        .metadata
        .name
        .is_some_and(|n| n.starts_with(&name_prefix)));
    assert!(ev.last_timestamp.is_some() && ev.first_timestamp.is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_node_tainted_keeps_the_pod_pending_with_the_upstream_message() {
    let server = TestServer::start().await;
    let _scheduler = RunningScheduler::start(server.client.clone(), test_config("s1"));
    for name in ["n1", "n2"] {
        let n = node(name).taint(CONTROL_PLANE, "", "NoSchedule").build();
        server.create_node(n).await;
    }
    let n3 =
        node("n3")
            .taint(CONTROL_PLANE, "", "NoSchedule")
            .taint("dedicated", "db", "NoSchedule");
    server.create_node(n3.build()).await;
    server.create_pod(pod("web").build()).await;

    let message = "0/3 nodes are available: 3 node(s) had untolerated taint \
        {node-role.kubernetes.io/control-plane: }. preemption: 0/3 nodes are available: \
        3 Preemption is not helpful for scheduling..";
    pending_with(&server, "web", message).await;
    failed_scheduling(&server, "web", message, 1).await;

    // Removing one of n3's taints requeues the pod; it fails the same way,
    // and the event is counted rather than repeated.
    let mut n3 = server.nodes().get("n3").await.expect("n3");
    n3.spec
        .as_mut()
        .and_then(|s| s.taints.as_mut())
        .expect("taints")
        .retain(|t| t.key != "dedicated");
    server
        .nodes()
        .replace("n3", &PostParams::default(), &n3)
        .await
        .expect("untaint n3");
    failed_scheduling(&server, "web", message, 2).await;
    pending_with(&server, "web", message).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_toleration_schedules_onto_tainted_nodes() {
    let server = TestServer::start().await;
    let _scheduler = RunningScheduler::start(server.client.clone(), test_config("s1"));
    for name in ["n1", "n2"] {
        let n = node(name).taint(CONTROL_PLANE, "", "NoSchedule").build();
        server.create_node(n).await;
    }
    let tolerating = pod("web")
        .toleration(CONTROL_PLANE, "Exists", "", "NoSchedule")
        .build();
    server.create_pod(tolerating).await;
    let node = bound(&server, "web").await;
    assert!(node == "n1" || node == "n2", "bound to {node}");

    let pod = server.pods().get("web").await.expect("web");
    let scheduled = pod_scheduled(&pod).map(|c| c.0);
    assert_eq!(scheduled.as_deref(), Some("True"));
    // Bound at its first attempt: no wait record on the pod.
    assert_eq!(
        SchedulingWait::from_annotations(pod.metadata.annotations.as_ref()),
        None
    );
    let message = format!("Successfully assigned default/web to {node}");
    let ev = wait_for("Scheduled event", || async {
        server
            .events_for("web", "Scheduled")
            .await
            .into_iter()
            .next()
    })
    .await;
    assert_eq!(ev.message.as_deref(), Some(message.as_str()));
    assert_eq!(ev.type_.as_deref(), Some("Normal"));
    assert_eq!(ev.reporting_instance.as_deref(), Some("s1"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_selector_is_satisfied_once_a_node_is_labelled() {
    let server = TestServer::start().await;
    let _scheduler = RunningScheduler::start(server.client.clone(), test_config("s1"));
    server.create_node(node("n1").build()).await;
    server.create_node(node("n2").build()).await;
    server
        .create_pod(pod("db").node_selector("disk", "ssd").build())
        .await;
    let message = "0/2 nodes are available: 2 node(s) didn't match Pod's node \
        affinity/selector. preemption: 0/2 nodes are available: 2 Preemption is not \
        helpful for scheduling..";
    pending_with(&server, "db", message).await;
    failed_scheduling(&server, "db", message, 1).await;

    // The fix a user makes: `kubectl label node n2 disk=ssd`.
    let kubectl = std::path::Path::new("/usr/lib/google-cloud-sdk/bin/kubectl.1.33");
    let labelled = std::process::Command::new(kubectl)
        .arg("--kubeconfig")
        .arg(server.dir.path().join("admin.kubeconfig"))
        .arg("--cache-dir")
        .arg(server.dir.path().join("kubectl-cache"))
        .args(["label", "node", "n2", "disk=ssd"])
        .output()
        .expect("run kubectl");
    assert!(labelled.status.success(), "kubectl label: {labelled:?}");
    assert_eq!(bound(&server, "db").await, "n2");

    // What it waited for rode on its binding onto the pod.
    let pod = server.pods().get("db").await.expect("db");
    let wait = SchedulingWait::from_annotations(pod.metadata.annotations.as_ref())
        .expect("the scheduling wait annotation");
    assert!(wait.attempts >= 1, "{wait:?}");
    let reason = &wait.reasons[0];
    assert_eq!(reason.message, message);
    assert!(
        reason.count >= 1 && reason.count <= wait.attempts,
        "{wait:?}"
    );
    let created = pod.metadata.creation_timestamp.expect("created").0;
    assert!(
        wait.queued_ms >= created.as_millisecond() && wait.queued_ms <= reason.first_ms,
        "{wait:?} created {created}"
    );
    assert!(reason.first_ms <= reason.last_ms);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn insufficient_cpu_until_an_assigned_pod_goes_away() {
    let server = TestServer::start().await;
    let _scheduler = RunningScheduler::start(server.client.clone(), test_config("s1"));
    server.create_node(node("small").cpu("1").build()).await;
    server.create_node(node("big").cpu("2").build()).await;

    // More than any node has at all: preemption could not help either.
    server.create_pod(pod("huge").req_cpu("3").build()).await;
    let message = "0/2 nodes are available: 2 Insufficient cpu. preemption: 0/2 nodes are \
        available: 2 Preemption is not helpful for scheduling..";
    pending_with(&server, "huge", message).await;
    failed_scheduling(&server, "huge", message, 1).await;

    // Two pods created back to back: the second sees the first's
    // assumption before the watch reports the binding.
    server.create_pod(pod("a").req_cpu("1500m").build()).await;
    server.create_pod(pod("b").req_cpu("1500m").build()).await;
    assert_eq!(bound(&server, "a").await, "big");
    // Fits "big" only if "a" goes (a preemption victim, were there
    // priorities); never fits "small".
    let message = "0/2 nodes are available: 2 Insufficient cpu. preemption: 0/2 nodes are \
        available: 1 No preemption victims found for incoming pod, 1 Preemption is not helpful \
        for scheduling..";
    pending_with(&server, "b", message).await;
    failed_scheduling(&server, "b", message, 1).await;

    // Deleting the assigned pod frees the cpu: b is requeued and fits.
    server
        .pods()
        .delete("a", &DeleteParams::default().grace_period(0))
        .await
        .expect("delete a");
    assert_eq!(bound(&server, "b").await, "big");
    let huge = server.pods().get("huge").await.expect("huge");
    assert_eq!(node_of(&huge), None);
}

/// A pod that finishes frees what it requested, though it stays in the
/// API: the scheduler's watch (pods neither Succeeded nor Failed) sees it
/// leave. Before the API server wrote that DELETED line `type` first, the
/// watch could not decode it and the node stayed full.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finished_pod_frees_its_cpu() {
    let server = TestServer::start().await;
    let _scheduler = RunningScheduler::start(server.client.clone(), test_config("s1"));
    server.create_node(node("only").cpu("1").build()).await;
    server.create_pod(pod("job").req_cpu("1").build()).await;
    assert_eq!(bound(&server, "job").await, "only");
    server.create_pod(pod("next").req_cpu("1").build()).await;
    let message = "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are \
        available: 1 No preemption victims found for incoming pod..";
    pending_with(&server, "next", message).await;

    server
        .pods()
        .patch_status(
            "job",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(serde_json::json!({"status": {"phase": "Succeeded"}})),
        )
        .await
        .expect("job Succeeded");
    assert_eq!(bound(&server, "next").await, "only");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_pods_spread_over_ten_nodes() {
    let server = TestServer::start().await;
    for i in 0..10 {
        server.create_node(node(&format!("n{i}")).build()).await;
    }
    // Pods exist before the scheduler starts (caches sync first), and more
    // arrive while it runs.
    for i in 0..50 {
        server.create_pod(pod(&format!("p{i}")).build()).await;
    }
    let _scheduler = RunningScheduler::start(server.client.clone(), test_config("s1"));
    for i in 50..100 {
        server.create_pod(pod(&format!("p{i}")).build()).await;
    }
    let pods = server.pods();
    let per_node = wait_for("100 pods bound", || {
        let pods = pods.clone();
        async move {
            let list = pods.list(&Default::default()).await.ok()?;
            let nodes: Vec<String> = list.items.iter().filter_map(node_of).collect();
            (nodes.len() == 100).then(|| {
                let mut per_node: BTreeMap<String, usize> = BTreeMap::new();
                for n in nodes {
                    *per_node.entry(n).or_default() += 1;
                }
                per_node
            })
        }
    })
    .await;
    assert_eq!(per_node.len(), 10, "{per_node:?}");
    assert!(
        per_node.values().all(|&n| (8..=12).contains(&n)),
        "not spread within ±2: {per_node:?}"
    );
    let scheduled = wait_for("100 Scheduled events", || async {
        let events = server
            .events()
            .list(&kube::api::ListParams::default().fields("reason=Scheduled"))
            .await
            .ok()?;
        (events.items.len() == 100).then_some(events.items)
    })
    .await;
    assert!(scheduled.iter().all(|e| e.count == Some(1)));
}

async fn lease_holder(server: &TestServer) -> Option<String> {
    let leases: Api<Lease> = Api::namespaced(server.client.clone(), "kube-system");
    leases
        .get_opt("kube-scheduler")
        .await
        .ok()
        .flatten()
        .and_then(|l| l.spec)
        .and_then(|s| s.holder_identity)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_standby_takes_over_when_the_leader_stops() {
    let server = TestServer::start().await;
    server.create_node(node("n1").build()).await;
    let a = RunningScheduler::start(server.client.clone(), test_config("a"));
    wait_for("a leads", || async {
        (lease_holder(&server).await.as_deref() == Some("a")).then_some(())
    })
    .await;
    let _b = RunningScheduler::start(server.client.clone(), test_config("b"));

    server.create_pod(pod("first").build()).await;
    bound(&server, "first").await;
    let by = wait_for("Scheduled event for first", || async {
        server
            .events_for("first", "Scheduled")
            .await
            .into_iter()
            .next()
    })
    .await;
    assert_eq!(by.reporting_instance.as_deref(), Some("a"));
    assert_eq!(lease_holder(&server).await.as_deref(), Some("a"));

    // The leader stops without releasing the lease (like a crash): the
    // standby must wait for it to expire, and take over within 15 s.
    a.stop().await;
    let stopped = tokio::time::Instant::now();
    server.create_pod(pod("second").build()).await;
    bound(&server, "second").await;
    let took = stopped.elapsed();
    assert!(took < Duration::from_secs(15), "takeover took {took:?}");
    assert_eq!(lease_holder(&server).await.as_deref(), Some("b"));
    let by = wait_for("Scheduled event for second", || async {
        server
            .events_for("second", "Scheduled")
            .await
            .into_iter()
            .next()
    })
    .await;
    assert_eq!(by.reporting_instance.as_deref(), Some("b"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopping_releases_the_lease_when_configured() {
    let server = TestServer::start().await;
    let mut config = test_config("a");
    if let Some(le) = config.leader_election.as_mut() {
        le.release_on_cancel = true;
        // Long enough that only a release explains a quick takeover.
        le.lease_duration = Duration::from_secs(60);
        le.renew_deadline = Duration::from_secs(40);
    }
    let a = RunningScheduler::start(server.client.clone(), config.clone());
    wait_for("a leads", || async {
        (lease_holder(&server).await.as_deref() == Some("a")).then_some(())
    })
    .await;
    a.stop().await;
    assert_eq!(lease_holder(&server).await, None);
    config.identity = "b".into();
    let _b = RunningScheduler::start(server.client.clone(), config);
    wait_for("b leads", || async {
        (lease_holder(&server).await.as_deref() == Some("b")).then_some(())
    })
    .await;
}

/// Writes the lease as held by `who`, renewed now.
async fn steal_lease_with(client: &kube::Client, who: &str) {
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-system");
    loop {
        let mut lease = leases.get("kube-scheduler").await.expect("lease");
        let spec = lease.spec.get_or_insert_with(Default::default);
        spec.holder_identity = Some(who.into());
        spec.renew_time = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(
            k8s_openapi::jiff::Timestamp::now(),
        ));
        match leases
            .replace("kube-scheduler", &PostParams::default(), &lease)
            .await
        {
            Ok(_) => return,
            Err(kube::Error::Api(s)) if s.code == 409 => continue,
            Err(e) => panic!("stealing the lease: {e}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_that_loses_its_lease_stops_scheduling() {
    let server = TestServer::start().await;
    server.create_node(node("n1").build()).await;
    let mut a = RunningScheduler::start(server.client.clone(), test_config("a"));
    a.wait_leading(true).await;

    // Another holder takes the lease and keeps renewing it (every 250 ms,
    // as a live leader would): a notices at its next renewal and stops.
    let intruder = CancellationToken::new();
    let renewing = {
        let (server_client, stop) = (server.client.clone(), intruder.clone());
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(250));
            while !stop.is_cancelled() {
                steal_lease_with(&server_client, "intruder").await;
                tokio::select! {
                    _ = stop.cancelled() => {}
                    _ = tick.tick() => {}
                }
            }
        })
    };
    a.wait_leading(false).await;
    server.create_pod(pod("orphan").build()).await;
    // Nobody schedules while the intruder holds the lease.
    let p = server.pods().get("orphan").await.expect("orphan");
    assert_eq!(node_of(&p), None, "scheduled without holding the lease");
    assert_eq!(lease_holder(&server).await.as_deref(), Some("intruder"));
    intruder.cancel();
    renewing.await.expect("intruder task");
    // The intruder goes silent: a takes the lease back and schedules.
    bound(&server, "orphan").await;
    assert_eq!(lease_holder(&server).await.as_deref(), Some("a"));
}

/// More pods than there are bind tasks: the pool works through its queue
/// and reports every binding.
#[tokio::test]
async fn the_binder_pool_binds_more_pods_than_it_has_tasks() {
    use skiff_client::recorder::Recorder;
    use skiff_scheduler::binder::{Binder, MAX_BINDS_IN_FLIGHT};

    let server = TestServer::start().await;
    let count = 2 * MAX_BINDS_IN_FLIGHT + 10;
    let mut pods = Vec::new();
    for i in 0..count {
        pods.push(std::sync::Arc::new(
            server.create_pod(pod(&format!("p{i}")).build()).await,
        ));
    }
    let mut tasks = tokio::task::JoinSet::new();
    let recorder = Recorder::new(server.client.clone(), "default-scheduler", "test");
    let (outcomes_tx, mut outcomes) = tokio::sync::mpsc::unbounded_channel();
    let binder = Binder::start(&mut tasks, &server.client, &recorder, &outcomes_tx);
    for p in pods {
        binder.bind(p, "n1".into());
    }
    let mut bound = std::collections::BTreeSet::new();
    while bound.len() < count {
        let outcome = tokio::time::timeout(support::WAIT, outcomes.recv())
            .await
            .expect("outcomes in time")
            .expect("an outcome");
        assert!(outcome.result.is_ok(), "{outcome:?}");
        assert_eq!(outcome.node, "n1");
        assert!(bound.insert(outcome.key), "one outcome per pod");
    }
    let listed = server.pods().list(&Default::default()).await.expect("list");
    assert_eq!(listed.items.len(), count);
    assert!(listed
        .items
        .iter()
        .all(|p| node_of(p).as_deref() == Some("n1")));
    tasks.abort_all();
}

/// A pod stored before the API server checked types (its label value is
/// a number): every other pod is still scheduled, whether the bad one was
/// there when the scheduler listed or arrived on its watch.
#[tokio::test]
async fn a_pod_that_does_not_decode_stops_nothing() {
    let server = TestServer::start().await;
    server.create_node(node("n1").build()).await;
    let bad = |name: &str| {
        serde_json::to_vec(&serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}"),
                "labels": {"v": 1}},
            "spec": {"containers": [{"name": "c", "image": "i"}]},
            "status": {"phase": "Pending"},
        }))
        .unwrap()
    };
    server
        .store
        .create(
            "/registry/pods/default/bad-before",
            bad("bad-before").into(),
        )
        .await
        .unwrap();
    server.create_pod(pod("good-before").build()).await;
    let _scheduler = RunningScheduler::start(server.client.clone(), test_config("s1"));
    assert_eq!(bound(&server, "good-before").await, "n1");
    server
        .store
        .create("/registry/pods/default/bad-after", bad("bad-after").into())
        .await
        .unwrap();
    server.create_pod(pod("good-after").build()).await;
    assert_eq!(bound(&server, "good-after").await, "n1");
    assert!(skiff_client::trimmed::undecodable_total() >= 2);
}
