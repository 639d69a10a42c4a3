//! The fleet's tracing spans, captured from a real replay on both bindings
//! (`DESIGN.md` §3 "Telemetry"; seed 000 §7): a `cycle` span per cycle, six
//! `solve.bin` spans per cycle (bins 0..5, paths, `walk_ms` recorded when the
//! walk ends, the seat thread's name), a `sim` per simulation, a `resolve`
//! per cycle, a `unit` span per unit on its seat thread, `pump.grant` spans
//! on the pump thread, and one `warn` event per posture transition.
//!
//! The capture is the process's global subscriber (seat threads must see
//! it), so the tests of this file take one lock and clear the capture first.

use fleet::ledger::ExactnessFuse;
use fleet::plan::{serial_thread_name, Plan, Profile};
use fleet::posture::{PostureOwner, PosturePolicy, ThrottleSample};
use fleet_bindings::{boot, BootOptions, PinCores, PUMP_THREAD_NAME};
use fleet_workloads::corpus::CycleCase;
use fleet_workloads::replay::{replay, FleetHost, ReplayOptions};
use fleet_workloads::Corpus;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Debug;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Layer;

/// Cycles replayed per binding.
const CYCLES: u32 = 3;
/// Time scale of the replay (50× faster than the live bot).
const SCALE: f64 = 0.02;

/// One closed span: its name, its fields as text (the last value recorded
/// wins), the thread that opened it and the threads that entered it.
#[derive(Debug, Clone, Default)]
struct SpanRec {
    name: &'static str,
    fields: BTreeMap<String, String>,
    opened_on: String,
    entered_on: BTreeSet<String>,
}

impl SpanRec {
    fn get(&self, key: &str) -> &str {
        self.fields
            .get(key)
            .unwrap_or_else(|| panic!("span {} has no field {key}: {:?}", self.name, self.fields))
    }

    fn num(&self, key: &str) -> u64 {
        self.get(key)
            .parse()
            .unwrap_or_else(|e| panic!("span {} field {key}: {e}", self.name))
    }
}

/// One event: level, target and fields.
#[derive(Debug, Clone)]
struct EventRec {
    level: Level,
    fields: BTreeMap<String, String>,
}

#[derive(Default)]
struct Store {
    spans: Vec<SpanRec>,
    events: Vec<EventRec>,
}

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn Debug) {
        self.0
            .insert(field.name().to_string(), format!("{value:?}"));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_string(), value.to_string());
    }
}

fn thread_name() -> String {
    std::thread::current()
        .name()
        .unwrap_or("<unnamed>")
        .to_string()
}

/// The capturing layer: keeps each span's record in the registry's
/// extensions while it lives and files it in the store when it closes.
struct Capture(Arc<Mutex<Store>>);

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Capture {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut rec = SpanRec {
            name: attrs.metadata().name(),
            opened_on: thread_name(),
            ..Default::default()
        };
        attrs.record(&mut Fields(&mut rec.fields));
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(rec);
        }
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(id) {
            if let Some(rec) = span.extensions_mut().get_mut::<SpanRec>() {
                values.record(&mut Fields(&mut rec.fields));
            }
        }
    }

    fn on_enter(&self, id: &Id, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(id) {
            if let Some(rec) = span.extensions_mut().get_mut::<SpanRec>() {
                rec.entered_on.insert(thread_name());
            }
        }
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(&id) {
            if let Some(rec) = span.extensions_mut().remove::<SpanRec>() {
                self.0.lock().unwrap().spans.push(rec);
            }
        }
    }

    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let mut fields = BTreeMap::new();
        event.record(&mut Fields(&mut fields));
        self.0.lock().unwrap().events.push(EventRec {
            level: *event.metadata().level(),
            fields,
        });
    }
}

/// The process-wide capture, installed once; the guard serialises the tests
/// of this file and starts each from an empty store.
fn capture() -> (MutexGuard<'static, ()>, Arc<Mutex<Store>>) {
    static STORE: OnceLock<Arc<Mutex<Store>>> = OnceLock::new();
    static SERIAL: Mutex<()> = Mutex::new(());
    let store = STORE
        .get_or_init(|| {
            let store = Arc::new(Mutex::new(Store::default()));
            let subscriber = tracing_subscriber::registry().with(Capture(store.clone()));
            tracing::subscriber::set_global_default(subscriber).expect("first subscriber");
            store
        })
        .clone();
    let guard = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    *store.lock().unwrap() = Store::default();
    (guard, store)
}

fn corpus() -> &'static Corpus {
    static CORPUS: OnceLock<Corpus> = OnceLock::new();
    CORPUS.get_or_init(|| {
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../corpus/golden-v1.txt");
        Corpus::load(&path).expect("the shipped golden corpus loads")
    })
}

