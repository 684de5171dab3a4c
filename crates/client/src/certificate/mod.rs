//! Client certificates, as client-go's `util/cert` and
//! `util/certificate` keep them:
//!
//! - [`authority`]: a CA that signs certificate requests and re-signs
//!   certificates (the csrsigning controller and `skiff certs renew`),
//!   written out field by field so a subject keeps every attribute it had
//!   (several `O`s are several groups);
//! - [`kubeconfig`]: reading and rewriting the client certificate of a
//!   kubeconfig in place;
//! - [`rotation`]: a node agent's client certificate renewed through a
//!   CertificateSigningRequest before it expires, swapped into the
//!   running client.
//!
//! Nothing here talks to the API server or decides who may have a
//! certificate: signer rules and approval are the controllers'.

pub mod authority;
pub mod kubeconfig;
pub mod rotation;
