//! The PV controller's decisions, run to completion against an in-memory
//! view standing in for the API (a status PUT changes only status, a PUT
//! keeps status, a create drops it, a delete of an object with
//! finalizers only marks it).

use super::*;
use crate::persistentvolume::helpers::{annotation, claim_phase, volume_phase};
use crate::testing::{claim, class, local_path_class, ready_node, volume};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

/// What one sync did.
#[derive(Debug, Default)]
struct Synced {
    events: Vec<(String, &'static str, String)>,
    enqueued: Vec<Key>,
    retry: bool,
    writes: usize,
}

impl Synced {
    fn reasons(&self) -> Vec<&'static str> {
        self.events.iter().map(|e| e.1).collect()
    }
}

fn apply(view: &mut View, write: Write) {
    match write {
        Write::UpdateVolume(mut v) => {
            let old = view
                .volumes
                .get(name(&v.metadata))
                .cloned()
                .expect("volume exists");
            v.status = old.status;
            view.volumes.insert(name(&v.metadata).to_string(), v);
        }
        Write::UpdateVolumeStatus(v) => {
            let old = view
                .volumes
                .get_mut(name(&v.metadata))
                .expect("volume exists");
            old.status = v.status;
        }
        Write::CreateVolume(mut v) => {
            assert!(
                !view.volumes.contains_key(name(&v.metadata)),
                "created twice"
            );
            v.status = None;
            v.metadata.uid = Some(format!("uid-{}", name(&v.metadata)));
            view.volumes.insert(name(&v.metadata).to_string(), v);
        }
        Write::DeleteVolume(v) => {
            let key = name(&v.metadata).to_string();
            let old = view.volumes.get_mut(&key).expect("volume exists");
            if old
                .metadata
                .finalizers
                .as_ref()
                .is_some_and(|f| !f.is_empty())
            {
                old.metadata.deletion_timestamp = Some(Time(Timestamp::now()));
            } else {
                view.volumes.remove(&key);
            }
        }
        Write::UpdateClaim(mut c) => {
            let key = claim_key(&c);
            let old = view.claims.get(&key).cloned().expect("claim exists");
            c.status = old.status;
            view.claims.insert(key, c);
        }
        Write::UpdateClaimStatus(c) => {
            let old = view.claims.get_mut(&claim_key(&c)).expect("claim exists");
            old.status = c.status;
        }
    }
}

/// Plans and applies steps for `key` until one writes nothing, as the
/// controller does (each event once per sync).
fn sync(view: &mut View, key: &Key) -> Synced {
    let mut done = Synced::default();
    for _ in 0..20 {
        let step = match key {
            Key::Claim(k) => match view.claims.get(k) {
                Some(c) => plan_claim(c, view),
                None => return done,
            },
            Key::Volume(k) => match view.volumes.get(k) {
                Some(v) => plan_volume(v, view),
                None => return done,
            },
        };
        done.enqueued.extend(step.enqueue);
        let wrote = step.write.is_some();
        if let Some(w) = step.write {
            apply(view, w);
            done.writes += 1;
        }
        for e in step.events {
            let entry = (e.regarding.name.unwrap_or_default(), e.reason, e.message);
            if !done.events.contains(&entry) {
                done.events.push(entry);
            }
        }
        if step.retry {
            done.retry = true;
            return done;
        }
        if !wrote {
            return done;
        }
    }
    panic!("sync of {key:?} did not settle");
}

fn view_with(
    claims: Vec<PersistentVolumeClaim>,
    volumes: Vec<PersistentVolume>,
    classes: Vec<StorageClass>,
    nodes: Vec<Node>,
) -> View {
    View {
        claims: claims.into_iter().map(|c| (claim_key(&c), c)).collect(),
        volumes: volumes
            .into_iter()
            .map(|v| (name(&v.metadata).to_string(), v))
            .collect(),
        classes: classes
            .into_iter()
            .map(|c| (name(&c.metadata).to_string(), c))
            .collect(),
        nodes: nodes
            .into_iter()
            .map(|n| (name(&n.metadata).to_string(), n))
            .collect(),
    }
}

