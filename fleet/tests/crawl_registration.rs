//! The registration-crawl scenario (seed 003 "Context"): a driver with a
//! bounded submission window of 32 feeds a deferrable role; the posture
//! cordons, the backlog fills, the window fills, the driver stops
//! submitting; the posture lifts with no message to the host. With the
//! backstop the backlog drains and the crawl completes with every receipt;
//! without it (the test-only switch) the crawl hangs, seen by a bounded wait.

use fleet::admission::AdmissionError;
use fleet::guard::GuardSnapshot;
use fleet::pump::{HostLayout, HostPump, Placement, PumpConfig};
use fleet::receipt::{receipt_pair, Receipt, ReceiptSender, TerminalReason};
use fleet::shell::HostShell;
use fleet::sink::PooledQueue;
use fleet::unit::UnitMeta;
use fleet::WorkerRole::Registrar;
use parking_lot::Mutex;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const WINDOW: usize = 32;
const UNITS: u64 = 400;
const INTERVAL_MS: u64 = 40;

struct Job {
    tx: ReceiptSender,
}

struct Outcome {
    /// Receipts resolved with a value.
    completed: u64,
    /// Receipts resolved terminally.
    terminal: u64,
    /// Whether the crawl finished within the bounded wait.
    finished: bool,
    /// Time from the lift to the first completed receipt.
    lift_to_first: Option<Duration>,
}

/// The crawl's driver: submits `UNITS` units through a window of `WINDOW`
/// receipts (settling the oldest when the window or the queue is full),
/// flags `full` when the window first fills, counts completions in `done`
/// and stamps the first in `first`; returns the receipts resolved
/// terminally (the host closed).
fn drive_crawl(
    h: &fleet::shell::HostHandle<Job>,
    full: &AtomicBool,
    done: &AtomicU64,
    first: &Mutex<Option<Instant>>,
) -> u64 {
    let mut window: VecDeque<Receipt> = VecDeque::new();
    let mut terminal = 0u64;
    let settle = |r: Receipt, terminal: &mut u64| match r.wait() {
        Ok(_) => {
            first.lock().get_or_insert_with(Instant::now);
            done.fetch_add(1, Ordering::SeqCst);
        }
        Err(TerminalReason::HostClosed) => *terminal += 1,
        Err(other) => panic!("unexpected terminal receipt: {other}"),
    };
    'crawl: for id in 0..UNITS {
        if window.len() == WINDOW {
            full.store(true, Ordering::SeqCst);
            let oldest = window.pop_front().unwrap();
            settle(oldest, &mut terminal);
        }
        let (tx, rx) = receipt_pair();
        let mut job = Job { tx };
        loop {
            match h.enqueue(UnitMeta::pooled(id, Registrar), job) {
                Ok(Placement::Queued | Placement::Backlogged) => {
                    window.push_back(rx);
                    break;
                }
                // A full queue hands the unit back: free capacity, then resubmit it.
                Err(refused) if matches!(refused.error, AdmissionError::QueueFull { .. }) => {
                    job = refused.payload;
                    match window.pop_front() {
                        Some(oldest) => settle(oldest, &mut terminal),
                        None => std::thread::sleep(Duration::from_millis(1)),
                    }
                }
                Err(refused) => {
                    // Closed during the negative check: the unit came back whole.
                    assert_eq!(
                        (refused.meta.id, refused.error),
                        (id, AdmissionError::HostClosed)
                    );
                    break 'crawl;
                }
            }
        }
    }
    for r in window {
        settle(r, &mut terminal);
    }
    terminal
}

