//! The receipt one-shot under shuttle: the real `Receipt`/`ReceiptSender`
//! code, its mutex and condvar swapped for shuttle's (`fleet/src/sync.rs`),
//! explored for lost wake-ups between `resolve`, the blocking waits
//! (`wait`, `wait_timeout`, `wait_deadline`) and `poll`. A lost wake-up shows
//! as a deadlock (every thread blocked), which shuttle reports; an answer
//! accounted twice or never shows in the drop counts. Time is abstract: a
//! timed wait may time out at any point.
//!
//! Needs the model build (a separate target dir keeps the normal cache):
//! `RUSTFLAGS="--cfg fleet_model" CARGO_TARGET_DIR=target/model cargo test -p fleet --test receipt_model`
//! In a normal build this file compiles to nothing.
#![cfg(fleet_model)]

use fleet::receipt::{receipt_pair, TerminalReason};
use shuttle::thread;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// An answer that counts its drops: each must be dropped exactly once,
/// by whoever ends up holding it.
struct Counted(Arc<AtomicU32>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

fn check(model: impl Fn() + Send + Sync + 'static) {
    let model = Arc::new(model);
    let m = model.clone();
    shuttle::check_random(move || m(), 2_000);
    shuttle::check_pct(move || model(), 2_000, 3);
}

#[test]
fn a_blocking_wait_sees_a_concurrent_answer_or_a_dropped_sender() {
    check(|| {
        let (tx, rx) = receipt_pair();
        let t = thread::spawn(move || tx.complete(Box::new(7u32)));
        assert_eq!(*rx.wait().unwrap().downcast::<u32>().unwrap(), 7);
        t.join().unwrap();

        let (tx, rx) = receipt_pair();
        let t = thread::spawn(move || drop(tx));
        assert_eq!(rx.wait().unwrap_err(), TerminalReason::SenderDropped);
        t.join().unwrap();
    });
}

#[test]
fn a_polled_receipt_is_woken_by_a_concurrent_answer() {
    check(|| {
        let (tx, rx) = receipt_pair();
        let t = thread::spawn(move || tx.terminal(TerminalReason::HostClosed));
        let got = shuttle::future::block_on(rx);
        assert_eq!(got.unwrap_err(), TerminalReason::HostClosed);
        t.join().unwrap();
    });
}

#[test]
fn timed_waits_then_a_blocking_wait_never_lose_the_answer() {
    check(|| {
        let drops = Arc::new(AtomicU32::new(0));
        let (tx, rx) = receipt_pair();
        let d = drops.clone();
        let t = thread::spawn(move || tx.complete(Box::new(Counted(d))));
        // Time out (abstractly) a few times, then wait for good.
        let mut got = None;
        for _ in 0..2 {
            got = rx.wait_timeout(Duration::from_millis(1));
            if got.is_some() {
                break;
            }
        }
        let got = got.unwrap_or_else(|| rx.wait_timeout(Duration::MAX).expect("resolves"));
        assert!(got.unwrap().downcast_ref::<Counted>().is_some());
        t.join().unwrap();
        assert_eq!(drops.load(Ordering::SeqCst), 1);
    });
}

#[test]
fn a_deadline_racing_the_answer_accounts_it_exactly_once() {
    check(|| {
        let drops = Arc::new(AtomicU32::new(0));
        let (tx, rx) = receipt_pair();
        let d = drops.clone();
        let t = thread::spawn(move || tx.complete(Box::new(Counted(d))));
        match rx.wait_deadline(Duration::from_millis(1), None) {
            Ok(v) => assert!(v.downcast_ref::<Counted>().is_some()),
            Err(TerminalReason::Overrun { deadline_ms: 1 }) => {}
            Err(other) => panic!("unexpected {other:?}"),
        }
        t.join().unwrap();
        // Returned and dropped here, or dropped by the late resolve: once.
        assert_eq!(drops.load(Ordering::SeqCst), 1);
    });
}
