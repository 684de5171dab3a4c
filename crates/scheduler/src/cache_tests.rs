use super::*;
use skiff_client::testing::{node, pod};

fn cpu_on(cache: &Cache, node: &str) -> i64 {
    cache
        .snapshot()
        .get(node)
        .map(|n| n.requested().milli_cpu)
        .unwrap_or(-1)
}

#[test]
fn assumed_pods_count_at_once_and_are_confirmed_by_the_watch() {
    let mut cache = Cache::new();
    assert_eq!(
        cache.upsert_node(node("n1").build()),
        Some(ClusterEvent::NodeAdd)
    );
    let p = pod("a").req_cpu("1").build();
    let assumed = Arc::new(p.clone());
    cache.assume(assumed.clone(), "n1").expect("assume");
    assert_eq!(cpu_on(&cache, "n1"), 1000);
    // Shared, not copied: the cache and the snapshot hold the same object.
    assert_eq!(Arc::strong_count(&assumed), 3);
    assert!(cache.is_assumed("default/a"));
    assert!(matches!(
        cache.assume(p.clone(), "n1"),
        Err(CacheError::AlreadyCached(_))
    ));

    // The watch shows the pod bound: confirmed, counted once.
    let bound = skiff_client::testing::PodBuilder::from(p)
        .node_name("n1")
        .build();
    assert_eq!(
        cache.add_or_update_pod(bound.clone()),
        Some(ClusterEvent::AssignedPodAdd)
    );
    assert!(!cache.is_assumed("default/a"));
    assert_eq!(cpu_on(&cache, "n1"), 1000);
    // Both let the assumed version go and hold the bound one.
    assert_eq!(Arc::strong_count(&assumed), 1);
    let on_node = &cache.snapshot().get("n1").unwrap().pods()[0].pod;
    assert_eq!(
        on_node.spec.as_ref().unwrap().node_name.as_deref(),
        Some("n1")
    );
    assert!(
        !cache.forget("default/a"),
        "confirmed pods are not forgotten"
    );
    // A status update changes nothing the queue cares about.
    assert_eq!(cache.add_or_update_pod(bound), None);
    assert_eq!(cache.confirmed_pods(), vec!["default/a".to_string()]);

    assert_eq!(
        cache.remove_pod("default/a"),
        Some(ClusterEvent::AssignedPodDelete)
    );
    assert_eq!(cpu_on(&cache, "n1"), 0);
    assert_eq!(cache.remove_pod("default/a"), None);
}

#[test]
fn forget_undoes_an_assumption() {
    let mut cache = Cache::new();
    cache.upsert_node(node("n1").build());
    cache
        .assume(pod("a").req_cpu("500m").build(), "n1")
        .expect("assume");
    assert!(cache.forget("default/a"));
    assert_eq!(cpu_on(&cache, "n1"), 0);
    assert_eq!(cache.pod_count(), 0);
    assert!(matches!(
        cache.assume(pod("b").build(), "nope"),
        Err(CacheError::Assume { .. })
    ));
}

#[test]
fn pods_seen_before_their_node_are_counted_when_it_appears() {
    let mut cache = Cache::new();
    cache.add_or_update_pod(pod("a").node_name("n1").req_cpu("1").build());
    assert_eq!(cpu_on(&cache, "n1"), -1);
    cache.upsert_node(node("n1").build());
    assert_eq!(cpu_on(&cache, "n1"), 1000);
    // The node goes and comes back: its pods are still counted.
    assert_eq!(cache.remove_node("n1"), Some(ClusterEvent::NodeDelete));
    cache.upsert_node(node("n1").build());
    assert_eq!(cpu_on(&cache, "n1"), 1000);
}

#[test]
fn node_updates_report_relaxing_changes_only() {
    let mut cache = Cache::new();
    cache.upsert_node(node("n1").taint("t", "", "NoSchedule").build());
    cache.add_or_update_pod(pod("a").node_name("n1").req_cpu("1").build());
    // A heartbeat-like update: nothing relaxing.
    assert_eq!(
        cache.upsert_node(node("n1").taint("t", "", "NoSchedule").build()),
        None
    );
    let event = cache.upsert_node(node("n1").label("zone", "a").build());
    let Some(ClusterEvent::NodeUpdate(changes)) = event else {
        panic!("expected a node update, got {event:?}");
    };
    assert!(changes.taint_removed && changes.labels_changed);
    assert_eq!(cpu_on(&cache, "n1"), 1000, "pods survive node updates");
    assert_eq!(cache.node_names(), vec!["n1".to_string()]);
}