fn claim_in<'a>(view: &'a View, name: &str) -> &'a PersistentVolumeClaim {
    view.claims.get(&format!("default/{name}")).expect("claim")
}

fn data() -> Key {
    Key::Claim("default/data".into())
}

/// The claim and volume are bound to each other as upstream leaves them.
fn assert_bound(view: &View, claim_name: &str, volume_name: &str) {
    let c = claim_in(view, claim_name);
    let v = view.volumes.get(volume_name).expect("volume");
    assert_eq!(claim_volume_name(c), volume_name);
    assert_eq!(claim_phase(c), "Bound");
    assert_eq!(annotation(&c.metadata, ANN_BIND_COMPLETED), Some("yes"));
    assert_eq!(
        annotation(&c.metadata, ANN_BOUND_BY_CONTROLLER),
        Some("yes")
    );
    let status = c.status.as_ref().expect("status");
    let spec = v.spec.as_ref().expect("spec");
    assert_eq!(status.capacity, spec.capacity);
    assert_eq!(status.access_modes, spec.access_modes);
    assert_eq!(volume_phase(v), "Bound");
    let r = spec.claim_ref.as_ref().expect("claimRef");
    assert_eq!(r.name.as_deref(), Some(claim_name));
    assert_eq!(r.uid, c.metadata.uid);
}

#[test]
fn an_immediate_claim_is_provisioned_on_a_ready_node_and_bound() {
    let mut view = view_with(
        vec![claim("data").class("local").request("2Gi").build()],
        vec![],
        vec![local_path_class("local").build()],
        vec![
            ready_node("n1").local_path_dir("/store").build(),
            ready_node("n2")
                .not_ready()
                .local_path_dir("/store")
                .build(),
        ],
    );
    let done = sync(&mut view, &data());
    assert_eq!(
        done.events,
        vec![(
            "data".to_string(),
            reason::PROVISIONING_SUCCEEDED,
            "Successfully provisioned volume pvc-uid-data using skiff.dev/local-path".to_string()
        )]
    );
    assert!(!done.retry);
    assert_bound(&view, "data", "pvc-uid-data");
    let pv = view.volumes.get("pvc-uid-data").expect("pv");
    assert_eq!(local_path::pinned_hostname(pv), Some("n1"));
    assert_eq!(
        pv.spec
            .as_ref()
            .and_then(|s| s.host_path.as_ref())
            .map(|h| h.path.as_str()),
        Some("/store/pvc-uid-data_default_data")
    );
    let c = claim_in(&view, "data");
    assert_eq!(
        annotation(&c.metadata, ANN_STORAGE_PROVISIONER),
        Some("skiff.dev/local-path")
    );
    assert_eq!(
        annotation(&c.metadata, ANN_BETA_STORAGE_PROVISIONER),
        Some("skiff.dev/local-path")
    );
    // Nothing more to do, for either object.
    let again = sync(&mut view, &data());
    assert_eq!((again.writes, again.events.len()), (0, 0));
    let volume = sync(&mut view, &Key::Volume("pvc-uid-data".into()));
    assert_eq!((volume.writes, volume.events.len()), (0, 0));
}

