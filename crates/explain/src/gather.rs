//! Reading the facts through the API: the target, the pod to explain
//! (for a workload, its newest unavailable pod), the pod's events, node,
//! claims, previous logs and the Services selecting it. Only reads any
//! user with `view` may do; a read that is refused or fails leaves its
//! fact out rather than failing the whole explanation.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Event, Node, PersistentVolumeClaim, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{ListParams, LogParams};
use kube::{Api, Client};

use crate::facts::{Facts, ServiceFacts, Workload};
use crate::{Error, Target};

/// The event a Skiff node records when a pod is first Ready, and its
/// annotation with the timeline as JSON.
const TIMELINE_REASON: &str = "StartupTimeline";
const TIMELINE_ANNOTATION: &str = "skiff.dev/startup-timeline";

/// Whether a pod is Ready (its Ready condition is True).
pub fn pod_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

fn created(pod: &Pod) -> Option<k8s_openapi::jiff::Timestamp> {
    pod.metadata.creation_timestamp.as_ref().map(|t| t.0)
}

fn owned_by(pod: &Pod, uids: &[String]) -> bool {
    pod.metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| uids.contains(&o.uid))
}

/// The pod to explain among `pods`: the newest that is not Ready (and not
/// Succeeded), else none.
fn newest_unavailable(mut pods: Vec<Pod>) -> Option<Pod> {
    pods.retain(|p| {
        !pod_ready(p) && p.status.as_ref().and_then(|s| s.phase.as_deref()) != Some("Succeeded")
    });
    pods.sort_by_key(created);
    pods.pop()
}

