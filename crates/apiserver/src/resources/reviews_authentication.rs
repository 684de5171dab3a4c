//! authentication.k8s.io/v1 TokenReview and SelfSubjectReview: create-only
//! kinds that are answered, never stored (`crate::reviews` answers them;
//! these entries give discovery, OpenAPI and typed decoding).

use k8s_openapi::api::authentication::v1::{SelfSubjectReview, TokenReview};

use crate::catalog::{resource, KindDef, Plain, Typed, NONE};

pub static TOKEN_REVIEW: KindDef = KindDef {
    group: "authentication.k8s.io",
    kind: "TokenReview",
    resource: Some(resource(
        "authentication.k8s.io",
        "v1",
        "tokenreviews",
        "tokenreview",
        "TokenReview",
        false,
        NONE,
        NONE,
        NONE,
    )),
    selectable_fields: &[],
    strategy: &Plain,
    typed: &Typed::<TokenReview>::NEW,
};

pub static SELF_SUBJECT_REVIEW: KindDef = KindDef {
    group: "authentication.k8s.io",
    kind: "SelfSubjectReview",
    resource: Some(resource(
        "authentication.k8s.io",
        "v1",
        "selfsubjectreviews",
        "selfsubjectreview",
        "SelfSubjectReview",
        false,
        NONE,
        NONE,
        NONE,
    )),
    selectable_fields: &[],
    strategy: &Plain,
    typed: &Typed::<SelfSubjectReview>::NEW,
};