#[test]
fn a_wait_for_first_consumer_claim_waits_for_the_scheduler_then_lands_on_its_node() {
    let mut view = view_with(
        vec![claim("data").class("local").build()],
        vec![],
        vec![local_path_class("local").wait_for_first_consumer().build()],
        vec![
            ready_node("n1").local_path_dir("/a").build(),
            ready_node("n2").local_path_dir("/b").build(),
        ],
    );
    let done = sync(&mut view, &data());
    assert_eq!(
        done.events,
        vec![(
            "data".to_string(),
            reason::WAIT_FOR_FIRST_CONSUMER,
            "waiting for first consumer to be created before binding".to_string()
        )]
    );
    assert_eq!(claim_phase(claim_in(&view, "data")), "Pending");
    assert!(view.volumes.is_empty());

    // The scheduler picked n2 for a pod using it.
    let mut annotated = claim_in(&view, "data").clone();
    set_annotation(&mut annotated.metadata, ANN_SELECTED_NODE, "n2");
    view.claims.insert("default/data".into(), annotated);
    let done = sync(&mut view, &data());
    assert_eq!(done.reasons(), vec![reason::PROVISIONING_SUCCEEDED]);
    assert_bound(&view, "data", "pvc-uid-data");
    let pv = view.volumes.get("pvc-uid-data").expect("pv");
    assert_eq!(local_path::pinned_hostname(pv), Some("n2"));
    assert_eq!(
        pv.spec
            .as_ref()
            .and_then(|s| s.host_path.as_ref())
            .map(|h| h.path.as_str()),
        Some("/b/pvc-uid-data_default_data")
    );
}

#[test]
fn a_node_without_a_volume_dir_fails_and_hands_the_claim_back_to_the_scheduler() {
    let mut view = view_with(
        vec![claim("data")
            .class("local")
            .selected_node("bare")
            .phase("Pending")
            .build()],
        vec![],
        vec![local_path_class("local").wait_for_first_consumer().build()],
        vec![ready_node("bare").build()],
    );
    let done = sync(&mut view, &data());
    assert!(done.retry);
    assert_eq!(
        done.events.first(),
        Some(&(
            "data".to_string(),
            reason::PROVISIONING_FAILED,
            "Failed to provision volume with StorageClass \"local\": node \"bare\" has no \
             skiff.dev/local-path-dir annotation"
                .to_string()
        ))
    );
    assert!(view.volumes.is_empty());
    let c = claim_in(&view, "data");
    assert_eq!(annotation(&c.metadata, ANN_SELECTED_NODE), None);

    // Immediate: retried until the agent sets the annotation.
    let mut view = view_with(
        vec![claim("data").class("now").phase("Pending").build()],
        vec![],
        vec![local_path_class("now").build()],
        vec![ready_node("bare").build()],
    );
    let done = sync(&mut view, &data());
    assert!(done.retry);
    assert_eq!(done.reasons(), vec![reason::PROVISIONING_FAILED]);
    view.nodes.insert(
        "bare".into(),
        ready_node("bare").local_path_dir("/d").build(),
    );
    let done = sync(&mut view, &data());
    assert_eq!(done.reasons(), vec![reason::PROVISIONING_SUCCEEDED]);
    assert_bound(&view, "data", "pvc-uid-data");
}

#[test]
fn no_ready_node_is_a_provisioning_failure() {
    let mut view = view_with(
        vec![claim("data").class("now").phase("Pending").build()],
        vec![],
        vec![local_path_class("now").build()],
        vec![ready_node("n1").local_path_dir("/d").not_ready().build()],
    );
    let done = sync(&mut view, &data());
    assert!(done.retry);
    assert_eq!(
        done.events[0].2,
        "Failed to provision volume with StorageClass \"now\": no Ready node to provision the volume on"
    );
}

#[test]
fn a_class_without_a_provisioner_leaves_the_claim_pending() {
    let mut view = view_with(
        vec![claim("data").class("manual").build()],
        vec![],
        vec![class("manual", "kubernetes.io/no-provisioner").build()],
        vec![ready_node("n1").local_path_dir("/d").build()],
    );
    let done = sync(&mut view, &data());
    assert_eq!(
        done.events,
        vec![(
            "data".to_string(),
            reason::PROVISIONING_FAILED,
            "no volume plugin matched name: kubernetes.io/no-provisioner".to_string()
        )]
    );
    assert_eq!(claim_phase(claim_in(&view, "data")), "Pending");
    assert!(view.volumes.is_empty());
}

