//! Which nodes a DaemonSet runs on, and the pod it runs there (upstream's
//! `NodeShouldRunDaemonPod` and `daemon/util`): the template's
//! `nodeName`, node selector and required node affinity must match the
//! node, and the node's NoSchedule/NoExecute taints be tolerated (an
//! untolerated NoSchedule taint keeps new pods off but lets running ones
//! stay; NoExecute evicts). Daemon pods tolerate the node-condition taints
//! upstream adds, and are pinned to their node with a required
//! `matchFields` `metadata.name` term for the scheduler to honour.
//!
//! Pure functions; no I/O.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{
    Affinity, Node, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, Pod,
    PodSpec, PodTemplateSpec, Taint, Toleration,
};
use skiff_client::selectors::RequiredNodeAffinity;

use crate::workload::history::POD_REVISION_LABEL;

/// The label with the DaemonSet's template generation
/// (`extensions.DaemonSetTemplateGenerationKey`).
pub const TEMPLATE_GENERATION_LABEL: &str = "pod-template-generation";
/// The annotation the API server keeps the template generation in.
pub const TEMPLATE_GENERATION_ANNOTATION: &str = "deprecated.daemonset.template.generation";

/// Whether `t` tolerates `taint` (upstream's `ToleratesTaint`).
pub fn tolerates(t: &Toleration, taint: &Taint) -> bool {
    if t.effect
        .as_deref()
        .is_some_and(|e| !e.is_empty() && e != taint.effect)
    {
        return false;
    }
    if t.key
        .as_deref()
        .is_some_and(|k| !k.is_empty() && k != taint.key)
    {
        return false;
    }
    match t.operator.as_deref().unwrap_or("Equal") {
        "Equal" | "" => {
            t.value.as_deref().unwrap_or_default() == taint.value.as_deref().unwrap_or_default()
        }
        "Exists" => true,
        _ => false,
    }
}

/// Whether some taint with an effect `effect_ok` accepts is tolerated by
/// none of `tolerations`.
fn untolerated(
    taints: &[Taint],
    tolerations: &[Toleration],
    effect_ok: impl Fn(&str) -> bool,
) -> bool {
    taints
        .iter()
        .filter(|t| effect_ok(&t.effect))
        .any(|taint| !tolerations.iter().any(|t| tolerates(t, taint)))
}

fn exists(key: &str, effect: &str) -> Toleration {
    Toleration {
        key: Some(key.into()),
        operator: Some("Exists".into()),
        effect: Some(effect.into()),
        ..Default::default()
    }
}

/// Adds the tolerations every daemon pod has (upstream's
/// `AddOrUpdateDaemonPodTolerations`), replacing any of the same key,
/// operator, value and effect.
pub fn add_daemon_tolerations(spec: &mut PodSpec) {
    let mut wanted = vec![
        exists("node.kubernetes.io/not-ready", "NoExecute"),
        exists("node.kubernetes.io/unreachable", "NoExecute"),
        exists("node.kubernetes.io/disk-pressure", "NoSchedule"),
        exists("node.kubernetes.io/memory-pressure", "NoSchedule"),
        exists("node.kubernetes.io/pid-pressure", "NoSchedule"),
        exists("node.kubernetes.io/unschedulable", "NoSchedule"),
    ];
    if spec.host_network == Some(true) {
        wanted.push(exists(
            "node.kubernetes.io/network-unavailable",
            "NoSchedule",
        ));
    }
    let tolerations = spec.tolerations.get_or_insert_with(Vec::new);
    for add in wanted {
        let same = |t: &Toleration| {
            t.key == add.key
                && t.effect == add.effect
                && t.operator == add.operator
                && t.value == add.value
        };
        if let Some(existing) = tolerations.iter_mut().find(|t| same(t)) {
            *existing = add;
        } else {
            tolerations.push(add);
        }
    }
}

