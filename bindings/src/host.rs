//! The host both bindings start the same way: the pump's shell on its own
//! thread ([`PUMP_THREAD_NAME`]), the handle callers submit through, the
//! posture waker, and the lane every seat settles its units through. A
//! binding adds only how a grant reaches a thread (its sink) and the
//! threads that run the grants ([`Host::spawn_seat`]).
//!
//! `DESIGN.md` §4 (one lane interface, two bindings over the same pump).

use crate::exec::{step_hook, Lane, LostSeats};
use crate::handle::{FleetHandle, Job};
use crate::options::{BootError, BootOptions, PinPlan};
use crate::running::{spawn_named, Fleet, Running, PUMP_THREAD_NAME};
use fleet::census::CensusRow;
use fleet::plan::{Binding, Plan};
use fleet::posture::PostureOwner;
use fleet::pump::{HostLayout, HostPump};
use fleet::shell::HostShell;
use fleet::sink::SeatSink;
use fleet::waker::PostureWaker;
use std::sync::Arc;

/// A started host: its pump thread runs; seat threads are added with
/// [`Host::spawn_seat`]; [`Host::into_fleet`] hands it all to the caller.
pub(crate) struct Host {
    posture: Arc<PostureOwner>,
    handle: FleetHandle,
    waker: Arc<PostureWaker>,
    lost: LostSeats,
    running: Running,
    /// What a seat thread settles its units through.
    pub(crate) lane: Lane,
}

/// Handed to a seat thread's body: it reports the thread started (and the
/// CPU it is pinned to) once the body is ready to take grants.
pub(crate) struct Started {
    pinned: Option<usize>,
    ready: crossbeam_channel::Sender<Option<usize>>,
}

impl Started {
    /// Reports this thread started. A body that never reports it reads as
    /// unpinned.
    pub(crate) fn report(self) {
        let _ = self.ready.send(self.pinned);
    }
}

/// A started seat thread: what its [`Started::report`] sends.
pub(crate) type StartedRx = crossbeam_channel::Receiver<Option<usize>>;

impl Host {
    /// Starts the pump over `layout` on its own thread, with `sink` taking
    /// every grant, `binding` naming the handle's binding, and `io` the
    /// ambient runtime shutdown stops (pinned only).
    ///
    /// Errors: [`BootError::Spawn`] when the pump thread cannot start.
    pub(crate) fn start(
        layout: HostLayout,
        opts: &BootOptions,
        binding: Binding,
        sink: impl SeatSink<Job> + 'static,
        io: Option<tokio::runtime::Runtime>,
    ) -> Result<Host, BootError> {
        let posture = opts.posture.clone();
        let guard_posture = posture.clone();
        let (shell, host) = HostShell::new(
            HostPump::new(layout, opts.pump),
            move || guard_posture.guard(),
            sink,
            |_meta, job: Job, reason| job.receipt.terminal(reason),
        );
        let lost = LostSeats::default();
        let shell = shell
            .with_drain_deadline(opts.shutdown_deadline)
            .with_step_hook(step_hook(posture.clone(), lost.clone()));
        let handle = FleetHandle::new(host.clone(), binding);
        let waker = Arc::new(PostureWaker::new());
        waker.register_host(&host);
        // Boot returns with the pump thread running (named, as the census
        // says), not merely spawned: a thread that has not run yet still
        // carries its parent's name in /proc.
        let (up, pump_up) = crossbeam_channel::bounded::<()>(1);
        let pump = spawn_named(PUMP_THREAD_NAME, move || {
            let _ = up.send(());
            shell.run().map(|p| (p.counts(), p.in_flight()))
        })?;
        let _ = pump_up.recv();
        let running = Running {
            pump,
            deadline: opts.shutdown_deadline,
            lost: lost.clone(),
            seats: Vec::new(),
            io,
            guard: None,
        };
        let lane = Lane {
            fleet: handle.clone(),
            posture: posture.clone(),
            waker: waker.clone(),
        };
        Ok(Host {
            posture,
            handle,
            waker,
            lost,
            running,
            lane,
        })
    }

    /// Spawns the thread `name`, pinned to `cpu` first where pinning applies
    /// (see [`PinPlan::cpu_for`]), running `body`; the receiver hears when
    /// the body reports it started ([`wait_started`]).
    ///
    /// Errors: [`BootError::Spawn`]; the caller then stops the host with
    /// [`Host::fail`].
    pub(crate) fn spawn_seat(
        &mut self,
        name: &str,
        cpu: Option<usize>,
        body: impl FnOnce(Started) + Send + 'static,
    ) -> Result<StartedRx, BootError> {
        let (ready, started) = crossbeam_channel::bounded::<Option<usize>>(1);
        let t = spawn_named(name, move || {
            let pinned = cpu.filter(|c| crate::affinity::pin_current_thread(*c));
            body(Started { pinned, ready });
        })?;
        self.running.seats.push((name.to_string(), t));
        Ok(started)
    }

    /// Installs the serial tier's lending guard, stopped first on shutdown.
    pub(crate) fn set_guard(&mut self, guard: crate::lend::Guard) {
        self.running.guard = Some(guard);
    }

    /// A failed boot: stops everything started so far (every thread closed
    /// and joined) and returns `error`.
    pub(crate) fn fail(self, error: BootError) -> BootError {
        let _ = self.running.stop(&self.handle);
        error
    }

    /// The running fleet: this host under `plan`, with its census rows,
    /// pinning outcome and the lent reserve's figures (serial only).
    pub(crate) fn into_fleet(
        self,
        plan: &Plan,
        pins: PinPlan,
        census: Vec<CensusRow>,
        lent: Option<Arc<crate::lend::LendStats>>,
    ) -> Fleet {
        Fleet {
            census,
            plan: plan.clone(),
            posture: self.posture,
            waker: self.waker,
            handle: self.handle,
            pins,
            lost: self.lost,
            running: Some(self.running),
            lent,
        }
    }
}

/// Waits until every started seat thread reported, and returns the CPU
/// each is pinned to, in spawn order.
pub(crate) fn wait_started(started: &[StartedRx]) -> Vec<Option<usize>> {
    started.iter().map(|rx| rx.recv().ok().flatten()).collect()
}