#[test]
fn an_external_provisioner_is_asked_through_annotations() {
    let mut view = view_with(
        vec![claim("data").class("ebs").phase("Pending").build()],
        vec![],
        vec![class("ebs", "ebs.csi.aws.com").build()],
        vec![],
    );
    let done = sync(&mut view, &data());
    assert_eq!(done.reasons(), vec![reason::EXTERNAL_PROVISIONING]);
    assert!(done.events[0].2.starts_with(
        "Waiting for a volume to be created either by the external provisioner 'ebs.csi.aws.com' \
         or manually by the system administrator."
    ));
    let c = claim_in(&view, "data");
    assert_eq!(
        annotation(&c.metadata, ANN_STORAGE_PROVISIONER),
        Some("ebs.csi.aws.com")
    );
}

#[test]
fn a_claim_without_class_or_volume_fails_binding_and_a_missing_class_fails_provisioning() {
    let mut view = view_with(
        vec![claim("data").class("").build()],
        vec![],
        vec![],
        vec![],
    );
    let done = sync(&mut view, &data());
    assert_eq!(
        done.events[0].2,
        "no persistent volumes available for this claim and no storage class is set"
    );
    assert_eq!(done.reasons(), vec![reason::FAILED_BINDING]);
    let mut view = view_with(
        vec![claim("data").class("gone").build()],
        vec![],
        vec![],
        vec![],
    );
    let done = sync(&mut view, &data());
    assert_eq!(
        done.events[0].2,
        "storageclass.storage.k8s.io \"gone\" not found"
    );
}

#[test]
fn a_claim_without_a_class_gets_the_default_one() {
    let mut view = view_with(
        vec![claim("data").phase("Pending").build()],
        vec![],
        vec![local_path_class("local-path").default_class().build()],
        vec![ready_node("n1").local_path_dir("/d").build()],
    );
    let done = sync(&mut view, &data());
    assert_eq!(claim_class(claim_in(&view, "data")), "local-path");
    assert_eq!(done.reasons(), vec![reason::PROVISIONING_SUCCEEDED]);
    assert_bound(&view, "data", "pvc-uid-data");
}

#[test]
fn an_available_volume_is_bound_statically() {
    let mut view = view_with(
        vec![claim("data").class("").request("1Gi").build()],
        vec![
            volume("big").class("").capacity("10Gi").available().build(),
            volume("pv1").class("").capacity("2Gi").available().build(),
        ],
        vec![],
        vec![],
    );
    let done = sync(&mut view, &data());
    assert!(done.events.is_empty(), "{:?}", done.events);
    assert_bound(&view, "data", "pv1");
    let pv = view.volumes.get("pv1").expect("pv1");
    assert_eq!(
        annotation(&pv.metadata, ANN_BOUND_BY_CONTROLLER),
        Some("yes")
    );
    assert_eq!(
        claim_in(&view, "data")
            .status
            .as_ref()
            .and_then(|s| s.capacity.as_ref())
            .and_then(|c| c.get("storage"))
            .map(|q| q.0.as_str()),
        Some("2Gi")
    );
    assert_eq!(
        volume_phase(view.volumes.get("big").expect("big")),
        "Available"
    );
}

