//! storage.k8s.io/v1 CSIDriver defaults (upstream `SetDefaults_CSIDriver`
//! with 1.33's gates: SELinuxMountReadWriteOncePod on): attachRequired
//! true, podInfoOnMount, storageCapacity, requiresRepublish and
//! seLinuxMount false, fsGroupPolicy ReadWriteOnceWithFSType, lifecycle
//! modes [Persistent].

use serde_json::{json, Value};

/// A CSIDriver.
pub fn csi_driver(obj: &mut Value) {
    let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    for (field, value) in [
        ("attachRequired", json!(true)),
        ("podInfoOnMount", json!(false)),
        ("storageCapacity", json!(false)),
        ("fsGroupPolicy", json!("ReadWriteOnceWithFSType")),
        ("requiresRepublish", json!(false)),
        ("seLinuxMount", json!(false)),
    ] {
        if spec.get(field).is_none_or(Value::is_null) {
            spec.insert(field.into(), value);
        }
    }
    let modes_empty = spec
        .get("volumeLifecycleModes")
        .and_then(Value::as_array)
        .is_none_or(Vec::is_empty);
    if modes_empty {
        spec.insert("volumeLifecycleModes".into(), json!(["Persistent"]));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn driver_defaults() {
        let mut d = json!({"spec": {"attachRequired": false}});
        csi_driver(&mut d);
        assert_eq!(
            d["spec"],
            json!({"attachRequired": false, "podInfoOnMount": false, "storageCapacity": false,
                "fsGroupPolicy": "ReadWriteOnceWithFSType", "requiresRepublish": false,
                "seLinuxMount": false, "volumeLifecycleModes": ["Persistent"]})
        );
    }
}
