//! Replicas: several `routerd` processes over one PostgreSQL store, any
//! of which a device may call. One replica leads at a time; it alone runs
//! the router's core, and every write it makes is fenced by its term, so
//! a replica that lost the lead (cut off, stalled, or declared dead) can
//! never have a write accepted after the new leader's first. The others
//! forward each request to the leader and pass its answer back; when no
//! replica leads they answer 503 `no_leader` with `Retry-After`. A new
//! leader opens the router from the store as a restart does (snapshot,
//! deposit log, outstanding leases), so a lease granted by a dead leader
//! is still deposited on, exactly once.
//!
//! The parts: [`decide`] (what a campaign's answer means, pure),
//! [`election`] (the campaign loop that opens and drops the leader's
//! shell), [`front`] (the HTTP front every replica serves). Source:
//! `docs/decisions/0020-replicas-over-one-postgresql.md`.

pub mod decide;
pub mod election;
pub mod front;

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use parking_lot::RwLock;
use sha2::{Digest, Sha256};

use crate::http::Shell;
use crate::store::Fence;

/// Header a forwarded request carries: the forwarding key
/// ([`forward_key`]), which only replicas know.
pub const FORWARD_KEY_HEADER: &str = "x-routerd-forward-key";
/// Header a forwarded request carries: the device's own address (believed
/// only with a valid forwarding key).
pub const CLIENT_HEADER: &str = "x-routerd-client";
/// Header on every answer a replica gives: the replica that answered.
pub const REPLICA_HEADER: &str = "x-routerd-replica";
/// Header on a forwarded answer: the replica the device called.
pub const ENTRY_HEADER: &str = "x-routerd-entry";

/// The longest a forwarded request may take before the device gets
/// `no_leader`, seconds: above the 30 s long poll.
pub const FORWARD_BOUND_S: f64 = 45.0;

/// The key replicas show each other on forwarded requests: the SHA-256 (hex)
/// of the operator key under a fixed label. Replicas share the operator
/// key, so they share this; a device cannot forge the device address a
/// forwarded request names.
pub fn forward_key(operator_key: &str) -> String {
    let mut h = Sha256::new();
    h.update(b"routerd forwarded request\0");
    h.update(operator_key.as_bytes());
    hex::encode(h.finalize())
}

/// Checks a replica name: 1..=64 bytes of `[A-Za-z0-9._-]`.
///
/// Errors: the rule, as text.
pub fn check_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "replica name {:?} must be 1..=64 characters of [A-Za-z0-9._-]",
            name.chars().take(80).collect::<String>()
        ))
    }
}

/// One replica's settings.
#[derive(Debug, Clone)]
pub struct ReplicaConfig {
    /// Its name (`--replica-id`, [`check_name`]).
    pub name: String,
    /// The base URL other replicas reach it on (`http://host:port`), kept
    /// in the lead row while it leads.
    pub url: String,
    /// How long a won or renewed lead lasts on the server's clock, (0, 1 h];
    /// a campaign runs every third of it.
    pub ttl: Duration,
    /// The forwarding key ([`forward_key`]).
    pub forward_key: String,
    /// The leader's tick period.
    pub tick: Duration,
}

/// Opens the router's shell for a lead just won: the store fenced by the
/// lead, the router rebuilt from it. Errors are text for the log.
pub type Opener = Arc<dyn Fn(Fence) -> Result<Arc<Shell>, String> + Send + Sync>;

/// What a replica is now.
#[derive(Clone)]
pub(crate) enum Role {
    /// No lead known; the text says why.
    Unknown(String),
    /// Another replica leads under `term`, at `url`.
    Following {
        term: i64,
        leader: String,
        url: String,
    },
    /// This replica leads under `term` until `until` (its local deadline).
    Leading {
        term: i64,
        shell: Arc<Shell>,
        app: axum::Router,
        until: Instant,
    },
}