#[test]
fn a_requested_volume_is_checked_and_a_prebound_one_bound_without_the_controller_mark() {
    let mut view = view_with(
        vec![claim("data")
            .class("")
            .request("5Gi")
            .volume_name("pv1")
            .build()],
        vec![volume("pv1").class("").capacity("1Gi").available().build()],
        vec![],
        vec![],
    );
    let done = sync(&mut view, &data());
    assert_eq!(
        done.events,
        vec![(
            "data".to_string(),
            reason::VOLUME_MISMATCH,
            "Cannot bind to requested volume \"pv1\": requested PV is too small".to_string()
        )]
    );
    assert_eq!(claim_phase(claim_in(&view, "data")), "Pending");

    // A volume the user pre-bound to the claim (no UID yet).
    let mut view = view_with(
        vec![claim("data").class("").build()],
        vec![volume("pv1")
            .class("")
            .claim_ref("default", "data", "")
            .build()],
        vec![],
        vec![],
    );
    sync(&mut view, &Key::Volume("pv1".into()));
    assert_eq!(
        volume_phase(view.volumes.get("pv1").expect("pv1")),
        "Available"
    );
    sync(&mut view, &data());
    let pv = view.volumes.get("pv1").expect("pv1");
    assert_eq!(annotation(&pv.metadata, ANN_BOUND_BY_CONTROLLER), None);
    let c = claim_in(&view, "data");
    assert_eq!(claim_volume_name(c), "pv1");
    assert_eq!(claim_phase(c), "Bound");
    assert_eq!(
        pv.spec
            .as_ref()
            .and_then(|s| s.claim_ref.as_ref())
            .and_then(|r| r.uid.as_deref()),
        Some("uid-data")
    );
}

#[test]
fn a_volume_the_scheduler_prebound_binds_a_waiting_claim() {
    // WaitForFirstConsumer with a static volume: the scheduler sets the
    // claimRef (with UID) in PreBind; the controller completes the binding.
    let mut view = view_with(
        vec![claim("data").class("manual").phase("Pending").build()],
        vec![volume("local1")
            .class("manual")
            .on_node("n1")
            .claim_ref("default", "data", "uid-data")
            .annotation(ANN_BOUND_BY_CONTROLLER, "yes")
            .available()
            .build()],
        vec![class("manual", "kubernetes.io/no-provisioner")
            .wait_for_first_consumer()
            .build()],
        vec![],
    );
    let done = sync(&mut view, &Key::Volume("local1".into()));
    assert_eq!(done.enqueued, vec![data()]);
    let done = sync(&mut view, &data());
    assert!(done.events.is_empty(), "{:?}", done.events);
    assert_bound(&view, "data", "local1");
}

fn released_view(policy: &str, provisioned_by: Option<&str>) -> View {
    let mut pv = volume("pv1")
        .class("local")
        .reclaim(policy)
        .claim_ref("default", "data", "uid-data")
        .phase("Bound");
    if let Some(p) = provisioned_by {
        pv = pv.annotation(ANN_DYNAMICALLY_PROVISIONED, p);
    }
    let mut pv = pv.build();
    pv.metadata.finalizers = Some(vec![local_path::CLEANUP_FINALIZER.to_string()]);
    // The claim is gone.
    view_with(vec![], vec![pv], vec![], vec![])
}

#[test]
fn a_released_volume_of_ours_with_reclaim_delete_is_deleted() {
    let mut view = released_view("Delete", Some(local_path::PROVISIONER));
    let pv = view.volumes.get("pv1").expect("pv1").clone();
    let step = plan_volume(&pv, &view);
    assert_eq!(
        step.confirm,
        Some(Absent::Claim {
            namespace: "default".into(),
            name: "data".into(),
            uid: "uid-data".into()
        })
    );
    let done = sync(&mut view, &Key::Volume("pv1".into()));
    assert_eq!(done.writes, 2, "Released, then deleted");
    let pv = view.volumes.get("pv1").expect("kept by its finalizer");
    assert!(pv.metadata.deletion_timestamp.is_some());
    assert_eq!(volume_phase(pv), "Released");
    // Deleting: nothing more for the controller to do.
    let done = sync(&mut view, &Key::Volume("pv1".into()));
    assert_eq!(done.writes, 0);
}

