//! One worker per pod UID (upstream's pod workers): it learns the pod the
//! API wants and what the runtime has ([`observed`]), computes what to do
//! ([`actions`], pure), carries it out ([`sync`]: images, sandbox,
//! containers, back-off, events, termination) and reports the pod's status
//! ([`crate::status`]). CRI configs come from [`config`], environments
//! from [`env`], volumes from [`volume_sources`] and [`volumes`].

pub mod actions;
pub mod config;
pub mod dns;
pub mod env;
pub mod events;
pub mod hooks;
pub mod images;
pub mod observed;
pub mod qos;
pub mod sync;
pub mod volume_sources;
pub mod volumes;
