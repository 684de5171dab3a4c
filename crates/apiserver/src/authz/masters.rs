//! Upstream's privileged-group authorizer: members of `system:masters`
//! may do everything, whatever RBAC says; others are left to the rest of
//! the chain.

use super::{Attributes, Authorizer, Decision};

#[derive(Debug, Default)]
pub struct MastersOnly;

impl Authorizer for MastersOnly {
    fn authorize(&self, attrs: &Attributes<'_>) -> Decision {
        if attrs.user.groups.iter().any(|g| g == "system:masters") {
            Decision::Allow
        } else {
            Decision::NoOpinion
        }
    }

    fn rules(&self, user: &crate::authn::User, _namespace: &str) -> super::Rules {
        if user.groups.iter().any(|g| g == "system:masters") {
            super::Rules::default()
                .resource(&["*"], &["*"], &["*"])
                .non_resource(&["*"], &["*"])
        } else {
            super::Rules::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::authn::User;

    #[test]
    fn masters_may_others_have_no_opinion() {
        let ask = |groups: &[&str]| {
            let user = User {
                name: "u".into(),
                groups: groups.iter().map(|g| g.to_string()).collect(),
            };
            MastersOnly.authorize(&Attributes::resource(&user, "list", "", "pods"))
        };
        assert_eq!(ask(&["system:masters"]), Decision::Allow);
        assert_eq!(ask(&["devs"]), Decision::NoOpinion);
    }
}
