//! The driver: the real [`Router`] in process on a simulated clock, fed by
//! the world's devices. Discrete events in time order (ties by insertion):
//! devices come online (register), lease, execute each item (the world
//! decides the outcome, the device's [`Participant`] may protest first),
//! deposit, and lease again; the router ticks every `tick_s`; the figures
//! are sampled every `sample_s`. Source: `ROUTING.md` §5.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap};
use std::time::Instant;

use router::api::{ApiError, DepositRequest, LeaseItem, Outcome, ProtestRequest};
use router::config::{CellFact, Facts, SourceFact, TargetFact};
use router::Router;
use routing::participant::{Participant, Verdict};

use super::baseline::Contender;
use super::report::{
    Budget, ContenderReport, DriftMark, EventFigures, RegretParts, Sample, Timing, WorkPerDecision,
};
use super::store::LabStore;
use super::world::{World, ADAPTER_ID, ADAPTER_OK, ARCHETYPES, BROWSER, CLOUD_COST};
use super::SimError;

mod changes;
mod device;
mod figures;
pub mod port;
mod state;

pub use crate::ledger::{Cause, Ledger, Loss, LowerDevice};

use port::Port;
use state::{DevState, Held, Running, Shadow};

/// Curiosity window of a device's local negative facts, seconds.
pub const CURIOSITY_S: f64 = 1800.0;
/// Deposits a device needs before its trust counts in the AUC and histogram.
pub const MIN_DEPOSITS_FOR_TRUST: u64 = 5;
/// How long a simulated device's lease may be held by the router (its
/// long poll, `LeaseRequest::wait_s`), seconds. Inside the hold the router
/// tries again at each empty answer's hint and the answer reaches the
/// device 1–5 ms later; when the hold runs out the device polls again
/// 10–110 ms after it.
pub const LONG_POLL_S: f64 = 20.0;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    Tick,
    Sample,
    Snapshot,
    Wave(u64),
    Online(usize),
    Offline(usize),
    Upgrade(usize),
    Wake(usize, u64),
    Done(usize, u64),
}

/// Running sums of the figures.
#[derive(Debug, Default)]
struct Acc {
    attempts: u64,
    successes: u64,
    items: u64,
    protests: u64,
    refused: BTreeMap<String, u64>,
    regret_failures: f64,
    regret_cost: f64,
    violations: u64,
    drift: Vec<DriftMark>,
    budget: Budget,
    busy_s: f64,
    wasted_s: f64,
    wasted_conservative_s: f64,
    drought_busy_s: f64,
    drought_wasted_s: f64,
    drought_wasted_conservative_s: f64,
    /// Device-seconds online in closed online spells.
    online_s: f64,
    /// `busy_s` and online device-seconds at the previous sample.
    sampled_busy_s: f64,
    sampled_online_s: f64,
    work: WorkPerDecision,
    event: EventFigures,
    series: Vec<Sample>,
    trust_at_bug: BTreeMap<String, f64>,
    blocked_attempts_after: u64,
    blocked_attempts_before: u64,
    last_grant: Vec<Option<usize>>,
    timing: Timing,
    lease_us: Vec<u32>,
    /// Attempts started by work kind and archetype.
    by_kind: BTreeMap<String, BTreeMap<String, u64>>,
    /// Regret's parts by work kind.
    regret_by_kind: BTreeMap<String, RegretParts>,
    /// The timed source changes' figures.
    changes: Vec<changes::ChangeCount>,
}

/// One contender's run over one world.
pub struct Driver<'w> {
    world: &'w World,
    contender: Contender,
    port: Port,
    heap: BinaryHeap<Reverse<(u64, u64, Ev)>>,
    seq: u64,
    devs: Vec<DevState>,
    shadow: BTreeMap<String, Shadow>,
    /// Deposit tokens of granted items over their host's true limit whose
    /// host answers with 429 ([`World::throttled`]).
    throttled: std::collections::BTreeSet<String>,
    targets: HashMap<String, usize>,
    online: [usize; 4],
    arrived: Vec<bool>,
    acc: Acc,
    retry_s: f64,
    /// Trust moves tagged with the world's truth (worlds with an adapter bug).
    ledger: Option<Ledger>,
}

fn ms(t: f64) -> u64 {
    (t * 1000.0).round().max(0.0) as u64
}

fn wire_err(e: &ApiError) -> String {
    e.kind().to_string()
}

