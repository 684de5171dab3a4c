//! Jobs, with status.

use k8s_openapi::api::batch::v1::Job;

use super::{resource, Kind, Typed, ALL, NONE};

pub static KIND: Kind = Kind {
    group: "batch",
    kind: "Job",
    resource: Some(resource(
        "batch",
        "v1",
        "jobs",
        "job",
        "Job",
        true,
        NONE,
        ALL,
        &["status"],
    )),
    selectable_fields: &["status.successful"],
    typed: &Typed::<Job>::NEW,
};