/// One replica: its settings, its holder name (the name and a random
/// suffix, new per process), its role and the client it forwards with.
pub struct Replica {
    cfg: ReplicaConfig,
    holder: String,
    role: RwLock<Role>,
    client: Client<HttpConnector, Body>,
}

impl Replica {
    /// A replica that knows of no lead yet.
    pub fn new(cfg: ReplicaConfig) -> Arc<Replica> {
        let holder = format!("{}#{}", cfg.name, &crate::ids::token()[..12]);
        // No Nagle delay: a forwarded request's head and body leave at once
        // (with it, each waited out the leader's 40 ms delayed ACK).
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(30))
            .build(connector);
        Arc::new(Replica {
            cfg,
            holder,
            role: RwLock::new(Role::Unknown("no campaign has run yet".into())),
            client,
        })
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.cfg.name
    }

    /// The name it holds a lead under (unique per process).
    pub fn holder(&self) -> &str {
        &self.holder
    }

    /// Whether it leads now (and its local deadline has not passed).
    pub fn is_leading(&self) -> bool {
        matches!(&*self.role.read(), Role::Leading { until, .. } if Instant::now() < *until)
    }

    pub(crate) fn role(&self) -> Role {
        self.role.read().clone()
    }

    /// The seconds a client should wait before trying again when no
    /// replica leads: one campaign period, at least a second.
    pub fn retry_s(&self) -> f64 {
        (self.cfg.ttl.as_secs_f64() / 3.0).max(1.0)
    }
}

/// The body of `GET /v1/replica`: what the called replica knows.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ReplicaStatus {
    /// The called replica's name.
    pub replica: String,
    /// `leading`, `following` or `unknown`.
    pub role: String,
    /// The term of the lead it knows (absent when unknown).
    pub term: Option<i64>,
    /// The leading replica's name (absent when unknown).
    pub leader: Option<String>,
    /// Seconds left on its own lead's local deadline (leading only).
    pub lead_left_s: Option<f64>,
    /// Why no lead is known (unknown only).
    pub why: Option<String>,
}

impl Replica {
    /// What this replica knows, for `GET /v1/replica`.
    pub fn status(&self) -> ReplicaStatus {
        let mut s = ReplicaStatus {
            replica: self.cfg.name.clone(),
            role: "unknown".into(),
            term: None,
            leader: None,
            lead_left_s: None,
            why: None,
        };
        match self.role() {
            Role::Unknown(why) => s.why = Some(why),
            Role::Following { term, leader, .. } => {
                s.role = "following".into();
                s.term = Some(term);
                s.leader = Some(leader);
            }
            Role::Leading { until, .. } if Instant::now() >= until => {
                // The front no longer serves it; the campaign loop has not
                // caught up yet.
                s.why = Some("this replica's lead lapsed before a renewal".into());
            }
            Role::Leading { term, until, .. } => {
                s.role = "leading".into();
                s.term = Some(term);
                s.leader = Some(self.cfg.name.clone());
                s.lead_left_s = Some(
                    until
                        .saturating_duration_since(Instant::now())
                        .as_secs_f64(),
                );
            }
        }
        s
    }
}

/// The display name of a holder (`name#suffix` → `name`).
pub(crate) fn holder_name(holder: &str) -> &str {
    holder.split('#').next().unwrap_or(holder)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_their_rule() {
        for ok in ["a", "replica-1", "r.2_x", &"x".repeat(64)] {
            assert!(check_name(ok).is_ok(), "{ok}");
        }
        for bad in ["", "a b", "a/b", "é", "a\"b", &"x".repeat(65)] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_forward_key_depends_on_the_operator_key_only() {
        assert_eq!(forward_key("k"), forward_key("k"));
        assert_ne!(forward_key("k"), forward_key("k2"));
        assert_eq!(forward_key("k").len(), 64);
        assert!(forward_key("k").bytes().all(|b| b.is_ascii_hexdigit()));
    }

    #[test]
    fn holder_names_strip_the_suffix() {
        assert_eq!(holder_name("r1#abc"), "r1");
        assert_eq!(holder_name("r1"), "r1");
    }
}
