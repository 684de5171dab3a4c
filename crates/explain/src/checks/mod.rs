//! The checks: each file looks at [`Facts`] for one kind of trouble and
//! returns findings. Pure: no I/O, no clock. A new culprit is one new
//! file and one line in [`all`].

use crate::facts::Facts;
use crate::report::Finding;

mod containers;
mod node;
mod probes;
mod rollout;
mod sandbox;
mod scheduling;
mod service;
mod volumes;
mod yaml;

#[cfg(test)]
mod tests;

/// Every check's findings, in the order a pod meets the stages.
pub fn all(facts: &Facts) -> Vec<Finding> {
    let mut out = Vec::new();
    out.extend(rollout::check(facts));
    out.extend(scheduling::check(facts));
    out.extend(node::check(facts));
    out.extend(volumes::check(facts));
    out.extend(sandbox::check(facts));
    out.extend(containers::check(facts));
    out.extend(probes::check(facts));
    out.extend(service::check(facts));
    out
}
