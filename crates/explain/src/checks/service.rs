//! Services that select the pod but have no ready endpoint: their
//! traffic has nowhere to go.

use crate::facts::Facts;
use crate::report::{Finding, Stage};

pub fn check(f: &Facts) -> Vec<Finding> {
    f.services
        .iter()
        .filter(|s| s.ready == 0)
        .map(|s| {
            Finding::new(
                Stage::Service,
                format!("service {} has no ready endpoints", s.name),
            )
            .evidence(format!(
                "service {}: {} ready, {} not ready endpoint(s)",
                s.name, s.ready, s.not_ready
            ))
            .fix(format!(
                "its endpoints follow its pods' readiness: once pod {} is Ready (see the findings above) \
                 the service sends it traffic; kubectl get endpointslices -n {} -l kubernetes.io/service-name={}",
                f.name(),
                f.namespace(),
                s.name
            ))
        })
        .collect()
}