fn selector_string(labels: &BTreeMap<String, String>) -> String {
    labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// (type, status, reason, message) of each condition in a workload's
/// status (Deployments, StatefulSets and Jobs spell them alike).
fn conditions_of(status: Option<&impl serde::Serialize>) -> Vec<(String, String, String, String)> {
    let value = status
        .and_then(|s| serde_json::to_value(s).ok())
        .unwrap_or_default();
    let list = value.get("conditions").and_then(|c| c.as_array());
    list.into_iter()
        .flatten()
        .map(|c| {
            let field = |k: &str| {
                c.get(k)
                    .and_then(|x| x.as_str())
                    .unwrap_or_default()
                    .to_string()
            };
            (
                field("type"),
                field("status"),
                field("reason"),
                field("message"),
            )
        })
        .collect()
}

/// What the target resolves to: the workload (if any) and the pod to
/// explain (if any), and Services to look at for a Service target.
pub(crate) struct Resolved {
    pub workload: Option<Workload>,
    pub pod: Option<Pod>,
    pub service: Option<ServiceTarget>,
}

/// A Service asked about: its name, its selector (none: endpoints made by
/// hand) and how many pods the selector matched.
pub(crate) type ServiceTarget = (String, Option<BTreeMap<String, String>>, usize);

pub(crate) async fn resolve(client: &Client, ns: &str, target: &Target) -> Result<Resolved, Error> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let not_found =
        |kind: &str, name: &str| Error::NotFound(format!("{kind} \"{name}\" not found"));
    let get_opt = |e: kube::Error, kind: &str, name: &str| match e {
        kube::Error::Api(s) if s.code == 404 => not_found(kind, name),
        e => Error::Kube(e),
    };
    match target {
        Target::Pod(name) => {
            let pod = pods.get(name).await.map_err(|e| get_opt(e, "pods", name))?;
            Ok(Resolved {
                workload: None,
                pod: Some(pod),
                service: None,
            })
        }
        Target::Deployment(name) => {
            let api: Api<Deployment> = Api::namespaced(client.clone(), ns);
            let d = api
                .get(name)
                .await
                .map_err(|e| get_opt(e, "deployments.apps", name))?;
            let uid = d.metadata.uid.clone().unwrap_or_default();
            let rs_api: Api<ReplicaSet> = Api::namespaced(client.clone(), ns);
            let mut sets: Vec<ReplicaSet> = rs_api
                .list(&ListParams::default())
                .await?
                .items
                .into_iter()
                .filter(|rs| {
                    rs.metadata
                        .owner_references
                        .iter()
                        .flatten()
                        .any(|o| o.uid == uid)
                })
                .collect();
            let revision = |rs: &ReplicaSet| {
                rs.metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get("deployment.kubernetes.io/revision"))
                    .and_then(|r| r.parse::<i64>().ok())
                    .unwrap_or(0)
            };
            sets.sort_by_key(revision);
            let selector = d
                .spec
                .as_ref()
                .and_then(|s| s.selector.match_labels.clone())
                .unwrap_or_default();
            let all = pods
                .list(&ListParams::default().labels(&selector_string(&selector)))
                .await?
                .items;
            let uids = |sets: &[ReplicaSet]| -> Vec<String> {
                sets.iter()
                    .filter_map(|rs| rs.metadata.uid.clone())
                    .collect()
            };
            let of = |owners: &[String]| -> Vec<Pod> {
                all.iter()
                    .filter(|p| owned_by(p, owners))
                    .cloned()
                    .collect()
            };
            // The newest ReplicaSet's pods first, then any of the others.
            let pod = newest_unavailable(of(&uids(&sets[sets.len().saturating_sub(1)..])))
                .or_else(|| newest_unavailable(of(&uids(&sets))));
            Ok(Resolved {
                workload: Some(workload(
                    "deployment",
                    name,
                    conditions_of(d.status.as_ref()),
                )),
                pod,
                service: None,
            })
        }
        Target::StatefulSet(name) => {
            let api: Api<StatefulSet> = Api::namespaced(client.clone(), ns);
            let s = api
                .get(name)
                .await
                .map_err(|e| get_opt(e, "statefulsets.apps", name))?;
            let w = workload("statefulset", name, conditions_of(s.status.as_ref()));
            owned(&pods, w, s.metadata.uid).await
        }
        Target::Job(name) => {
            let api: Api<Job> = Api::namespaced(client.clone(), ns);
            let j = api
                .get(name)
                .await
                .map_err(|e| get_opt(e, "jobs.batch", name))?;
            let w = workload("job", name, conditions_of(j.status.as_ref()));
            owned(&pods, w, j.metadata.uid).await
        }
        Target::Service(name) => {
            let api: Api<Service> = Api::namespaced(client.clone(), ns);
            let s = api
                .get(name)
                .await
                .map_err(|e| get_opt(e, "services", name))?;
            let selector = s
                .spec
                .as_ref()
                .and_then(|s| s.selector.clone())
                .filter(|s| !s.is_empty());
            let Some(sel) = selector.clone() else {
                return Ok(Resolved {
                    workload: None,
                    pod: None,
                    service: Some((name.clone(), None, 0)),
                });
            };
            let matching = pods
                .list(&ListParams::default().labels(&selector_string(&sel)))
                .await?
                .items;
            let count = matching.len();
            let pod = newest_unavailable(
                matching
                    .into_iter()
                    .filter(|p| p.metadata.deletion_timestamp.is_none())
                    .collect(),
            );
            Ok(Resolved {
                workload: None,
                pod,
                service: Some((name.clone(), selector, count)),
            })
        }
    }
}

fn workload(kind: &str, name: &str, conditions: Vec<(String, String, String, String)>) -> Workload {
    Workload {
        kind: kind.into(),
        name: name.into(),
        conditions,
    }
}

/// `workload` and the newest unavailable pod it owns (by `uid`).
async fn owned(
    pods: &Api<Pod>,
    workload: Workload,
    uid: Option<String>,
) -> Result<Resolved, Error> {
    let uid: Vec<String> = uid.into_iter().collect();
    let all = pods.list(&ListParams::default()).await?.items;
    Ok(Resolved {
        workload: Some(workload),
        pod: newest_unavailable(all.into_iter().filter(|p| owned_by(p, &uid)).collect()),
        service: None,
    })
}

