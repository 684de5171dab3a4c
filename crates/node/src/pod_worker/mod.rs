//! One worker per pod UID (upstream's pod workers): it learns the pod the
//! API wants and what the runtime has ([`crate::observed`]), computes what to do
//! ([`actions`], pure), carries it out ([`sync`]: images, sandbox,
//! containers, back-off, events, termination) and reports the pod's status
//! ([`crate::status`]). CRI configs come from [`config`], environments
//! from [`env`], volumes from [`volume_sources`] and [`volumes`] (laid out on disk
//! by [`volume_files`]); service-account tokens are cached by [`tokens`].

pub mod actions;
pub mod config;
pub mod dns;
pub mod env;
pub mod hooks;
pub mod images;
pub mod qos;
pub mod service_env;
pub mod sync;
pub mod tokens;
pub mod volume_files;
pub mod volume_sources;
pub mod volumes;
