//! What exists from the first start and is kept so: the Service
//! allocators rebuilt from the stored Services with their IPAddress
//! mirrors, the `kubernetes` Service and its endpoints, the system
//! PriorityClasses ([`services`]), and the default FlowSchemas and
//! PriorityLevelConfigurations, ensured again while the server runs
//! ([`flowcontrol`]).

pub mod flowcontrol;
pub mod services;

pub use services::start;
