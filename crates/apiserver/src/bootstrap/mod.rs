//! What exists from the first start and is kept so: the Service
//! allocators rebuilt from the stored Services with their IPAddress
//! mirrors, the `kubernetes` Service, the system PriorityClasses
//! ([`services`]), the `kubernetes` endpoints listing every live API
//! server by lease ([`endpoint_reconciler`]), and the default FlowSchemas and
//! PriorityLevelConfigurations, ensured again while the server runs
//! ([`flowcontrol`]).

pub mod endpoint_reconciler;
pub mod flowcontrol;
pub mod services;

pub use services::start;