impl<'w> Driver<'w> {
    /// A driver for `contender` on `world` (the router opened at t = 0 with
    /// the operator's facts for the sources present at the start).
    /// Errors: [`SimError::Router`] when the router refuses to open or the facts.
    pub fn new(world: &'w World, contender: Contender) -> Result<Driver<'w>, SimError> {
        let mut router = Router::open(contender.config(), Box::new(LabStore::new()), 0.0)
            .map_err(|e| SimError::Router(e.to_string()))?;
        router.set_chooser(contender.chooser(world));
        router.set_settler(contender.settler());
        Self::with_port(world, contender, Port::Local(Box::new(router)))
    }

    /// A driver for the router on `world` over `port`. Over routerd
    /// ([`Port::Service`]) only [`Contender::Router`] runs: routerd serves
    /// its own model, with its own defaults.
    /// Errors: [`SimError::BadSpec`] for another contender over routerd;
    /// [`SimError::Router`] when the facts are refused.
    pub fn with_port(
        world: &'w World,
        contender: Contender,
        port: Port,
    ) -> Result<Driver<'w>, SimError> {
        if matches!(port, Port::Service(_)) && contender != Contender::Router {
            return Err(SimError::BadSpec(format!(
                "over routerd only the router runs, not {}: routerd serves its own model",
                contender.name()
            )));
        }
        let devs = world
            .devices
            .iter()
            .map(|_| DevState {
                online: false,
                epoch: 0,
                secret: None,
                version: ADAPTER_OK,
                participant: Participant::new(CURIOSITY_S).expect("a positive window"),
                held: None,
                attempts: 0,
                deposits: 0,
                idle_since: None,
                admissible_from: None,
                poll_until: None,
                online_since: 0.0,
                busy_until: 0.0,
            })
            .collect();
        let mut d = Driver {
            world,
            contender,
            port,
            heap: BinaryHeap::new(),
            seq: 0,
            devs,
            shadow: BTreeMap::new(),
            throttled: Default::default(),
            targets: world
                .targets
                .iter()
                .enumerate()
                .map(|(i, t)| (t.name.clone(), i))
                .collect(),
            online: [0; 4],
            arrived: vec![false; world.sources.len()],
            acc: Acc {
                last_grant: vec![None; world.targets.len()],
                changes: changes::change_counts(world),
                ..Acc::default()
            },
            retry_s: (world.spec.devices as f64 / 100.0).clamp(world.spec.tick_s, 45.0),
            ledger: world.bug.is_some().then(Ledger::default),
        };
        d.acc.budget.caps = world.caps.clone();
        d.declare(0.0, true)?;
        d.schedule_world();
        Ok(d)
    }

    fn at(&mut self, t: f64, ev: Ev) {
        self.seq += 1;
        self.heap.push(Reverse((ms(t), self.seq, ev)));
    }

    /// The operator's facts: sources arriving by `t` not yet declared, their
    /// targets, the cost table, the latency weight (0: this lab scores
    /// successes and cloud cost), and the caps (first call only).
    fn declare(&mut self, t: f64, first: bool) -> Result<(), SimError> {
        let w = self.world;
        let mut facts = Facts::default();
        for (i, s) in w.sources.iter().enumerate() {
            if self.arrived[i] || s.arrives_s > t {
                continue;
            }
            self.arrived[i] = true;
            facts.sources.push(SourceFact {
                source: s.name.clone(),
                host: s.host.clone(),
                binding: s.binding.clone(),
                requires: vec![],
                change_timescale_s: Some(s.change_timescale_s),
                bucket: Some(s.bucket),
            });
            let (capacity, rate) = s.true_bucket();
            self.shadow.entry(s.host.clone()).or_insert(Shadow {
                capacity,
                rate,
                tokens: capacity,
                last: t,
            });
            for k in s.targets.clone() {
                facts.targets.push(TargetFact {
                    target: w.targets[k].name.clone(),
                    source: s.name.clone(),
                    listing: false,
                });
            }
        }
        if first {
            for (a, name) in ARCHETYPES.iter().enumerate() {
                facts.priors.push(CellFact {
                    address: String::new(),
                    option: name.to_string(),
                    dimension: "financial".into(),
                    value: CLOUD_COST[a],
                });
                facts.weights.push(CellFact {
                    address: String::new(),
                    option: name.to_string(),
                    dimension: "latency".into(),
                    value: 0.0,
                });
            }
            facts.caps = w.caps.clone();
        }
        if facts.sources.is_empty() && !first {
            return Ok(());
        }
        self.port.put_facts(&facts, t).map_err(SimError::Router)?;
        Ok(())
    }

