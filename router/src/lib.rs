//! The router service: the application core [`Router`] (registry, leases,
//! folds, ticks; time injected, no HTTP), its durable [`store`] and the
//! `routerd` HTTP shell. Design brief: `ROUTING.md` §4.
//!
//! The modules, in the order a reader meets them:
//!
//! - [`api`]: the wire types and their typed errors;
//! - [`config`]: the router's configuration and the operator's facts;
//! - [`ids`], [`credentials`]: tokens and digests, registration credentials;
//! - [`store`]: the durable store (SQLite, PostgreSQL, memory);
//! - [`events`]: the event stream;
//! - [`core`]: the application core (registration, leases, folds, ticks);
//! - [`http`]: the HTTP shell `routerd` serves;
//! - [`load`]: the load generator against a running `routerd`;
//! - [`drill`]: the restart drill (routerd killed under load, then checked).
//! - [`failover`]: the failover drills of several replicas (kill, cut, store stopped);
//! - [`netcut`]: a TCP proxy that cuts a link without closing it (drills, tests);
//! - [`replica`]: several routerd replicas over one PostgreSQL store.

#![warn(missing_docs)]

pub mod api;
pub mod config;
pub mod core;
pub mod credentials;
pub mod drill;
pub mod events;
pub mod failover;
pub mod http;
pub mod ids;
pub mod load;
pub mod netcut;
pub mod outage;
pub mod replica;
pub mod store;

pub use crate::core::Router;
