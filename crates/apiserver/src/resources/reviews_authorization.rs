//! authorization.k8s.io/v1 SubjectAccessReview, SelfSubjectAccessReview,
//! LocalSubjectAccessReview and SelfSubjectRulesReview: create-only kinds
//! answered by the authorizer, never stored (`crate::reviews` answers
//! them; these entries give discovery, OpenAPI and typed decoding).

use k8s_openapi::api::authorization::v1::{
    LocalSubjectAccessReview, SelfSubjectAccessReview, SelfSubjectRulesReview, SubjectAccessReview,
};

use crate::catalog::{resource, KindDef, Plain, Typed, NONE};

const GROUP: &str = "authorization.k8s.io";

pub static SUBJECT_ACCESS_REVIEW: KindDef = KindDef {
    group: GROUP,
    kind: "SubjectAccessReview",
    resource: Some(resource(
        GROUP,
        "v1",
        "subjectaccessreviews",
        "subjectaccessreview",
        "SubjectAccessReview",
        false,
        NONE,
        NONE,
        NONE,
    )),
    selectable_fields: &[],
    strategy: &Plain,
    typed: &Typed::<SubjectAccessReview>::NEW,
};

pub static SELF_SUBJECT_ACCESS_REVIEW: KindDef = KindDef {
    group: GROUP,
    kind: "SelfSubjectAccessReview",
    resource: Some(resource(
        GROUP,
        "v1",
        "selfsubjectaccessreviews",
        "selfsubjectaccessreview",
        "SelfSubjectAccessReview",
        false,
        NONE,
        NONE,
        NONE,
    )),
    selectable_fields: &[],
    strategy: &Plain,
    typed: &Typed::<SelfSubjectAccessReview>::NEW,
};

pub static LOCAL_SUBJECT_ACCESS_REVIEW: KindDef = KindDef {
    group: GROUP,
    kind: "LocalSubjectAccessReview",
    resource: Some(resource(
        GROUP,
        "v1",
        "localsubjectaccessreviews",
        "localsubjectaccessreview",
        "LocalSubjectAccessReview",
        true,
        NONE,
        NONE,
        NONE,
    )),
    selectable_fields: &[],
    strategy: &Plain,
    typed: &Typed::<LocalSubjectAccessReview>::NEW,
};

pub static SELF_SUBJECT_RULES_REVIEW: KindDef = KindDef {
    group: GROUP,
    kind: "SelfSubjectRulesReview",
    resource: Some(resource(
        GROUP,
        "v1",
        "selfsubjectrulesreviews",
        "selfsubjectrulesreview",
        "SelfSubjectRulesReview",
        false,
        NONE,
        NONE,
        NONE,
    )),
    selectable_fields: &[],
    strategy: &Plain,
    typed: &Typed::<SelfSubjectRulesReview>::NEW,
};