    fn schedule_world(&mut self) {
        let w = self.world;
        let spec = &w.spec;
        let end = spec.end_s();
        let mut t = spec.tick_s;
        while t <= end {
            self.at(t, Ev::Tick);
            t += spec.tick_s;
        }
        let mut t = spec.sample_s;
        while t <= end + 1e-9 {
            self.at(t.min(end), Ev::Sample);
            t += spec.sample_s;
        }
        let mut waves: Vec<u64> = w
            .sources
            .iter()
            .map(|s| ms(s.arrives_s))
            .filter(|&m| m > 0)
            .collect();
        waves.dedup();
        for m in waves {
            self.at(m as f64 / 1000.0, Ev::Wave(m));
        }
        for (i, d) in w.devices.iter().enumerate() {
            for &(a, b) in &d.sessions {
                self.at(a, Ev::Online(i));
                if b < end {
                    self.at(b, Ev::Offline(i));
                }
            }
            let upgrades = d.upgrade_at.into_iter();
            for u in upgrades.chain(d.rollouts.iter().map(|&(t, _)| t)) {
                self.at(u, Ev::Upgrade(i));
            }
        }
        if let Some((_, from)) = w.bug {
            self.at((from - 0.001).max(0.0), Ev::Snapshot);
        }
    }

    /// Runs to the end of the world's time; `progress(t_s)` is called at every sample.
    /// Errors: [`SimError::Router`] when the router fails a tick;
    /// [`SimError::Service`] when routerd stopped answering.
    pub fn run(mut self, mut progress: impl FnMut(f64)) -> Result<ContenderReport, SimError> {
        let wall = Instant::now();
        let end_ms = ms(self.world.spec.end_s());
        while let Some(Reverse((t_ms, _, ev))) = self.heap.pop() {
            if t_ms > end_ms {
                break;
            }
            let t = t_ms as f64 / 1000.0;
            match ev {
                Ev::Tick => self.tick(t)?,
                Ev::Sample => {
                    self.sample(t);
                    progress(t);
                }
                Ev::Snapshot => self.snapshot_trust(),
                Ev::Wave(_) => self.declare(t, false)?,
                Ev::Online(d) => self.come_online(d, t),
                Ev::Offline(d) => self.go_offline(d, t),
                Ev::Upgrade(d) => {
                    // Events run at whole milliseconds, rounded: the
                    // upgrade that woke this one is at most half of one later.
                    self.devs[d].version = self.world.adapter_at(d, t + 0.0005);
                    if self.devs[d].online {
                        self.register(d, t);
                    }
                }
                Ev::Wake(d, e) if e == self.devs[d].epoch => self.wake(d, t),
                Ev::Done(d, e) if e == self.devs[d].epoch => self.done(d, t),
                Ev::Wake(..) | Ev::Done(..) => {}
            }
        }
        self.acc.timing.wall_s = wall.elapsed().as_secs_f64();
        self.finish()
    }

    /// Starts the next item of the held lease, or asks for a new lease.
    fn next_item(&mut self, d: usize, t: f64) {
        let e = self.devs[d].epoch;
        loop {
            let Some(held) = self.devs[d].held.as_mut() else {
                return;
            };
            if held.next >= held.items.len() {
                self.devs[d].held = None;
                self.at(t, Ev::Wake(d, e));
                return;
            }
            let i = held.next;
            held.next += 1;
            let item = held.items[i].clone();
            let receipt = held.receipts.get(i).cloned();
            let lease_id = held.id.clone();
            let Some(&k) = self.targets.get(&item.target) else {
                continue;
            };
            let verdict = match &receipt {
                Some(r) => self.devs[d].participant.fold(&item.source, r, t),
                None => Ok(Verdict::Execute),
            };
            if let Ok(Verdict::Protest { .. }) = verdict {
                self.protest(d, &lease_id, &item, t);
                continue;
            }
            let n = self.devs[d].attempts;
            self.devs[d].attempts += 1;
            let archetype = ARCHETYPES[self.world.devices[d].archetype];
            *self
                .acc
                .by_kind
                .entry(item.kind.clone())
                .or_default()
                .entry(archetype.to_string())
                .or_default() += 1;
            let refused = self.throttled.remove(&item.deposit_token);
            let attempt = match refused.then(|| self.world.throttled(k, t)).flatten() {
                Some(a) => a,
                None => self.world.attempt(d, k, t, n),
            };
            let done = t + attempt.latency_s;
            let (s, a) = (
                self.world.targets[k].source,
                self.world.devices[d].archetype,
            );
            changes::count_attempt(&mut self.acc.changes, s, a, t);
            self.acc.busy_s += attempt.latency_s;
            if self.in_drought(t) {
                self.acc.drought_busy_s += attempt.latency_s;
            }
            if item.kind != "verification" {
                self.regret(d, k, t, &item.kind);
            }
            let st = &mut self.devs[d];
            st.busy_until = done;
            if let Some(h) = st.held.as_mut() {
                h.running = Some(Running { target: k, attempt });
            }
            self.at(done, Ev::Done(d, e));
            return;
        }
    }

