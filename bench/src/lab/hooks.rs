//! The replay's hooks in a lab run: what happens at each cycle start (the
//! co-tenant's reserve burst, scripted quota shrinks, the epoch boundary)
//! and each cycle end (the heap release after a cordon, streamed records,
//! the progress bar, the bin makespan metric).

use std::sync::Arc;
use std::time::{Duration, Instant};

use fleet::posture::PostureOwner;
use fleet_bindings::Fleet;
use fleet_workloads::replay::ReplayOptions;
use fleet_workloads::Corpus;
use indicatif::ProgressBar;
use parking_lot::Mutex;

use crate::lab::cotenant::ReserveTrigger;
use crate::lab::cycle_stats::CycleStats;
use crate::lab::requota::QuotaWatch;
use crate::lab::spec::{LabError, QuotaShrink, RunSpec};
use crate::probe::cgroup::ChildCgroup;
use crate::report::TimelineEvent;

/// The run's cgroup, its scripted shrinks and the quota restored after
/// each, shared with the cycle-start hook.
pub(crate) type ShrinkState = Arc<Mutex<(Option<ChildCgroup>, Vec<QuotaShrink>, Option<f64>)>>;

/// What the hooks leave for the end of the run.
pub(crate) struct Hooked {
    /// The progress bar, to clear.
    pub progress: Option<ProgressBar>,
    /// The streamed cycle and outcome files (`--stream`).
    pub streamed: Option<Arc<Mutex<CycleStats>>>,
    /// Heap releases, as timeline events.
    pub heap_events: Arc<Mutex<Vec<TimelineEvent>>>,
    /// The run's cgroup (given back to the caller to leave).
    pub shrink_state: ShrinkState,
}

/// What the hooks act on.
pub(crate) struct HookInputs<'a> {
    pub spec: &'a RunSpec,
    pub corpus: &'a Corpus,
    pub fleet: Option<&'a Fleet>,
    pub posture: &'a Arc<PostureOwner>,
    pub watch: Option<Arc<QuotaWatch>>,
    pub trigger: ReserveTrigger,
    pub cgroup: Option<ChildCgroup>,
    pub cgroup_quota: Option<f64>,
    pub t0: Instant,
}

/// Sets `opts`' cycle-start, cycle-end and outcome hooks for a run.
/// Errors: the stream directory or its files cannot be created.
pub(crate) fn install(opts: &mut ReplayOptions, inp: HookInputs<'_>) -> Result<Hooked, LabError> {
    let spec = inp.spec;
    let total = spec.cycles.map_or(inp.corpus.cycles.len(), |c| {
        (c as usize).min(inp.corpus.cycles.len())
    });
    let progress = spec
        .progress
        .then(|| crate::lab::build::progress_bar(total as u64, &spec.contender.label()));
    let pb = progress.clone();
    let streamed = match &spec.stream_to {
        Some(dir) => Some(Arc::new(Mutex::new(open_stream(dir)?))),
        None => None,
    };
    if let Some(stats) = &streamed {
        opts.retain = false;
        let stats = stats.clone();
        opts.on_outcomes = Some(Box::new(move |rows| stats.lock().outcomes(rows)));
    }
    let stream_rows = streamed.clone();
    let heap_events = Arc::new(Mutex::new(Vec::new()));
    let mut heap_release = spec
        .release_heap
        .then(|| {
            inp.fleet.map(|f| {
                crate::lab::release::HeapRelease::new(
                    f.handle(),
                    inp.posture.clone(),
                    inp.t0,
                    heap_events.clone(),
                )
            })
        })
        .flatten();
    opts.on_cycle_end = Some(Box::new(move |rec| {
        if let Some(h) = heap_release.as_mut() {
            h.at_cycle_end(rec.cycle);
        }
        if let Some(stats) = &stream_rows {
            stats.lock().cycle(rec);
        }
        if let Some(pb) = &pb {
            pb.inc(1);
            pb.set_message(format!(
                "cycle {} {:.1} ms",
                rec.cycle,
                rec.makespan_us() as f64 / 1e3
            ));
        }
        for b in &rec.bins {
            fleet::telemetry::record_bin_makespan(b.bin, Duration::from_micros(b.walk_us));
        }
    }));
    let shrink_state: ShrinkState = Arc::new(Mutex::new((
        inp.cgroup,
        spec.quota_shrinks.clone(),
        inp.cgroup_quota,
    )));
    let shrink_cb = shrink_state.clone();
    let boundary = inp.watch;
    let fleet_handle = inp.fleet.map(|f| f.handle());
    let trigger = inp.trigger;
    opts.on_cycle_start = Some(Box::new(move |cycle| {
        trigger.cycle_start();
        let mut st = shrink_cb.lock();
        let (cg, shrinks, base) = &mut *st;
        if let Some(cg) = cg.as_mut() {
            for s in shrinks.iter() {
                if cycle == s.at_cycle {
                    let _ = cg.set_quota(s.cores);
                } else if let (true, Some(restore)) =
                    (cycle == s.at_cycle.saturating_add(s.cycles), *base)
                {
                    let _ = cg.set_quota(restore);
                }
            }
        }
        // Every cycle start is an epoch boundary (pins are re-keyed only here).
        match (&boundary, &fleet_handle) {
            (Some(w), _) => w.boundary(u64::from(cycle)),
            (None, Some(h)) => h.epoch_boundary(u64::from(cycle)),
            _ => {}
        }
    }));
    Ok(Hooked {
        progress,
        streamed,
        heap_events,
        shrink_state,
    })
}

/// Creates `dir` (if missing) and its `cycles.jsonl`, `outcomes.jsonl` and
/// one interval log per latency metric (replacing files of those names) for
/// a streamed run.
fn open_stream(dir: &std::path::Path) -> Result<CycleStats, LabError> {
    let err = |path: std::path::PathBuf| move |source| LabError::Stream { path, source };
    std::fs::create_dir_all(dir).map_err(err(dir.to_path_buf()))?;
    let file = |name: &str| -> Result<Box<dyn std::io::Write + Send>, LabError> {
        let path = dir.join(name);
        let f = std::fs::File::create(&path).map_err(err(path))?;
        Ok(Box::new(std::io::BufWriter::new(f)))
    };
    CycleStats::streamed(file("cycles.jsonl")?, file("outcomes.jsonl")?, dir)
        .map_err(|(path, source)| LabError::Stream { path, source })
}
