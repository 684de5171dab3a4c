use std::collections::BTreeSet;
use std::time::Duration;

use super::*;
use crate::cluster_event::NodeChanges;
use crate::plugins::names;
use skiff_client::clock::FakeClock;
use skiff_client::testing::pod;

fn queue() -> (SchedulingQueue<FakeClock>, FakeClock) {
    let clock = FakeClock::new();
    (
        SchedulingQueue::new(clock.clone(), QueueConfig::default()),
        clock,
    )
}

fn with_priority(name: &str, p: i32) -> Pod {
    let mut pod = pod(name).build();
    pod.spec.get_or_insert_with(Default::default).priority = Some(p);
    pod
}

fn plugins(names: &[&'static str]) -> BTreeSet<&'static str> {
    names.iter().copied().collect()
}

fn pop_name<C: Clock>(q: &mut SchedulingQueue<C>) -> Option<String> {
    q.pop().and_then(|p| p.pod.metadata.name.clone())
}

const SECOND: Duration = Duration::from_secs(1);

#[test]
fn active_orders_by_priority_then_fifo() {
    let (mut q, _) = queue();
    q.add(with_priority("low-1", 0));
    q.add(with_priority("high", 10));
    q.add(with_priority("low-2", 0));
    q.add(with_priority("mid", 5));
    let order: Vec<String> = std::iter::from_fn(|| pop_name(&mut q)).collect();
    assert_eq!(order, ["high", "mid", "low-1", "low-2"]);
    assert_eq!(q.len(), 4, "popped pods stay in flight");
    assert_eq!(q.place("default/high"), Some(Place::InFlight));
}

#[test]
fn backoff_doubles_to_the_cap() {
    let (q, _) = queue();
    let got: Vec<u64> = (1..=7).map(|n| q.backoff_duration(n).as_secs()).collect();
    assert_eq!(got, [1, 2, 4, 8, 10, 10, 10]);
}

#[test]
fn failed_binding_waits_out_its_backoff() {
    let (mut q, clock) = queue();
    q.add(pod("p").build());
    for (attempt, wait) in [(1, 1), (2, 2), (3, 4)] {
        let popped = q.pop().expect("active pod");
        assert_eq!(popped.attempts, attempt);
        q.requeue_backoff("default/p");
        assert_eq!(q.place("default/p"), Some(Place::Backoff));
        assert_eq!(
            q.next_backoff_expiry(),
            Some(clock.now() + Duration::from_secs(wait))
        );
        clock.advance(Duration::from_secs(wait) - Duration::from_millis(1));
        assert_eq!(q.flush_backoff_completed(), 0);
        assert!(q.pop().is_none());
        clock.advance(Duration::from_millis(1));
        assert_eq!(q.flush_backoff_completed(), 1);
        assert_eq!(q.place("default/p"), Some(Place::Active));
    }
}

#[test]
fn unschedulable_pods_wait_for_a_relevant_event() {
    let (mut q, clock) = queue();
    q.add(pod("tainted").build());
    q.add(pod("selector").build());
    q.add(pod("cpu").build());
    for _ in 0..3 {
        q.pop();
    }
    q.requeue_unschedulable("default/tainted", plugins(&[names::TAINT_TOLERATION]));
    q.requeue_unschedulable("default/selector", plugins(&[names::NODE_AFFINITY]));
    q.requeue_unschedulable("default/cpu", plugins(&[names::NODE_RESOURCES_FIT]));
    assert_eq!(q.unschedulable_len(), 3);
    clock.advance(Duration::from_secs(20)); // past any backoff

    // A heartbeat changes nothing relaxing; a new taint neither.
    assert_eq!(
        q.on_event(ClusterEvent::NodeUpdate(NodeChanges::default())),
        0
    );
    let label = NodeChanges {
        labels_changed: true,
        ..Default::default()
    };
    assert_eq!(q.on_event(ClusterEvent::NodeUpdate(label)), 1);
    assert_eq!(q.place("default/selector"), Some(Place::Active));
    assert_eq!(q.on_event(ClusterEvent::AssignedPodDelete), 1);
    assert_eq!(q.place("default/cpu"), Some(Place::Active));
    assert_eq!(q.on_event(ClusterEvent::AssignedPodAdd), 0);
    let untaint = NodeChanges {
        taint_removed: true,
        ..Default::default()
    };
    assert_eq!(q.on_event(ClusterEvent::NodeUpdate(untaint)), 1);
    assert_eq!(q.unschedulable_len(), 0);
    assert_eq!(q.active_len(), 3);
}

#[test]
fn event_during_backoff_moves_to_backoff_not_active() {
    let (mut q, clock) = queue();
    q.add(pod("p").build());
    q.pop();
    q.requeue_unschedulable("default/p", plugins(&[names::NODE_AFFINITY]));
    clock.advance(Duration::from_millis(300));
    assert_eq!(q.on_event(ClusterEvent::NodeAdd), 1);
    assert_eq!(q.place("default/p"), Some(Place::Backoff));
    clock.advance(Duration::from_millis(700));
    assert_eq!(q.flush_backoff_completed(), 1);
    assert_eq!(pop_name(&mut q).as_deref(), Some("p"));
}

#[test]
fn no_nodes_means_any_event_helps() {
    let (mut q, clock) = queue();
    q.add(pod("p").build());
    q.pop();
    q.requeue_unschedulable("default/p", BTreeSet::new());
    clock.advance(SECOND * 2);
    assert_eq!(q.on_event(ClusterEvent::NodeAdd), 1);
    assert_eq!(q.place("default/p"), Some(Place::Active));
}

#[test]
fn leftover_unschedulable_pods_are_retried() {
    let (mut q, clock) = queue();
    q.add(pod("p").build());
    q.pop();
    q.requeue_unschedulable("default/p", plugins(&[names::TAINT_TOLERATION]));
    clock.advance(Duration::from_secs(299));
    assert_eq!(q.flush_unschedulable_leftover(), 0);
    clock.advance(SECOND);
    assert_eq!(q.flush_unschedulable_leftover(), 1);
    assert_eq!(q.place("default/p"), Some(Place::Active));
}

#[test]
fn updates_requeue_only_when_the_spec_changed() {
    let (mut q, clock) = queue();
    let p = pod("p").build();
    q.add(p.clone());
    q.pop();
    q.requeue_unschedulable("default/p", plugins(&[names::TAINT_TOLERATION]));
    clock.advance(SECOND * 2);

    // Our own status write comes back through the watch: stay parked.
    let mut status_only = p.clone();
    status_only.metadata.resource_version = Some("42".into());
    status_only.status = Some(Default::default());
    q.add(status_only);
    assert_eq!(q.place("default/p"), Some(Place::Unschedulable));

    let tolerating = skiff_client::testing::PodBuilder::from(p)
        .toleration("t", "Exists", "", "NoSchedule")
        .build();
    q.add(tolerating);
    assert_eq!(q.place("default/p"), Some(Place::Active));
    let popped = q.pop().expect("updated pod");
    assert_eq!(popped.attempts, 2);
    assert!(popped
        .pod
        .spec
        .as_ref()
        .and_then(|s| s.tolerations.as_ref())
        .is_some());
}

#[test]
fn priority_update_reorders_active() {
    let (mut q, _) = queue();
    q.add(with_priority("a", 0));
    q.add(with_priority("b", 0));
    q.add(with_priority("b", 3));
    assert_eq!(pop_name(&mut q).as_deref(), Some("b"));
    assert_eq!(q.len(), 2);
}

#[test]
fn delete_and_done_forget_pods() {
    let (mut q, _) = queue();
    q.add(pod("a").build());
    q.add(pod("b").build());
    assert!(q.delete("default/a"));
    assert!(!q.delete("default/a"));
    assert_eq!(pop_name(&mut q).as_deref(), Some("b"));
    // A requeue of a pod deleted while in flight is a no-op.
    q.delete("default/b");
    q.requeue_backoff("default/b");
    assert!(q.is_empty());

    q.add(pod("c").build());
    q.pop();
    q.done("default/c");
    assert!(q.is_empty());
    // done only forgets in-flight pods.
    q.add(pod("d").build());
    q.done("default/d");
    assert_eq!(q.active_len(), 1);
}

#[test]
fn recreated_pod_starts_afresh() {
    let (mut q, _) = queue();
    let mut p = pod("p").build();
    p.metadata.uid = Some("u1".into());
    q.add(p.clone());
    q.pop();
    q.requeue_unschedulable("default/p", plugins(&[names::TAINT_TOLERATION]));
    p.metadata.uid = Some("u2".into());
    q.add(p);
    assert_eq!(q.place("default/p"), Some(Place::Active));
    assert_eq!(q.attempts("default/p"), Some(0));
    assert_eq!(q.unschedulable_len(), 0);
}