    fn in_drought(&self, t: f64) -> bool {
        self.world.drought.is_some_and(|(a, b)| a <= t && t < b)
    }

    fn protest(&mut self, d: usize, lease_id: &str, item: &LeaseItem, t: f64) {
        let req = ProtestRequest {
            device_id: self.world.devices[d].id.clone(),
            device_secret: self.devs[d].secret.clone().unwrap_or_default(),
            lease_id: lease_id.to_string(),
            target: item.target.clone(),
            deposit_token: item.deposit_token.clone(),
            reason: "unreachable from here".into(),
        };
        let t0 = Instant::now();
        let r = self.port.protest(&req, t);
        self.acc.timing.router_s += t0.elapsed().as_secs_f64();
        match r {
            Ok(_) => self.acc.protests += 1,
            Err(e) => *self.acc.refused.entry(wire_err(&e)).or_default() += 1,
        }
    }

    fn done(&mut self, d: usize, t: f64) {
        let Some(held) = self.devs[d].held.as_mut() else {
            return;
        };
        let Some(run) = held.running.take() else {
            return;
        };
        let item = held.items[held.next - 1].clone();
        let lease_id = held.id.clone();
        let revision = held
            .receipts
            .get(held.next - 1)
            .map(|r| r.revision)
            .unwrap_or(0);
        let w = self.world;
        let source = w.targets[run.target].source;
        let version = self.devs[d].version;
        let outcome = Outcome {
            ok: run.attempt.ok,
            content_hash: run
                .attempt
                .ok
                .then(|| w.observed(d, run.target, t, version)),
            latency_ms: Some(run.attempt.latency_s * 1000.0),
            error_class: run.attempt.error_class.map(String::from),
            retry_after_s: run.attempt.retry_after_s,
            crawl_delay_s: w.source_at(source, t).crawl_delay_s,
        };
        let req = DepositRequest {
            device_id: w.devices[d].id.clone(),
            device_secret: self.devs[d].secret.clone().unwrap_or_default(),
            lease_id,
            target: item.target.clone(),
            deposit_token: item.deposit_token.clone(),
            receipt_revision: revision,
            adapter_id: ADAPTER_ID.into(),
            adapter_version: version.into(),
            outcome,
            discovered: vec![],
        };
        let compared = self.before_comparison(d, run.target, t);
        let t0 = Instant::now();
        let r = self.port.deposit(&req, t);
        self.acc.timing.router_s += t0.elapsed().as_secs_f64();
        if let (Ok(_), Some(hash)) = (&r, &req.outcome.content_hash) {
            let kind = w.hash_kind(d, run.target, version);
            self.after_comparison(d, run.target, compared, hash, kind, t);
        }
        match r {
            Ok(_) => {
                self.acc.attempts += 1;
                self.acc.successes += u64::from(run.attempt.ok);
                self.devs[d].deposits += 1;
            }
            Err(e) => *self.acc.refused.entry(wire_err(&e)).or_default() += 1,
        }
        let p = &mut self.devs[d].participant;
        let name = &w.sources[source].name;
        if run.attempt.ok {
            p.reached(name);
        } else if run.attempt.error_class == Some("network") {
            let _ = p.unreachable(name, t);
        }
        self.next_item(d, t);
    }

    fn tick(&mut self, t: f64) -> Result<(), SimError> {
        // The price window is read only where a pool has a cap to report.
        let capped = !self.acc.budget.caps.is_empty();
        let (window_start, usage) = if capped {
            self.port.price_window()
        } else {
            Default::default()
        };
        let closing: Vec<(String, f64)> = self
            .acc
            .budget
            .caps
            .keys()
            .map(|p| (p.clone(), usage.get(p).copied().unwrap_or(0.0)))
            .collect();
        let t0 = Instant::now();
        let queued = self.port.tick(t).map_err(SimError::Router)?;
        if capped && self.port.price_window().0 != window_start {
            for (pool, used) in closing {
                self.acc.budget.windows.push((t, pool, used));
            }
        }
        let el = t0.elapsed().as_secs_f64();
        self.acc.timing.router_s += el;
        self.acc.timing.tick_s += el;
        self.acc.timing.decisions += queued;
        for ev in self.port.drain_events() {
            self.event(ev);
        }
        if let Some((from, to)) = self.world.drought {
            if t >= from && t < to && self.acc.event.browsers_gone_s.is_none() {
                if self.port.live(ARCHETYPES[BROWSER]) == 0 {
                    self.acc.event.browsers_gone_s = Some(t);
                }
            }
        }
        Ok(())
    }
}
