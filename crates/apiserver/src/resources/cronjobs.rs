//! CronJobs (batch/v1), with status (upstream `registry/batch/cronjob`): a
//! new one starts with an empty status; the schedule must parse as
//! robfig/cron's standard parser reads it. No controller runs them yet.

use k8s_openapi::api::batch::v1::CronJob;
use serde_json::Value;
use skiff_api::validation::FieldError;

use crate::catalog::{resource, KindDef, Strategy, Typed, ALL};

pub static KIND: KindDef = KindDef {
    group: "batch",
    kind: "CronJob",
    resource: Some(resource(
        "batch",
        "v1",
        "cronjobs",
        "cronjob",
        "CronJob",
        true,
        &["cj"],
        ALL,
        &["status"],
    )),
    selectable_fields: &[],
    strategy: &CronJobStrategy,
    typed: &Typed::<CronJob>::NEW,
};

#[derive(Debug)]
struct CronJobStrategy;

impl Strategy for CronJobStrategy {
    fn defaults(&self, obj: &mut Value) {
        skiff_api::defaults::cron_job(obj);
    }
    fn prepare_for_create(&self, obj: &mut Value) {
        super::workloads_status::reset(obj, "CronJob");
    }
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        skiff_api::validation::cron_job(obj)
    }
    fn validate_update(&self, old: &Value, new: &Value) -> Vec<FieldError> {
        skiff_api::validation::cron_job_update(old, new)
    }
}