#[test]
fn retain_keeps_a_released_volume_and_others_are_failed() {
    let mut view = released_view("Retain", Some(local_path::PROVISIONER));
    let done = sync(&mut view, &Key::Volume("pv1".into()));
    assert_eq!(done.writes, 1);
    let pv = view.volumes.get("pv1").expect("pv1");
    assert_eq!(volume_phase(pv), "Released");
    assert!(pv.metadata.deletion_timestamp.is_none());
    assert_eq!(sync(&mut view, &Key::Volume("pv1".into())).writes, 0);

    // Someone else's volume: their deleter's business.
    let mut view = released_view("Delete", Some("ebs.csi.aws.com"));
    sync(&mut view, &Key::Volume("pv1".into()));
    let pv = view.volumes.get("pv1").expect("pv1");
    assert_eq!(volume_phase(pv), "Released");
    assert!(pv.metadata.deletion_timestamp.is_none());

    // A hand-made volume with Delete: no deleter.
    let mut view = released_view("Delete", None);
    let done = sync(&mut view, &Key::Volume("pv1".into()));
    assert_eq!(
        done.events,
        vec![(
            "pv1".to_string(),
            reason::VOLUME_FAILED_DELETE,
            "error getting deleter volume plugin for volume \"pv1\": no deletable volume plugin matched"
                .to_string()
        )]
    );
    assert_eq!(
        volume_phase(view.volumes.get("pv1").expect("pv1")),
        "Failed"
    );
    assert!(sync(&mut view, &Key::Volume("pv1".into()))
        .events
        .is_empty());
}

#[test]
fn a_claim_recreated_under_the_same_name_releases_the_old_volume() {
    let mut view = released_view("Retain", None);
    let fresh = claim("data")
        .uid("uid-new")
        .class("local")
        .phase("Pending")
        .build();
    view.claims.insert("default/data".into(), fresh);
    sync(&mut view, &Key::Volume("pv1".into()));
    assert_eq!(
        volume_phase(view.volumes.get("pv1").expect("pv1")),
        "Released"
    );
}

#[test]
fn a_bound_claim_whose_volume_is_gone_is_lost() {
    let bound = claim("data")
        .class("")
        .volume_name("pv1")
        .annotation(ANN_BIND_COMPLETED, "yes")
        .phase("Bound")
        .build();
    let mut view = view_with(vec![bound], vec![], vec![], vec![]);
    let step = plan_claim(claim_in(&view, "data"), &view);
    assert_eq!(step.confirm, Some(Absent::Volume("pv1".into())));
    let done = sync(&mut view, &data());
    assert_eq!(
        done.events,
        vec![(
            "data".to_string(),
            reason::CLAIM_LOST,
            "Bound claim has lost its PersistentVolume. Data on the volume is lost!".to_string()
        )]
    );
    assert_eq!(claim_phase(claim_in(&view, "data")), "Lost");
    assert!(sync(&mut view, &data()).events.is_empty(), "reported once");
}

#[test]
fn a_volume_bound_by_the_controller_to_a_claim_bound_elsewhere_is_freed() {
    let mut view = view_with(
        vec![claim("data")
            .class("")
            .volume_name("other")
            .phase("Bound")
            .build()],
        vec![volume("pv1")
            .class("")
            .claim_ref("default", "data", "uid-data")
            .annotation(ANN_BOUND_BY_CONTROLLER, "yes")
            .phase("Bound")
            .build()],
        vec![],
        vec![],
    );
    sync(&mut view, &Key::Volume("pv1".into()));
    let pv = view.volumes.get("pv1").expect("pv1");
    assert!(claim_ref(pv).is_none());
    assert_eq!(annotation(&pv.metadata, ANN_BOUND_BY_CONTROLLER), None);
    assert_eq!(volume_phase(pv), "Available");
}

#[test]
fn a_new_volume_is_available() {
    let mut view = view_with(vec![], vec![volume("pv1").build()], vec![], vec![]);
    sync(&mut view, &Key::Volume("pv1".into()));
    assert_eq!(
        volume_phase(view.volumes.get("pv1").expect("pv1")),
        "Available"
    );
}
