//! The application core: registry, leases, folds and ticks, with the time
//! injected (`now_s`, seconds on the router's clock) and no HTTP.
//! Source: `ROUTING.md` §4.
//!
//! Durability: a deposit is appended to the store's log before it is folded
//! and acknowledged (in process: [`Router::deposit`]; the HTTP shell splits
//! it into [`Router::deposit_prepare`], an append outside the router's lock
//! batched with its neighbours, and [`Router::deposit_commit`] in sequence
//! order, so leases never wait on a disk flush); ticks write a snapshot of the [`state::Durable`] state
//! (one row, atomic on every backend) with the highest folded seq. A restart
//! loads the snapshot, ages the evidence by the time that passed and folds
//! again every logged deposit after the snapshot: no acknowledged deposit
//! is lost.

mod acks;
mod admission;
mod aging;
mod counters;
mod deposit;
mod due;
mod facts;
mod fold;
#[cfg(test)]
mod identity_tests;
mod lease;
mod lease_log;
pub mod limits;
mod live_join;
mod names;
mod records;
mod refill;
pub mod reports;
mod retention;
mod settler;
mod snapshot;
pub mod state;
mod target_rows;
mod tick;
#[cfg(test)]
mod trust_tests;
mod view;

pub use acks::{ACKS_MAX, ACK_MEMORY_S};
pub use admission::{NewIdentity, Registration};
pub use aging::{Retired, TickInputs, TickWork};
pub use counters::Counters;
pub use deposit::{Prepared, PreparedDeposit};
pub use fold::Logged;
pub use lease::{state_name, tier_name};
pub use lease_log::{PreparedLease, Restored};
pub use refill::{RefillDecision, RefillInputs, RefillPlan};
pub use settler::Settler;
pub use snapshot::{device_payload, Rows, Snapshot};
pub use tick::TickReport;

use std::collections::{BTreeMap, BTreeSet, HashMap};

use routing::dynamics::DriftBank;
use routing::field::{Field, Layer, Receipt};
use routing::policy::Tier;
use routing::prices::Pool;
use routing::trust::Clusters;

pub use records::{
    settled_page, DeviceView, SettledPage, SettledRow, TargetView, SETTLED_PAGE_MAX,
};
pub use view::{ArchetypeView, CellView, FieldView, ReplicaLabel, SourceView, ViewTables};

use crate::api::ApiError;
use crate::config::{item_usage, RouterConfig, KNOWN_FACT_SCALE, POOLS, UNCAPPED};
use crate::events::Event;
use crate::store::{Row, Store, StoreError, Table};
use state::Durable;

/// The field's dimensions (`ROUTING.md` §3 Options and dimensions).
pub fn dimensions() -> Vec<String> {
    let mut d = vec![
        "reliability".to_string(),
        "latency".to_string(),
        "financial".to_string(),
    ];
    d.extend(POOLS.iter().map(|p| format!("budget:{p}")));
    d
}

/// The field's layers, coarse to fine.
pub const LAYERS: [&str; 4] = ["source", "binding", "task", "environment"];

/// A device that is live (its lease is fresh). Its request budget is in
/// [`limits::Limits`], which registering again does not reset.
#[derive(Debug, Clone)]
pub(crate) struct Live {
    pub expires_s: f64,
}

/// One leased item.
#[derive(Debug, Clone)]
pub(crate) struct Item {
    pub target: String,
    pub tier: Tier,
    pub token: String,
    pub done: bool,
    pub pending: bool,
}

/// One outstanding lease.
#[derive(Debug, Clone)]
pub(crate) struct Lease {
    pub device: String,
    pub granted_s: f64,
    pub expires_s: f64,
    pub items: Vec<Item>,
}

/// One queued target with the refill's decision.
#[derive(Debug, Clone)]
pub(crate) struct Queued {
    pub target: String,
    pub tier: Tier,
    pub priority: f64,
    /// Shared: a verification is queued for several archetypes.
    pub receipt: std::sync::Arc<Receipt>,
    pub host: String,
    pub requires: std::sync::Arc<[String]>,
}

/// Replaces the router's archetype choice in the refill (the lab's
/// baselines: round-robin, greedy by observed mean, flat Thompson
/// sampling). Everything else of the router stays. Source: `ROUTING.md` §5.
pub trait Chooser: Send {
    /// A short name for reports.
    fn name(&self) -> &str;
    /// Picks one of `feasible` (live archetypes the router's decision did
    /// not veto, never empty) for `target` on `source`; `receipt` is the
    /// router's own decision at the target's address.
    fn choose(
        &mut self,
        source: &str,
        target: &str,
        feasible: &[&str],
        receipt: &Receipt,
    ) -> String;
    /// Learns from one folded outcome of `archetype` on `target` of `source`.
    fn observe(
        &mut self,
        source: &str,
        target: &str,
        archetype: &str,
        ok: bool,
        latency_ms: Option<f64>,
    );
}