#[test]
fn terminal_and_relabelled_pods() {
    let mut cache = Cache::new();
    cache.upsert_node(node("n1").build());
    cache.add_or_update_pod(pod("a").node_name("n1").req_cpu("1").build());
    assert_eq!(
        cache.add_or_update_pod(
            pod("a")
                .node_name("n1")
                .label("x", "y")
                .req_cpu("1")
                .build()
        ),
        Some(ClusterEvent::AssignedPodUpdate)
    );
    assert_eq!(
        cache.add_or_update_pod(pod("a").node_name("n1").phase("Succeeded").build()),
        Some(ClusterEvent::AssignedPodDelete)
    );
    assert_eq!(cpu_on(&cache, "n1"), 0);
}

#[test]
fn a_confirmation_that_differs_from_the_assumption_is_recounted() {
    let mut cache = Cache::new();
    cache.upsert_node(node("n1").build());
    cache.upsert_node(node("n2").build());
    let p = pod("a").req_cpu("1").build();
    cache.assume(p.clone(), "n1").expect("assume");
    // Bound elsewhere (another scheduler won the race): counted there only.
    let elsewhere = skiff_client::testing::PodBuilder::from(p.clone())
        .node_name("n2")
        .build();
    assert_eq!(
        cache.add_or_update_pod(elsewhere),
        Some(ClusterEvent::AssignedPodAdd)
    );
    assert_eq!((cpu_on(&cache, "n1"), cpu_on(&cache, "n2")), (0, 1000));

    // Relabelled between assumption and confirmation: the snapshot holds
    // the new labels (pod affinity and spread read them).
    cache.remove_pod("default/a");
    cache.assume(p.clone(), "n1").expect("assume");
    let relabelled = skiff_client::testing::PodBuilder::from(p)
        .label("app", "web")
        .node_name("n1")
        .build();
    cache.add_or_update_pod(relabelled);
    assert!(!cache.is_assumed("default/a"));
    assert_eq!(cpu_on(&cache, "n1"), 1000);
    let on_n1 = cache.snapshot().get("n1").expect("n1");
    assert_eq!(on_n1.pods().len(), 1);
    assert_eq!(
        on_n1.pods()[0]
            .pod
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("app"))
            .map(String::as_str),
        Some("web")
    );
}

#[test]
fn claims_volumes_and_classes_reach_the_snapshot_with_their_events() {
    use skiff_controllers::testing::{claim, local_path_class, volume};
    let mut cache = Cache::new();
    let pending = claim("data").class("local").phase("Pending").build();
    assert_eq!(cache.upsert_claim(pending), Some(ClusterEvent::ClaimAdd));
    let bound = claim("data").class("local").volume_name("pv1").build();
    assert_eq!(cache.upsert_claim(bound), Some(ClusterEvent::ClaimUpdate));
    assert_eq!(
        cache.upsert_volume(volume("pv1").build()),
        Some(ClusterEvent::VolumeAdd)
    );
    assert_eq!(
        cache.upsert_volume(volume("pv1").available().build()),
        Some(ClusterEvent::VolumeUpdate)
    );
    assert_eq!(
        cache.upsert_class(local_path_class("local").build()),
        Some(ClusterEvent::StorageClassAdd)
    );
    let storage = cache.snapshot().storage();
    let data = storage.claim("default", "data").expect("claim");
    assert_eq!(
        data.spec.as_ref().and_then(|s| s.volume_name.as_deref()),
        Some("pv1")
    );
    assert!(storage.volume("pv1").is_some());
    assert!(storage.class("local").is_some());
    assert_eq!(storage.claim_keys(), vec!["default/data".to_string()]);
    // Deletions concern no plugin.
    assert_eq!(cache.remove_claim("default/data"), None);
    assert_eq!(cache.remove_volume("pv1"), None);
    assert_eq!(cache.remove_class("local"), None);
    let storage = cache.snapshot().storage();
    assert!(storage.claim("default", "data").is_none());
    assert!(storage.volume_names().is_empty() && storage.class_names().is_empty());
}