/// Boots `plan`, replays the first [`CYCLES`] cycles of the golden corpus,
/// shuts down, and returns every span and event captured meanwhile.
fn replay_captured(plan: &Plan) -> Store {
    let (_serial, store) = capture();
    let mut opts = BootOptions::for_plan(plan);
    opts.pin_cores = PinCores::Off;
    let fleet = boot(plan, opts).expect("boot");
    let mut ropts = ReplayOptions::new(SCALE);
    ropts.cycles = Some(CYCLES);
    ropts.fuse = Some(ExactnessFuse::with_hook(|trip| {
        panic!("fuse tripped: {trip}")
    }));
    let result = replay(&FleetHost::new(fleet.handle()), corpus(), ropts).expect("replay");
    assert!(
        result.parity,
        "spans must not change outcomes: {:?}",
        result.first_mismatch
    );
    fleet.shutdown().expect("clean shutdown");
    let mut store = store.lock().unwrap();
    std::mem::take(&mut *store)
}

fn named<'a>(store: &'a Store, name: &str) -> Vec<&'a SpanRec> {
    store.spans.iter().filter(|s| s.name == name).collect()
}

/// Everything both bindings must show. `seat_ok(role, thread)` says whether
/// a unit of `role` (its snake-case name) may run on the named thread.
fn check_spans(store: &Store, seat_ok: impl Fn(&str, &str) -> bool) {
    let cases = &corpus().cycles[..CYCLES as usize];
    check_cycle_spans(store, cases);
    check_bin_spans(store, cases, &seat_ok);
    check_resolve_spans(store, cases, &seat_ok);
    let sims = check_sim_spans(store, cases, &seat_ok);
    check_unit_and_pump_spans(store, cases, sims, &seat_ok);
}

/// One `cycle` span per cycle, with its paths, bins and makespan.
fn check_cycle_spans(store: &Store, cases: &[CycleCase]) {
    let cycles = named(store, "cycle");
    assert_eq!(cycles.len(), cases.len(), "one cycle span per cycle");
    for (span, case) in cycles.iter().zip(cases) {
        assert_eq!(span.num("cycle"), case.index as u64);
        assert_eq!(span.num("paths"), case.paths.len() as u64);
        assert_eq!(span.num("bins"), case.bins.len() as u64);
        let makespan: f64 = span
            .get("makespan_ms")
            .parse()
            .expect("makespan_ms is a number");
        assert!(makespan > 0.0, "a cycle takes time: {makespan}");
    }
}

/// Six `solve.bin` spans per cycle, each on its solver seat.
fn check_bin_spans(store: &Store, cases: &[CycleCase], seat_ok: &dyn Fn(&str, &str) -> bool) {
    let bins = named(store, "solve.bin");
    assert_eq!(bins.len(), 6 * cases.len(), "six solve.bin spans per cycle");
    for case in cases {
        assert_eq!(
            case.bins.len(),
            6,
            "the golden corpus has six bins per cycle"
        );
        let of_cycle: Vec<_> = bins
            .iter()
            .filter(|s| s.num("cycle") == case.index as u64)
            .collect();
        let seen: BTreeSet<u64> = of_cycle.iter().map(|s| s.num("bin")).collect();
        assert_eq!(
            seen,
            (0..6).collect(),
            "cycle {}: bins 0..5 once each",
            case.index
        );
        for span in of_cycle {
            let b = span.num("bin") as usize;
            assert_eq!(
                span.num("paths"),
                case.bins[b].len() as u64,
                "cycle {} bin {b}",
                case.index
            );
            let walk_ms: f64 = span
                .get("walk_ms")
                .parse()
                .expect("walk_ms recorded when the walk ends");
            assert!(
                walk_ms > 0.0,
                "cycle {} bin {b}: walk_ms {walk_ms}",
                case.index
            );
            let seat = span.get("seat");
            assert!(seat_ok("solver", seat), "solve.bin seat {seat}");
            assert!(
                span.entered_on.iter().all(|t| t == seat),
                "a walk stays on its seat: {span:?}"
            );
        }
    }
}

/// One `resolve` span per cycle, on a resolve seat.
fn check_resolve_spans(store: &Store, cases: &[CycleCase], seat_ok: &dyn Fn(&str, &str) -> bool) {
    let resolves = named(store, "resolve");
    assert_eq!(resolves.len(), cases.len(), "one resolve per cycle");
    for (span, case) in resolves.iter().zip(cases) {
        assert_eq!(span.num("cycle"), case.index as u64);
        assert_eq!(span.num("swaps"), case.swaps.len() as u64);
        assert!(
            seat_ok("resolve", span.get("seat")),
            "resolve seat {}",
            span.get("seat")
        );
    }
}

/// One `sim` span per simulated path, on a sim driver seat; returns how
/// many paths are simulated.
fn check_sim_spans(
    store: &Store,
    cases: &[CycleCase],
    seat_ok: &dyn Fn(&str, &str) -> bool,
) -> usize {
    let mut want_sims: Vec<u64> = cases
        .iter()
        .flat_map(|c| {
            c.paths
                .iter()
                .filter(|p| p.sim.is_some())
                .map(|p| p.id as u64)
        })
        .collect();
    let sims = named(store, "sim");
    let mut got_sims: Vec<u64> = sims.iter().map(|s| s.num("path")).collect();
    want_sims.sort_unstable();
    got_sims.sort_unstable();
    assert!(!want_sims.is_empty(), "the first cycles have simulations");
    assert_eq!(got_sims, want_sims, "one sim span per simulated path");
    for span in &sims {
        assert!(
            seat_ok("sim_driver", span.get("seat")),
            "sim seat {}",
            span.get("seat")
        );
        span.num("cpu_us");
        span.num("io_us");
    }

    want_sims.len()
}