/// A store shared between the router and the shell's store writer.
pub type SharedStore = std::sync::Arc<parking_lot::Mutex<Box<dyn Store>>>;

/// The router: owns the field and the registry; writes through to a [`Store`].
pub struct Router {
    cfg: RouterConfig,
    store: SharedStore,
    backend: &'static str,
    next_seq: u64,
    d: Durable,
    /// Live devices. A persistent map: the views clone it in O(1) under
    /// the lock and count it outside ([`view::ViewTables`]).
    live: imbl::OrdMap<String, Live>,
    limits: limits::Limits,
    /// Answers given to deposits, for a retry after a lost answer.
    acks: acks::Acks,
    /// Targets each device discovered in the open price window.
    discovered: HashMap<String, usize>,
    leases: HashMap<String, Lease>,
    /// Leases ended since the last snapshot, whose rows it deletes.
    ended_leases: Vec<String>,
    /// Leases that expired recently: id → (device, expiry), kept for
    /// [`EXPIRED_MEMORY_S`] so a late deposit is told `lease_expired`.
    expired: HashMap<String, (String, f64)>,
    /// Items in flight per target. A persistent map: the refill's inputs
    /// clone it in O(1) under the lock ([`RefillInputs`]).
    in_flight: imbl::HashMap<String, u32>,
    /// Items granted and not yet deposited, expired or protested (their
    /// deposits are still to be charged).
    pending_items: u64,
    /// Per capped pool, what the leases the cap cut in the open price
    /// window would have charged: demand the window's usage cannot show,
    /// added to it when the window's price is ticked.
    held_demand: BTreeMap<String, f64>,
    /// Devices whose lease the cap cut in the open price window.
    held_devices: BTreeSet<String>,
    /// When the last tick ran and the gap before it (the shell's period).
    last_tick_s: Option<f64>,
    tick_gap_s: Option<f64>,
    /// Ticks that began an aging of the field (`core/aging.rs`): an aged
    /// clone is put in place only by the tick that began the latest.
    aging_epoch: u64,
    /// Per host, the latest politeness token promised to an empty answer.
    promised: HashMap<String, f64>,
    queues: BTreeMap<String, std::collections::VecDeque<Queued>>,
    limited: BTreeSet<String>,
    events: Vec<Event>,
    recent: std::collections::VecDeque<Event>,
    counters: Counters,
    /// Written snapshots, for the deposit log's retention.
    written: retention::Written,
    /// Devices forgotten since the last snapshot, whose rows it deletes.
    departed: Vec<String>,
    /// When departed devices were last swept for, seconds.
    last_sweep_s: f64,
    /// New identities whose first registration is being written.
    registering: BTreeSet<String>,
    /// Targets a snapshot carried that is not known to be written
    /// (`snapshot.rs`).
    unwritten_targets: snapshot::Unwritten,
    /// Devices a snapshot carried that is not known to be written.
    unwritten_devices: snapshot::Unwritten,
    dirty: bool,
    chooser: Option<Box<dyn Chooser>>,
    /// A settlement model replacing trust and quorum ([`Settler`]).
    settler: Option<Box<dyn Settler>>,
    last_snapshot_s: f64,
    /// When each open verification lapses, soonest first.
    verify_due: due::VerifyDue,
    /// The names observations share (device, adapter, version).
    names: names::Names,
}

/// Seconds an expired lease id is remembered (to answer `lease_expired`).
pub const EXPIRED_MEMORY_S: f64 = 3600.0;

/// Recent events kept for the field view.
pub const RECENT_EVENTS: usize = 50;

/// Why the router could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The stored snapshot does not fit this build or configuration.
    #[error("stored state is unreadable: {0}")]
    BadState(String),
    /// The configuration is out of range.
    #[error("bad configuration: {0}")]
    BadConfig(String),
}