/// Whether `driver` finished within `bound` (polled every 5 ms).
fn finished_within(driver: &std::thread::JoinHandle<u64>, bound: Duration) -> bool {
    let deadline = Instant::now() + bound;
    loop {
        if driver.is_finished() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn run_crawl(backstop_enabled: bool, bound: Duration) -> Outcome {
    let guard = Arc::new(Mutex::new(GuardSnapshot::nominal(4)));
    let layout = HostLayout {
        host: "registrar".into(),
        seats: vec![(Registrar, 2)],
        queue_capacity: 8,
        walk_admission: 1,
        sim_slot_cap: 4,
    };
    let config = PumpConfig {
        backstop_interval_ms: INTERVAL_MS,
        stall_ticks: 1_000,
        backstop_enabled,
        ..PumpConfig::default()
    };
    let sink = PooledQueue::<Job>::new(&[Registrar]);
    let seat_rx = sink.receiver(Registrar).unwrap();
    let g = guard.clone();
    let (shell, handle) = HostShell::new(
        HostPump::new(layout, config),
        move || *g.lock(),
        sink,
        |_meta, job: Job, reason| job.tx.terminal(reason),
    );
    let shell = shell.with_loud_hook(|f| panic!("unexpected loud failure: {f}"));
    let host = std::thread::spawn(move || shell.run().map(|_| ()).map_err(|f| f.to_string()));
    let seats: Vec<_> = (0..2)
        .map(|_| {
            let (rx, h) = (seat_rx.clone(), handle.clone());
            std::thread::spawn(move || {
                for d in rx.iter() {
                    d.payload.tx.complete(Box::new(d.meta.id));
                    h.seat_done(d.seat, d.meta.id);
                }
            })
        })
        .collect();

    // The posture cordons before the crawl starts.
    guard.lock().cordoned = true;
    let window_full = Arc::new(AtomicBool::new(false));
    let completed = Arc::new(AtomicU64::new(0));
    let first_done = Arc::new(Mutex::new(None::<Instant>));
    let driver = {
        let (h, full, done, first) = (
            handle.clone(),
            window_full.clone(),
            completed.clone(),
            first_done.clone(),
        );
        std::thread::spawn(move || drive_crawl(&h, &full, &done, &first))
    };

    // The window fills under the cordon and the driver stops submitting.
    let deadline = Instant::now() + Duration::from_secs(30);
    while !window_full.load(Ordering::SeqCst) {
        assert!(
            Instant::now() < deadline,
            "the driver never filled its window"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    std::thread::sleep(Duration::from_millis(3 * INTERVAL_MS));
    assert_eq!(
        completed.load(Ordering::SeqCst),
        0,
        "nothing runs while the posture holds the role"
    );

    // The posture lifts: a guard write only, no message to the host.
    let lifted = Instant::now();
    guard.lock().cordoned = false;
    let finished = finished_within(&driver, bound);
    let lift_to_first = first_done
        .lock()
        .map(|t| t.saturating_duration_since(lifted));
    // Clean up either way: close resolves every held unit terminally.
    handle.close();
    let terminal = driver.join().expect("driver");
    host.join().expect("host thread").expect("no loud failure");
    drop(handle);
    for s in seats {
        s.join().unwrap();
    }
    Outcome {
        completed: completed.load(Ordering::SeqCst),
        terminal,
        finished,
        lift_to_first,
    }
}

#[test]
fn the_crawl_completes_after_the_cordon_lifts_with_no_message_to_the_host() {
    let out = run_crawl(true, Duration::from_secs(20));
    println!(
        "crawl: {} receipts completed, {} terminal; lift → first completion {:?} (backstop interval {INTERVAL_MS} ms)",
        out.completed, out.terminal, out.lift_to_first
    );
    assert!(out.finished, "the crawl hung after the posture lifted");
    assert_eq!(
        out.completed, UNITS,
        "every unit's receipt resolved with its value"
    );
    assert_eq!(out.terminal, 0);
}

#[test]
fn without_the_backstop_the_same_crawl_hangs() {
    let out = run_crawl(false, Duration::from_millis(20 * INTERVAL_MS));
    println!(
        "no backstop: finished {}, completed {}, terminal after close {}",
        out.finished, out.completed, out.terminal
    );
    assert!(
        !out.finished,
        "without the backstop nothing wakes the host: the crawl must hang"
    );
    assert_eq!(
        out.completed, 0,
        "no receipt resolves while the host sleeps"
    );
    assert_eq!(
        out.terminal, WINDOW as u64,
        "close resolves the held window terminally (nothing lost)"
    );
}
