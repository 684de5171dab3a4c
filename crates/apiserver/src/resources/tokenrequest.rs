//! TokenRequest: the body of serviceaccounts/token (answered by
//! `crate::handlers::token_request`, never stored).

use k8s_openapi::api::authentication::v1::TokenRequest;

use crate::catalog::{KindDef, Plain, Typed};

pub static KIND: KindDef = KindDef {
    group: "authentication.k8s.io",
    kind: "TokenRequest",
    resource: None,
    selectable_fields: &[],
    strategy: &Plain,
    typed: &Typed::<TokenRequest>::NEW,
};