fn fresh(cfg: &RouterConfig, now_s: f64) -> Result<Durable, OpenError> {
    let fv = cfg.field_variances;
    fv.check().map_err(OpenError::BadConfig)?;
    let layers: Vec<Layer> = LAYERS
        .iter()
        .zip(fv.layers)
        .map(|(l, v)| Layer::with_variance(l, v))
        .collect();
    let options: Vec<&str> = cfg.archetypes.iter().map(|s| s.as_str()).collect();
    let dims = dimensions();
    let dim_refs: Vec<&str> = dims.iter().map(|s| s.as_str()).collect();
    let mut field = Field::new(layers, fv.root, &options, &dim_refs)
        .map_err(|e| OpenError::BadConfig(e.to_string()))?;
    for d in &dims {
        let scale = if d == "latency" {
            fv.latency_scale
        } else if d == "financial" || d.starts_with("budget:") {
            KNOWN_FACT_SCALE
        } else {
            1.0
        };
        field
            .set_dimension_scale(d, scale)
            .map_err(|e| OpenError::BadConfig(e.to_string()))?;
    }
    let root = routing::field::Address::root();
    for o in &options {
        for p in POOLS {
            let dim = format!("budget:{p}");
            field
                .set_prior(&root, o, &dim, item_usage(p))
                .and_then(|_| field.set_weight(&root, o, &dim, 0.0))
                .map_err(|e| OpenError::BadConfig(e.to_string()))?;
        }
    }
    let mut pools = BTreeMap::new();
    for p in POOLS {
        pools.insert(
            p.to_string(),
            Pool::with_cap(UNCAPPED).map_err(|e| OpenError::BadConfig(e.to_string()))?,
        );
    }
    Ok(Durable {
        field,
        drift: DriftBank::default(),
        pools,
        clusters: Clusters::new(0.5, 5),
        sources: imbl::OrdMap::new(),
        buckets: BTreeMap::new(),
        devices: Default::default(),
        targets: Default::default(),
        temperature: 1.0,
        applied_seq: 0,
        aged_to_s: now_s,
        window_start_s: now_s,
        usage: BTreeMap::new(),
        t_s: now_s,
        snapshot_seq: 0,
        reports: Default::default(),
    })
}

/// Key of the snapshot row in [`Table::Meta`].
pub const SNAPSHOT_KEY: &str = "snapshot";

/// The durable state in the snapshot `row`, its field as read: the
/// targets' rows add their cells to it before [`field_restored`] rebuilds
/// its caches and ages it.
///
/// Errors: [`OpenError::BadState`] when the row is unreadable or was
/// written for other archetypes than `cfg`'s.
fn restored(cfg: &RouterConfig, row: &Row) -> Result<Durable, OpenError> {
    let mut d: Durable =
        serde_json::from_str(&row.payload).map_err(|e| OpenError::BadState(e.to_string()))?;
    let declared: Vec<String> = d.field.options().to_vec();
    if declared != cfg.archetypes {
        return Err(OpenError::BadState(format!(
            "stored archetypes {declared:?} differ from the configured {:?}",
            cfg.archetypes
        )));
    }
    // Rows written before the snapshot sequence carried the deposit seq as
    // their version: continue above it.
    d.snapshot_seq = d.snapshot_seq.max(row.version);
    Ok(d)
}

/// `d` with its field's caches rebuilt and its evidence aged to `now_s`
/// (once the targets' rows added their cells). Errors:
/// [`OpenError::BadState`] when the field does not restore.
fn field_restored(d: &mut Durable, now_s: f64) -> Result<(), OpenError> {
    let bad = |e: routing::field::FieldError| OpenError::BadState(e.to_string());
    let placeholder = Field::new(Vec::new(), 1.0, &[], &[]).map_err(bad)?;
    let read = std::mem::replace(&mut d.field, placeholder);
    let dt_h = ((now_s - d.aged_to_s) / 3600.0).max(0.0);
    d.field = Field::restore_aged(read, dt_h).map_err(bad)?;
    d.aged_to_s = now_s.max(d.aged_to_s);
    Ok(())
}

