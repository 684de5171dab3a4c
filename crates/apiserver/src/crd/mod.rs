//! The CustomResourceDefinition controllers (upstream's
//! k8s.io/apiextensions-apiserver controllers): the one that accepts
//! names and sets the NamesAccepted, Established and Terminating
//! conditions ([`controller`], [`names`]) and builds the served entries
//! ([`build`]) into the server's `crate::customresources::Registry`, and
//! the cleanup that removes a deleted CRD's objects ([`cleanup`]).
//! Serving the custom resources is `crate::customresources`'.

pub mod build;
pub mod cleanup;
pub mod controller;
pub mod names;
pub mod write;

use crate::catalog::Resource;

/// The customresourcedefinitions resource.
pub fn crd_resource() -> Option<&'static Resource> {
    crate::resources::find_builtin("apiextensions.k8s.io", "v1", "customresourcedefinitions")
}