/// (should run a new pod, may keep a running one) for `ds` on `node`.
pub fn should_run(node: &Node, ds: &DaemonSet) -> (bool, bool) {
    let node_name = node.metadata.name.as_deref().unwrap_or_default();
    let Some(template) = ds.spec.as_ref().map(|s| &s.template) else {
        return (false, false);
    };
    let mut spec = template.spec.clone().unwrap_or_default();
    if spec
        .node_name
        .as_deref()
        .is_some_and(|n| !n.is_empty() && n != node_name)
    {
        return (false, false);
    }
    add_daemon_tolerations(&mut spec);
    let pod = Pod {
        spec: Some(spec),
        ..Default::default()
    };
    if !RequiredNodeAffinity::of(&pod).matches(node) {
        return (false, false);
    }
    let taints = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_deref())
        .unwrap_or_default();
    let tolerations = pod
        .spec
        .as_ref()
        .and_then(|s| s.tolerations.as_deref())
        .unwrap_or_default();
    if untolerated(taints, tolerations, |e| {
        e == "NoSchedule" || e == "NoExecute"
    }) {
        let evicted = untolerated(taints, tolerations, |e| e == "NoExecute");
        return (false, !evicted);
    }
    (true, true)
}

/// The node a daemon pod is for: its `nodeName`, or the one its required
/// `matchFields` term names (upstream's `GetTargetNodeName`).
pub fn target_node(pod: &Pod) -> Option<String> {
    let spec = pod.spec.as_ref()?;
    if let Some(n) = spec.node_name.as_deref().filter(|n| !n.is_empty()) {
        return Some(n.to_string());
    }
    let terms = &spec
        .affinity
        .as_ref()?
        .node_affinity
        .as_ref()?
        .required_during_scheduling_ignored_during_execution
        .as_ref()?
        .node_selector_terms;
    let [term] = terms.as_slice() else {
        return None;
    };
    let [field] = term.match_fields.as_deref()? else {
        return None;
    };
    if field.key != "metadata.name" || field.operator != "In" {
        return None;
    }
    match field.values.as_deref()? {
        [value] => Some(value.clone()),
        _ => None,
    }
}

/// Pins `affinity` to `node` (upstream's
/// `ReplaceDaemonSetPodNodeNameNodeAffinity`): the required terms become
/// the one `matchFields` term; preferred terms stay.
pub fn pin_to_node(affinity: Option<Affinity>, node: &str) -> Affinity {
    let selector = NodeSelector {
        node_selector_terms: vec![NodeSelectorTerm {
            match_fields: Some(vec![NodeSelectorRequirement {
                key: "metadata.name".into(),
                operator: "In".into(),
                values: Some(vec![node.into()]),
            }]),
            match_expressions: None,
        }],
    };
    let mut affinity = affinity.unwrap_or_default();
    let node_affinity = affinity
        .node_affinity
        .get_or_insert_with(NodeAffinity::default);
    node_affinity.required_during_scheduling_ignored_during_execution = Some(selector);
    affinity
}

/// The template daemon pods are made from (upstream's
/// `CreatePodTemplate`): tolerations added, labelled with the template
/// generation and the revision hash.
pub fn pod_template(
    template: &PodTemplateSpec,
    generation: Option<&str>,
    hash: &str,
) -> PodTemplateSpec {
    let mut out = template.clone();
    add_daemon_tolerations(out.spec.get_or_insert_with(Default::default));
    let meta = out.metadata.get_or_insert_with(Default::default);
    let labels: &mut BTreeMap<String, String> = meta.labels.get_or_insert_with(Default::default);
    if let Some(g) = generation {
        labels.insert(TEMPLATE_GENERATION_LABEL.into(), g.into());
    }
    if !hash.is_empty() {
        labels.insert(POD_REVISION_LABEL.into(), hash.into());
    }
    out
}