impl Router {
    /// Opens the router on `store` at `now_s`: loads the last snapshot (or
    /// starts empty), ages the evidence by the time since the snapshot,
    /// folds every logged deposit after it, then restores the outstanding
    /// leases (`lease_log.rs`).
    ///
    /// Errors: [`OpenError`] (the store is left as it was).
    pub fn open(
        cfg: RouterConfig,
        mut store: Box<dyn Store>,
        now_s: f64,
    ) -> Result<Router, OpenError> {
        if cfg.archetypes.is_empty() || !(cfg.lease_ttl_s.is_finite() && cfg.lease_ttl_s > 0.0) {
            return Err(OpenError::BadConfig(
                "archetypes and a positive lease TTL are required".into(),
            ));
        }
        if !now_s.is_finite() {
            return Err(OpenError::BadConfig(format!("clock reads {now_s}")));
        }
        let limits = limits::Limits::new(
            cfg.device_rate,
            cfg.registration_rate,
            cfg.registration_address_rate,
        )
        .map_err(OpenError::BadConfig)?;
        store.schema_version()?;
        let d = match store.get(Table::Meta, SNAPSHOT_KEY)? {
            None => fresh(&cfg, now_s)?,
            Some(row) => restored(&cfg, &row)?,
        };
        let mut d = d;
        let mut names = names::Names::default();
        snapshot::restore_targets(&mut d, store.as_mut(), &mut names)?;
        field_restored(&mut d, now_s)?;
        snapshot::restore_devices(&mut d, store.as_mut(), &mut names)?;
        let backend = store.backend();
        let last = store.last_seq()?;
        let verify_due = due::VerifyDue::from_open(d.targets.iter().flat_map(|(name, t)| {
            t.verification
                .open()
                .iter()
                .map(move |(_, at)| (name.clone(), *at))
        }));
        let mut r = Router {
            cfg,
            store: std::sync::Arc::new(parking_lot::Mutex::new(store)),
            backend,
            next_seq: 0,
            d,
            live: imbl::OrdMap::new(),
            limits,
            acks: acks::Acks::default(),
            discovered: HashMap::new(),
            leases: HashMap::new(),
            ended_leases: Vec::new(),
            expired: HashMap::new(),
            in_flight: imbl::HashMap::new(),
            pending_items: 0,
            held_demand: BTreeMap::new(),
            held_devices: BTreeSet::new(),
            last_tick_s: None,
            tick_gap_s: None,
            aging_epoch: 0,
            promised: HashMap::new(),
            queues: BTreeMap::new(),
            limited: BTreeSet::new(),
            events: Vec::new(),
            recent: std::collections::VecDeque::new(),
            counters: Counters::default(),
            dirty: false,
            chooser: None,
            settler: None,
            last_snapshot_s: f64::MIN,
            written: retention::Written::default(),
            departed: Vec::new(),
            last_sweep_s: f64::MIN,
            registering: BTreeSet::new(),
            unwritten_targets: Default::default(),
            unwritten_devices: Default::default(),
            verify_due,
            names,
        };
        let pending = r.store.lock().deposits_after(r.d.applied_seq)?;
        for entry in pending {
            match serde_json::from_str::<fold::Logged>(&entry.payload) {
                Ok(logged) => {
                    r.fold(&logged, entry.seq);
                    r.counters.replayed += 1;
                }
                Err(e) => {
                    return Err(OpenError::BadState(format!(
                        "deposit {} unreadable: {e}",
                        entry.seq
                    )))
                }
            }
        }
        r.next_seq = last.max(r.d.applied_seq) + 1;
        r.restore_leases(now_s)?;
        Ok(r)
    }

    /// Replaces the archetype choice of the refill with `chooser` (see
    /// [`Chooser`]); `None` restores the router's own decision.
    pub fn set_chooser(&mut self, chooser: Option<Box<dyn Chooser>>) {
        self.chooser = chooser;
    }

    /// The configuration.
    pub fn config(&self) -> &RouterConfig {
        &self.cfg
    }

    /// The evidence field (read only).
    pub fn field(&self) -> &Field {
        &self.d.field
    }

    /// Counters since this process opened the router.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// The store backend name.
    pub fn backend(&self) -> &'static str {
        self.backend
    }

    /// The store, for the shell's store writer (writes outside the router's lock).
    pub fn store_handle(&self) -> SharedStore {
        self.store.clone()
    }

    /// Takes the events emitted since the last call.
    pub fn drain_events(&mut self) -> Vec<Event> {
        std::mem::take(&mut self.events)
    }

    fn emit(&mut self, e: Event) {
        *self
            .counters
            .events
            .entry(e.kind().to_string())
            .or_default() += 1;
        *self.d.usage.entry("events".into()).or_default() += 1.0;
        if self.recent.len() == RECENT_EVENTS {
            self.recent.pop_front();
        }
        self.recent.push_back(e.clone());
        self.events.push(e);
    }

    /// Counts a refused request (the shell calls this for errors it finds itself).
    pub fn refused(&mut self, e: &ApiError) {
        *self
            .counters
            .refused
            .entry(e.kind().to_string())
            .or_default() += 1;
    }
}
