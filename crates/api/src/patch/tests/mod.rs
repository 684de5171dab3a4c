//! Table-driven tests of [`super::apply_patch`]. Expected results follow
//! upstream (apimachinery strategicpatch tests, kubectl docs, evanphx
//! json-patch messages).

mod strategic;

use serde_json::{json, Value};

use super::{apply_patch, PatchError, PatchType};

pub(super) enum Want {
    Ok(Value),
    /// BadRequest whose message contains the text.
    Bad(&'static str),
    /// Invalid whose message contains the text.
    Invalid(&'static str),
    Unsupported,
}

pub(super) struct Case {
    pub(super) name: &'static str,
    pub(super) kind: &'static str,
    pub(super) ty: PatchType,
    pub(super) original: Value,
    pub(super) patch: String,
    pub(super) want: Want,
}

pub(super) fn case(
    name: &'static str,
    kind: &'static str,
    ty: PatchType,
    original: Value,
    patch: Value,
    want: Want,
) -> Case {
    Case {
        name,
        kind,
        ty,
        original,
        patch: patch.to_string(),
        want,
    }
}

pub(super) fn smp(
    name: &'static str,
    kind: &'static str,
    original: Value,
    patch: Value,
    want: Want,
) -> Case {
    case(name, kind, PatchType::StrategicMerge, original, patch, want)
}

pub(super) fn run(cases: Vec<Case>) {
    for c in cases {
        let before = c.original.clone();
        let got = apply_patch(c.kind, &c.original, c.ty, c.patch.as_bytes());
        assert_eq!(c.original, before, "{}: original modified", c.name);
        match (c.want, got) {
            (Want::Ok(want), Ok(got)) => assert_eq!(got, want, "{}", c.name),
            (Want::Bad(text), Err(PatchError::BadRequest(msg)))
            | (Want::Invalid(text), Err(PatchError::Invalid(msg))) => {
                assert!(
                    msg.contains(text),
                    "{}: message {msg:?} lacks {text:?}",
                    c.name
                )
            }
            (Want::Unsupported, Err(PatchError::UnsupportedMediaType)) => {}
            (_, got) => panic!("{}: unexpected result {got:?}", c.name),
        }
    }
}

#[test]
fn json_patch() {
    let original = json!({"metadata": {"name": "d", "labels": {"a": "1"}},
                          "spec": {"replicas": 1, "containers": [{"name": "c", "image": "c:1"}]}});
    let jp = |name, patch: Value, want| {
        case(
            name,
            "Deployment",
            PatchType::Json,
            original.clone(),
            patch,
            want,
        )
    };
    let mut added = original.clone();
    added["metadata"]["labels"]["b"] = json!("2");
    added["spec"]["containers"][0]["image"] = json!("c:2");
    let mut removed = original.clone();
    removed["metadata"]["labels"] = json!({});
    let mut appended = original.clone();
    appended["spec"]["containers"] = json!([{"name": "c", "image": "c:1"}, {"name": "d"}]);
    run(vec![
        jp(
            "add and replace",
            json!([
            {"op": "add", "path": "/metadata/labels/b", "value": "2"},
            {"op": "replace", "path": "/spec/containers/0/image", "value": "c:2"}]),
            Want::Ok(added),
        ),
        jp(
            "remove",
            json!([{"op": "remove", "path": "/metadata/labels/a"}]),
            Want::Ok(removed),
        ),
        jp(
            "append with -",
            json!([{"op": "add", "path": "/spec/containers/-", "value": {"name": "d"}}]),
            Want::Ok(appended),
        ),
        jp(
            "test passes",
            json!([{"op": "test", "path": "/spec/replicas", "value": 1}]),
            Want::Ok(original.clone()),
        ),
        jp(
            "test of a missing key against null passes",
            json!([{"op": "test", "path": "/spec/paused", "value": null}]),
            Want::Ok(original.clone()),
        ),
        jp(
            "test fails after a change",
            json!([
            {"op": "replace", "path": "/spec/replicas", "value": 3},
            {"op": "test", "path": "/spec/replicas", "value": 1}]),
            Want::Invalid("testing value /spec/replicas failed: test failed"),
        ),
        jp(
            "pointer without leading slash",
            json!([{"op": "add", "path": "spec/x", "value": 1}]),
            Want::Invalid(
                "add operation does not apply: doc is missing path: \"spec/x\": missing value",
            ),
        ),
        jp(
            "add under a missing parent",
            json!([{"op": "add", "path": "/spec/x/y", "value": 1}]),
            Want::Invalid("doc is missing path: \"/spec/x/y\""),
        ),
        jp(
            "replace of a missing key",
            json!([{"op": "replace", "path": "/spec/x", "value": 1}]),
            Want::Invalid(
                "replace operation does not apply: doc is missing key: /spec/x: missing value",
            ),
        ),
        jp(
            "remove of a missing key",
            json!([{"op": "remove", "path": "/metadata/labels/z"}]),
            Want::Invalid("Unable to remove nonexistent key: z: missing value"),
        ),
        jp(
            "index out of range",
            json!([{"op": "replace", "path": "/spec/containers/5", "value": 1}]),
            Want::Invalid("Unable to access invalid index: 5"),
        ),
        jp(
            "move from a missing path",
            json!([{"op": "move", "from": "/spec/x", "path": "/spec/y"}]),
            Want::Invalid("move operation does not apply: doc is missing from path: /spec/x"),
        ),
        jp(
            "unknown op",
            json!([{"op": "frob", "path": "/spec"}]),
            Want::Invalid("Unexpected kind: frob"),
        ),
        jp(
            "op without path",
            json!([{"op": "add", "value": 1}]),
            Want::Invalid("add operation failed to decode path"),
        ),
        jp(
            "not a list",
            json!({"op": "add"}),
            Want::Bad("json: cannot unmarshal object into Go value of type jsonpatch.Patch"),
        ),
        jp(
            "operation not an object",
            json!(["add"]),
            Want::Bad("cannot unmarshal string into Go value of type jsonpatch.Operation"),
        ),
        Case {
            name: "malformed JSON",
            kind: "Pod",
            ty: PatchType::Json,
            original: original.clone(),
            patch: "[{".into(),
            want: Want::Bad("invalid JSON patch"),
        },
    ]);
}

#[test]
fn merge_patch() {
    let original = json!({"metadata": {"name": "p", "labels": {"a": "1", "b": "2"}},
                          "spec": {"containers": [{"name": "a"}, {"name": "b"}]}});
    let mp = |name, patch: Value, want| {
        case(
            name,
            "Widget",
            PatchType::Merge,
            original.clone(),
            patch,
            want,
        )
    };
    run(vec![
        mp(
            "label add and remove",
            json!({"metadata": {"labels": {"a": null, "c": "3"}}}),
            Want::Ok(
                json!({"metadata": {"name": "p", "labels": {"b": "2", "c": "3"}},
                           "spec": {"containers": [{"name": "a"}, {"name": "b"}]}}),
            ),
        ),
        mp(
            "lists are replaced",
            json!({"spec": {"containers": [{"name": "c"}]}}),
            Want::Ok(
                json!({"metadata": {"name": "p", "labels": {"a": "1", "b": "2"}},
                           "spec": {"containers": [{"name": "c"}]}}),
            ),
        ),
        mp("null patch", json!(null), Want::Bad("Invalid JSON Patch")),
        mp(
            "list patch",
            json!([1]),
            Want::Invalid("cannot unmarshal array"),
        ),
    ]);
}

#[test]
fn patch_types_and_statuses() {
    let cases = [
        ("application/json-patch+json", Some(PatchType::Json)),
        (
            "application/merge-patch+json; charset=utf-8",
            Some(PatchType::Merge),
        ),
        (
            "application/strategic-merge-patch+json",
            Some(PatchType::StrategicMerge),
        ),
        ("application/apply-patch+yaml", Some(PatchType::Apply)),
        ("application/json", None),
    ];
    for (content_type, want) in cases {
        assert_eq!(
            PatchType::from_content_type(content_type),
            want,
            "{content_type}"
        );
    }
    let err = apply_patch("Pod", &json!({}), PatchType::Apply, b"{}").unwrap_err();
    assert_eq!(err, PatchError::ApplyNotHandled);
    assert_eq!(PatchError::BadRequest(String::new()).status_code(), 400);
    assert_eq!(PatchError::Invalid("x".into()).status_code(), 422);
    assert_eq!(
        PatchError::Invalid("x".into()).status_message(),
        "the server rejected our request due to an error in our request"
    );
    assert_eq!(PatchError::UnsupportedMediaType.status_code(), 415);
    assert!(PatchError::UnsupportedMediaType.to_string().starts_with(
        "the body of the request was in an unknown format - accepted media types include: \
         application/json-patch+json, application/merge-patch+json"
    ));
    assert!(super::supports_strategic_merge("Deployment"));
    assert!(!super::supports_strategic_merge("Widget"));
}
