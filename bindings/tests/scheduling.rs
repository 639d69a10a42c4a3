//! Scheduling behaviour of the bindings: a waiting unit never idles the
//! serial thread, grant order is start order, refusals hand the body back.

use crate::common::*;
use fleet::admission::AdmissionError;
use fleet::plan::Profile;
use fleet::receipt::UnitValue;
use fleet::WorkerRole;
use fleet_bindings::{boot, unit_body, BootOptions, SubmitError};
use std::sync::{Arc, Mutex};

fn both() -> [(f64, Profile); 2] {
    [(8.0, Profile::Pinned), (4.0, Profile::Auto)]
}

#[test]
fn a_walk_waiting_on_another_unit_does_not_idle_the_host() {
    // Walk 0 waits for a signal only walk 1 (granted after it) can send. On
    // the serial binding both ride one thread: this completes only if the
    // waiting walk yields the thread.
    for (q, profile) in both() {
        let plan = plan(q, profile);
        let fleet = boot(&plan, BootOptions::for_plan(&plan)).expect("boot");
        let h = fleet.handle();
        let (tx, rx) = futures::channel::oneshot::channel::<u32>();
        let waiter =
            unit_body(move |_ctx| async move { Box::new(rx.await.unwrap() + 1) as UnitValue });
        let signaller = unit_body(move |_ctx| async move {
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
            tx.send(41).unwrap();
            Box::new(0u32) as UnitValue
        });
        let a = h.submit(WorkerRole::Solver, Some(0), waiter).unwrap();
        let b = h.submit(WorkerRole::Solver, Some(1), signaller).unwrap();
        assert_eq!(
            *wait(a).unwrap().downcast::<u32>().unwrap(),
            42,
            "{}",
            plan.binding
        );
        assert_eq!(*wait(b).unwrap().downcast::<u32>().unwrap(), 0);
        drop(h);
        fleet.shutdown().unwrap();
    }
}

#[test]
fn on_the_serial_binding_grant_order_is_start_order() {
    // Two cores: one cycle thread carries every seat.
    let plan = plan(2.0, Profile::Auto);
    let fleet = boot(&plan, BootOptions::for_plan(&plan)).expect("boot");
    let h = fleet.handle();
    let started = Arc::new(Mutex::new(Vec::new()));
    let receipts: Vec<_> = (0..24u32)
        .map(|i| {
            let started = started.clone();
            let body = unit_body(move |ctx| async move {
                assert_eq!(ctx.thread_name, "work-fleet-serial-0");
                started.lock().unwrap().push(i);
                tokio::time::sleep(std::time::Duration::from_micros(200)).await;
                Box::new(i) as UnitValue
            });
            h.submit(WorkerRole::SimDriver, None, body).unwrap()
        })
        .collect();
    for (i, r) in receipts.into_iter().enumerate() {
        assert_eq!(*wait(r).unwrap().downcast::<u32>().unwrap(), i as u32);
    }
    assert_eq!(*started.lock().unwrap(), (0..24).collect::<Vec<u32>>());
    drop(h);
    fleet.shutdown().unwrap();
}

/// With several cycle threads (Q = 4: three) each unit runs on the thread
/// its granted seat is dealt to, and on each thread grant order is start
/// order.
#[test]
fn on_several_cycle_threads_each_seat_runs_on_its_own_thread_in_grant_order() {
    let plan = plan(4.0, Profile::Auto);
    let layout = plan.seat_layout();
    assert_eq!(layout.cycle_threads, 3);
    let fleet = boot(&plan, BootOptions::for_plan(&plan)).expect("boot");
    let h = fleet.handle();
    let started = Arc::new(Mutex::new(Vec::new()));
    let receipts: Vec<_> = (0..24u32)
        .map(|i| {
            let (started, layout) = (started.clone(), layout.clone());
            let body = unit_body(move |ctx| async move {
                let t = layout
                    .cycle_thread_of(ctx.seat.role, ctx.seat.index)
                    .expect("a serial seat");
                assert_eq!(ctx.thread_name, format!("work-fleet-serial-{t}"));
                assert_eq!(
                    std::thread::current().name(),
                    Some(ctx.thread_name.as_str())
                );
                started.lock().unwrap().push((ctx.thread_name.clone(), i));
                tokio::time::sleep(std::time::Duration::from_micros(200)).await;
                Box::new(i) as UnitValue
            });
            h.submit(WorkerRole::SimDriver, None, body).unwrap()
        })
        .collect();
    for (i, r) in receipts.into_iter().enumerate() {
        assert_eq!(*wait(r).unwrap().downcast::<u32>().unwrap(), i as u32);
    }
    let started = started.lock().unwrap().clone();
    assert_eq!(started.len(), 24);
    for t in 0..3 {
        let name = format!("work-fleet-serial-{t}");
        let order: Vec<u32> = started
            .iter()
            .filter(|(n, _)| *n == name)
            .map(|(_, i)| *i)
            .collect();
        let mut sorted = order.clone();
        sorted.sort_unstable();
        assert_eq!(order, sorted, "{name}: start order is grant order");
    }
    drop(h);
    fleet.shutdown().unwrap();
}

#[test]
fn a_refused_unit_hands_its_body_back() {
    for (q, profile) in both() {
        let plan = plan(q, profile);
        let mut opts = BootOptions::for_plan(&plan);
        opts.queue_capacity = 1;
        let fleet = boot(&plan, opts).expect("boot");
        let h = fleet.handle();
        let (tx, rx) = futures::channel::oneshot::channel::<()>();
        let blocker = unit_body(move |_ctx| async move {
            rx.await.unwrap();
            Box::new(0u32) as UnitValue
        });
        let first = h.submit(WorkerRole::Resolve, None, blocker).unwrap();
        let mut receipts = vec![first];
        // The one resolve seat is busy; the queue holds one; the next is refused.
        let mut refused = None;
        for i in 1..=3u32 {
            let body = unit_body(move |_ctx| async move { Box::new(i) as UnitValue });
            match h.submit(WorkerRole::Resolve, None, body) {
                Ok(r) => receipts.push(r),
                Err(e) => {
                    refused = Some(e);
                    break;
                }
            }
        }
        let err = refused.expect("a full queue refuses");
        assert!(
            matches!(
                err,
                SubmitError::Refused {
                    error: AdmissionError::QueueFull {
                        role: WorkerRole::Resolve,
                        capacity: 1
                    },
                    ..
                }
            ),
            "{err:?}"
        );
        tx.send(()).unwrap();
        for r in receipts {
            wait(r).unwrap();
        }
        // The handed-back body still runs when resubmitted.
        let again = h
            .submit(WorkerRole::Resolve, None, err.into_body())
            .unwrap();
        assert!(wait(again).unwrap().downcast::<u32>().is_ok());
        fleet.shutdown().unwrap();
        let late = unit_body(|_ctx| async { Box::new(()) as UnitValue });
        match h.submit(WorkerRole::Resolve, None, late) {
            Err(SubmitError::Closed {
                role: WorkerRole::Resolve,
                ..
            }) => {}
            other => panic!("after shutdown: {other:?}"),
        }
    }
}
