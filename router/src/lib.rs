//! The router service: the application core [`Router`] (registry, leases,
//! folds, ticks; time injected, no HTTP), its durable [`store`] and the
//! `routerd` HTTP shell. Design brief: `ROUTING.md` §4.

#![warn(missing_docs)]

pub mod api;
pub mod config;
pub mod core;
pub mod credentials;
pub mod events;
pub mod http;
pub mod ids;
pub mod load;
pub mod store;

pub use crate::core::Router;