/// Every unit span on the seat thread it names; pump grants on the pump,
/// the driver or a seat thread.
fn check_unit_and_pump_spans(
    store: &Store,
    cases: &[CycleCase],
    sims: usize,
    seat_ok: &dyn Fn(&str, &str) -> bool,
) {
    // Every unit span is entered on the seat thread it names, and the walks
    // of each cycle are among them.
    let units = named(store, "unit");
    for span in &units {
        let thread = span.get("thread");
        assert!(
            seat_ok(span.get("role"), thread),
            "unit on {thread}: {span:?}"
        );
        assert!(
            span.entered_on.iter().all(|t| t == thread),
            "unit entered off its seat: {span:?}"
        );
    }
    let walks = units.iter().filter(|s| s.get("role") == "solver").count();
    assert_eq!(walks, 6 * cases.len(), "one Solver unit per bin per cycle");
    assert!(units.len() >= walks + 2 * cases.len() + sims);

    // The pump steps on its own thread (the backstop tick) and on the
    // thread that submits or finishes a unit: the replay's driving thread
    // (this test's) or a seat thread.
    let grants = named(store, "pump.grant");
    assert!(!grants.is_empty(), "the pump granted units");
    let driver = std::thread::current().name().unwrap_or("").to_string();
    assert!(
        grants.iter().all(|s| s.opened_on == PUMP_THREAD_NAME
            || s.opened_on == driver
            || s.opened_on.starts_with("work-fleet-")),
        "grants are on the pump, the driver or a seat thread: {:?}",
        grants.iter().map(|s| &s.opened_on).collect::<BTreeSet<_>>()
    );
    assert!(grants.iter().all(|s| s.num("grants") >= 1));
}

#[test]
fn pinned_binding_spans_name_their_seat_threads() {
    let plan = Plan::resolve(8.0, Profile::Pinned, &Default::default()).expect("plan");
    let store = replay_captured(&plan);
    let label = |role: &str| match role {
        "solver" => "solver",
        "sim_driver" => "sim",
        "resolve" => "resolve",
        "merge" => "merge",
        "pool_state_updater" => "poolupd",
        "registrar" => "registrar",
        other => panic!("unexpected role {other}"),
    };
    check_spans(&store, |role, thread| {
        thread
            .strip_prefix(&format!("work-fleet-{}-", label(role)))
            .is_some_and(|n| n.parse::<u32>().is_ok())
    });
    // Six distinct solver seats carried the walks: one Tracy lane each.
    let seats: BTreeSet<&str> = named(&store, "solve.bin")
        .iter()
        .map(|s| s.get("seat"))
        .collect();
    assert_eq!(seats.len(), 6, "{seats:?}");
}

#[test]
fn serial_binding_spans_ride_its_cycle_threads() {
    let plan = Plan::resolve(4.0, Profile::Auto, &Default::default()).expect("plan");
    let threads = plan.seat_layout().cycle_threads;
    let names: BTreeSet<String> = (0..threads).map(serial_thread_name).collect();
    let store = replay_captured(&plan);
    check_spans(&store, |_role, thread| names.contains(thread));
}

#[test]
fn each_posture_transition_is_one_warn_event_with_from_to_and_cause() {
    let (_serial, store) = capture();
    let owner = PostureOwner::new(PosturePolicy::default(), 4);
    let throttled = ThrottleSample {
        events: 1,
        throttled_us: 1_000,
    };
    assert!(owner.observe(throttled, 0).is_none());
    let enter = owner
        .observe(throttled, 100)
        .expect("two events in 1 s cordon");
    let mut exit = None;
    for t in (1..=40).map(|k| 100 + k * 500) {
        if let Some(tr) = owner.observe(ThrottleSample::default(), t) {
            exit = Some(tr);
            break;
        }
    }
    let exit = exit.expect("clean windows end the cordon");

    let store = store.lock().unwrap();
    let posture: Vec<&EventRec> = store
        .events
        .iter()
        .filter(|e| {
            e.fields
                .get("message")
                .is_some_and(|m| m.starts_with("[fleet-posture] posture"))
        })
        .collect();
    assert_eq!(posture.len(), 2, "one event per transition: {posture:?}");
    for (event, tr) in posture.iter().zip([enter, exit]) {
        assert_eq!(event.level, Level::WARN, "{event:?}");
        assert_eq!(event.fields["from"], format!("{:?}", tr.from));
        assert_eq!(event.fields["to"], format!("{:?}", tr.to));
        assert_eq!(event.fields["cause"], format!("{:?}", tr.cause));
        assert_eq!(event.fields["at_ms"], tr.at_ms.to_string());
    }
    assert_eq!(posture[0].fields["to"], "Cordoned");
    assert_eq!(posture[1].fields["to"], "Nominal");
}
