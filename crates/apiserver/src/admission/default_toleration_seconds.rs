//! DefaultTolerationSeconds: a pod that does not tolerate the
//! `node.kubernetes.io/not-ready` and `unreachable` NoExecute taints gets
//! tolerations for them for 300 s, so it is evicted five minutes after its
//! node is lost (upstream's plugin of the same name).

use async_trait::async_trait;
use serde_json::{json, Value};

use super::{Attributes, Plugin};
use crate::status::ApiResult;

/// Upstream's default for both taints.
const SECONDS: i64 = 300;

const TAINTS: [&str; 2] = [
    "node.kubernetes.io/not-ready",
    "node.kubernetes.io/unreachable",
];

#[derive(Debug)]
pub struct DefaultTolerationSeconds;

/// Adds the missing tolerations to a pod.
pub fn add_tolerations(pod: &mut Value) {
    let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    let tolerations = spec.entry("tolerations").or_insert_with(|| json!([]));
    let Some(list) = tolerations.as_array_mut() else {
        return;
    };
    for key in TAINTS {
        let tolerated = list.iter().any(|t| {
            let k = t.get("key").and_then(Value::as_str);
            let effect = t.get("effect").and_then(Value::as_str);
            (k == Some(key)
                || k.is_none() && t.get("operator").and_then(Value::as_str) == Some("Exists"))
                && (effect.is_none() || effect == Some("NoExecute"))
        });
        if !tolerated {
            list.push(json!({
                "key": key,
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": SECONDS,
            }));
        }
    }
}

#[async_trait]
impl Plugin for DefaultTolerationSeconds {
    fn name(&self) -> &'static str {
        "DefaultTolerationSeconds"
    }

    async fn mutate(&self, attrs: &Attributes<'_>, object: &mut Value) -> ApiResult<()> {
        if attrs.resource.group.is_empty()
            && attrs.resource.plural == "pods"
            && attrs.subresource.is_none()
        {
            add_tolerations(object);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adds_what_is_missing_once() {
        let mut pod = json!({"spec": {"tolerations": [
            {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 10}
        ]}});
        add_tolerations(&mut pod);
        add_tolerations(&mut pod);
        let t = pod["spec"]["tolerations"].as_array().unwrap();
        assert_eq!(t.len(), 2);
        assert_eq!(t[0]["tolerationSeconds"], 10);
        assert_eq!(t[1]["key"], "node.kubernetes.io/not-ready");
        assert_eq!(t[1]["tolerationSeconds"], 300);
        let mut tolerates_all = json!({"spec": {"tolerations": [{"operator": "Exists"}]}});
        add_tolerations(&mut tolerates_all);
        assert_eq!(
            tolerates_all["spec"]["tolerations"]
                .as_array()
                .unwrap()
                .len(),
            1
        );
    }
}