/// Whether a pod is at the template with `hash` or `generation`
/// (upstream's `IsPodUpdated`).
pub fn is_updated(pod: &Pod, hash: &str, generation: Option<&str>) -> bool {
    let labels = pod.metadata.labels.as_ref();
    let label = |k: &str| labels.and_then(|l| l.get(k)).map(String::as_str);
    let hash_matches = !hash.is_empty() && label(POD_REVISION_LABEL) == Some(hash);
    let generation_matches = generation.is_some() && label(TEMPLATE_GENERATION_LABEL) == generation;
    hash_matches || generation_matches
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn ds(spec: serde_json::Value) -> DaemonSet {
        serde_json::from_value(json!({
            "metadata": {"name": "d", "namespace": "ns"},
            "spec": {"selector": {"matchLabels": {"app": "d"}}, "template": {"metadata": {"labels": {"app": "d"}}, "spec": spec}},
        }))
        .unwrap()
    }

    fn node(name: &str, labels: serde_json::Value, taints: serde_json::Value) -> Node {
        serde_json::from_value(json!({
            "metadata": {"name": name, "labels": labels},
            "spec": {"taints": taints},
        }))
        .unwrap()
    }

    #[test]
    fn node_selector_affinity_and_name_pick_nodes() {
        let plain = ds(json!({"containers": []}));
        assert_eq!(
            should_run(&node("a", json!({}), json!([])), &plain),
            (true, true)
        );
        let selective = ds(json!({"nodeSelector": {"disk": "ssd"}}));
        assert_eq!(
            should_run(&node("a", json!({}), json!([])), &selective),
            (false, false)
        );
        assert_eq!(
            should_run(&node("a", json!({"disk": "ssd"}), json!([])), &selective),
            (true, true)
        );
        let affine = ds(
            json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z1"]}]}]}}}}),
        );
        assert!(should_run(&node("a", json!({"zone": "z1"}), json!([])), &affine).0);
        assert!(!should_run(&node("a", json!({"zone": "z2"}), json!([])), &affine).0);
        let named = ds(json!({"nodeName": "b"}));
        assert!(!should_run(&node("a", json!({}), json!([])), &named).0);
        assert!(should_run(&node("b", json!({}), json!([])), &named).0);
    }

    #[test]
    fn taints_keep_pods_off_unless_tolerated() {
        let plain = ds(json!({}));
        let no_schedule = node(
            "a",
            json!({}),
            json!([{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]),
        );
        assert_eq!(
            should_run(&no_schedule, &plain),
            (false, true),
            "running pods may stay"
        );
        let no_execute = node(
            "a",
            json!({}),
            json!([{"key": "dedicated", "effect": "NoExecute"}]),
        );
        assert_eq!(should_run(&no_execute, &plain), (false, false));
        let tolerant = ds(
            json!({"tolerations": [{"key": "dedicated", "operator": "Equal", "value": "x", "effect": "NoSchedule"}]}),
        );
        assert_eq!(should_run(&no_schedule, &tolerant), (true, true));
        // The node-condition taints daemon pods tolerate by default.
        let not_ready = node(
            "a",
            json!({}),
            json!([
                {"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"},
                {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"},
            ]),
        );
        assert_eq!(should_run(&not_ready, &plain), (true, true));
        let network = node(
            "a",
            json!({}),
            json!([{"key": "node.kubernetes.io/network-unavailable", "effect": "NoSchedule"}]),
        );
        assert!(!should_run(&network, &plain).0);
        assert!(should_run(&network, &ds(json!({"hostNetwork": true}))).0);
    }

    #[test]
    fn daemon_pods_are_pinned_and_labelled() {
        let d = ds(
            json!({"tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 5}]}),
        );
        let t = pod_template(&d.spec.as_ref().unwrap().template, Some("3"), "abc");
        let labels = t.metadata.as_ref().unwrap().labels.as_ref().unwrap();
        assert_eq!(labels[TEMPLATE_GENERATION_LABEL], "3");
        assert_eq!(labels[POD_REVISION_LABEL], "abc");
        let tolerations = t.spec.as_ref().unwrap().tolerations.as_ref().unwrap();
        assert_eq!(
            tolerations.len(),
            6,
            "the user's not-ready toleration is replaced by ours"
        );
        assert!(tolerations.iter().all(|t| t.toleration_seconds.is_none()));
        let mut spec = t.spec.clone().unwrap();
        spec.affinity = Some(pin_to_node(spec.affinity.take(), "n7"));
        let pod = Pod {
            spec: Some(spec),
            ..Default::default()
        };
        assert_eq!(target_node(&pod).as_deref(), Some("n7"));
        assert!(RequiredNodeAffinity::of(&pod).matches(&node("n7", json!({}), json!([]))));
        assert!(!RequiredNodeAffinity::of(&pod).matches(&node("n8", json!({}), json!([]))));
        let labelled = Pod {
            metadata: t.metadata.clone().unwrap(),
            ..Default::default()
        };
        assert!(is_updated(&labelled, "abc", None));
        assert!(is_updated(&labelled, "other", Some("3")));
        assert!(!is_updated(&labelled, "other", Some("4")));
    }
}