/// The facts about `pod`.
pub(crate) async fn facts(client: &Client, pod: Pod, workload: Option<Workload>) -> Facts {
    let ns = pod
        .metadata
        .namespace
        .clone()
        .unwrap_or_else(|| "default".into());
    let name = pod.metadata.name.clone().unwrap_or_default();
    let events_api: Api<Event> = Api::namespaced(client.clone(), &ns);
    let mut events = events_api
        .list(&ListParams::default().fields(&format!(
            "involvedObject.kind=Pod,involvedObject.name={name}"
        )))
        .await
        .map(|l| l.items)
        .unwrap_or_default();
    let uid = pod.metadata.uid.clone();
    events.retain(|e| e.involved_object.uid.is_none() || e.involved_object.uid == uid);
    events.sort_by_key(|e| {
        e.last_timestamp
            .as_ref()
            .map(|t| t.0)
            .or(e.event_time.as_ref().map(|t| t.0))
            .or(e.metadata.creation_timestamp.as_ref().map(|t| t.0))
    });
    let timeline = events
        .iter()
        .rev()
        .filter(|e| e.reason.as_deref() == Some(TIMELINE_REASON))
        .find_map(|e| e.metadata.annotations.as_ref()?.get(TIMELINE_ANNOTATION))
        .and_then(|json| serde_json::from_str(json).ok());
    let node_name = pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .filter(|n| !n.is_empty());
    let node = match node_name {
        Some(n) => Api::<Node>::all(client.clone()).get(&n).await.ok(),
        None => None,
    };
    let claims_api: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &ns);
    let mut claims = BTreeMap::new();
    for v in pod
        .spec
        .as_ref()
        .and_then(|s| s.volumes.as_ref())
        .into_iter()
        .flatten()
    {
        let Some(c) = &v.persistent_volume_claim else {
            continue;
        };
        match claims_api.get(&c.claim_name).await {
            Ok(pvc) => {
                claims.insert(c.claim_name.clone(), Some(pvc));
            }
            Err(kube::Error::Api(s)) if s.code == 404 => {
                claims.insert(c.claim_name.clone(), None);
            }
            Err(_) => {}
        }
    }
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let mut previous_logs = BTreeMap::new();
    let statuses = pod.status.as_ref().map(|s| {
        s.init_container_statuses
            .iter()
            .flatten()
            .chain(s.container_statuses.iter().flatten())
            .cloned()
            .collect::<Vec<_>>()
    });
    for st in statuses.into_iter().flatten() {
        let terminated = st
            .state
            .as_ref()
            .and_then(|s| s.terminated.as_ref())
            .is_some();
        if !terminated && st.restart_count == 0 {
            continue;
        }
        let params = LogParams {
            container: Some(st.name.clone()),
            previous: !terminated,
            tail_lines: Some(20),
            ..LogParams::default()
        };
        if let Ok(text) = pods.logs(&name, &params).await {
            previous_logs.insert(st.name.clone(), text);
        }
    }
    let mut services = Vec::new();
    let labels = pod.metadata.labels.clone().unwrap_or_default();
    let svc_api: Api<Service> = Api::namespaced(client.clone(), &ns);
    let slices_api: Api<EndpointSlice> = Api::namespaced(client.clone(), &ns);
    for s in svc_api
        .list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default()
    {
        let Some(sel) = s
            .spec
            .as_ref()
            .and_then(|s| s.selector.as_ref())
            .filter(|s| !s.is_empty())
        else {
            continue;
        };
        if !sel.iter().all(|(k, v)| labels.get(k) == Some(v)) {
            continue;
        }
        let sname = s.metadata.name.clone().unwrap_or_default();
        let (ready, not_ready) = slices_api
            .list(&ListParams::default().labels(&format!("kubernetes.io/service-name={sname}")))
            .await
            .map(|l| endpoint_counts(&l.items))
            .unwrap_or_default();
        services.push(ServiceFacts {
            name: sname,
            ready,
            not_ready,
        });
    }
    Facts {
        pod,
        events,
        node,
        claims,
        previous_logs,
        services,
        timeline,
        workload,
    }
}

/// Ready and not-ready endpoints across slices (an endpoint counts once
/// per address set).
pub(crate) fn endpoint_counts(slices: &[EndpointSlice]) -> (usize, usize) {
    let mut ready = 0;
    let mut not_ready = 0;
    for s in slices {
        for e in &s.endpoints {
            if e.conditions.as_ref().and_then(|c| c.ready).unwrap_or(true) {
                ready += 1;
            } else {
                not_ready += 1;
            }
        }
    }
    (ready, not_ready)
}
