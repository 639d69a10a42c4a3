//! The seat sink: how a granted unit reaches its seat.
//!
//! One seam, two shapes (seed 000 §13; `DESIGN.md` §4): [`PooledQueue`] —
//! one shared queue per pooled role, any seat thread of the role takes the
//! next grant — and [`KeyedMailboxes`] — one mailbox per seat, so a grant for
//! seat k lands only in k's mailbox (keyed Solver bins stay on their seat).
//! A delivery carries the granted [`SeatId`]: the thread that runs the unit
//! reports `SeatDone` for that seat, whichever thread took it.
//!
//! A delivery to a seat nobody serves (its receiver dropped, or a seat the
//! sink does not know) is logged at error and the payload is dropped; a
//! payload carrying a [`crate::receipt::ReceiptSender`] then resolves its
//! receipt with `SenderDropped`, so nothing waits forever.

use crate::pump::SeatId;
use crate::role::WorkerRole;
use crate::unit::UnitMeta;
use crossbeam_channel::{unbounded, Receiver, Sender};
use std::collections::HashMap;

/// Both ends of one delivery channel.
type Channel<P> = (Sender<Delivery<P>>, Receiver<Delivery<P>>);

/// A granted unit on its way to a seat.
#[derive(Debug)]
pub struct Delivery<P> {
    /// The seat the pump granted (report `SeatDone` for it).
    pub seat: SeatId,
    /// The unit.
    pub meta: UnitMeta,
    /// Its payload.
    pub payload: P,
}

/// Delivers grants to seats. Called on the host's shell thread, in grant order.
pub trait SeatSink<P>: Send {
    /// Hands `payload` to `seat`. Must not block for long (a channel send).
    fn deliver(&self, seat: SeatId, meta: UnitMeta, payload: P);
}

impl<P, F: Fn(SeatId, UnitMeta, P) + Send> SeatSink<P> for F {
    fn deliver(&self, seat: SeatId, meta: UnitMeta, payload: P) {
        self(seat, meta, payload)
    }
}

impl<P> SeatSink<P> for Box<dyn SeatSink<P>> {
    fn deliver(&self, seat: SeatId, meta: UnitMeta, payload: P) {
        (**self).deliver(seat, meta, payload)
    }
}

fn send_or_log<P>(tx: Option<&Sender<Delivery<P>>>, d: Delivery<P>) {
    let (seat, unit) = (d.seat, d.meta.id);
    match tx {
        Some(tx) => {
            if tx.send(d).is_err() {
                tracing::error!(role = %seat.role, seat = seat.index, unit, "seat receiver gone: unit dropped (its receipt resolves SenderDropped)");
            }
        }
        None => {
            tracing::error!(role = %seat.role, seat = seat.index, unit, "no such seat in this sink: unit dropped (its receipt resolves SenderDropped)");
        }
    }
}

/// One shared unbounded queue per pooled role.
#[derive(Debug)]
pub struct PooledQueue<P> {
    queues: HashMap<WorkerRole, Channel<P>>,
}

impl<P> PooledQueue<P> {
    /// A queue for each of `roles`.
    pub fn new(roles: &[WorkerRole]) -> Self {
        PooledQueue {
            queues: roles.iter().map(|r| (*r, unbounded())).collect(),
        }
    }

    /// The seat-side receiver for `role` (clone it into every seat thread of
    /// the role); `None` when the role has no queue here.
    pub fn receiver(&self, role: WorkerRole) -> Option<Receiver<Delivery<P>>> {
        self.queues.get(&role).map(|(_, rx)| rx.clone())
    }
}

impl<P: Send> SeatSink<P> for PooledQueue<P> {
    fn deliver(&self, seat: SeatId, meta: UnitMeta, payload: P) {
        send_or_log(
            self.queues.get(&seat.role).map(|(tx, _)| tx),
            Delivery {
                seat,
                meta,
                payload,
            },
        );
    }
}

/// One mailbox per seat.
#[derive(Debug)]
pub struct KeyedMailboxes<P> {
    boxes: HashMap<SeatId, Channel<P>>,
}

impl<P> KeyedMailboxes<P> {
    /// A mailbox for every seat of `seats` (role, seat count).
    pub fn new(seats: &[(WorkerRole, u32)]) -> Self {
        let boxes = seats
            .iter()
            .flat_map(|(role, n)| (0..*n).map(move |index| SeatId { role: *role, index }))
            .map(|id| (id, unbounded()))
            .collect();
        KeyedMailboxes { boxes }
    }

    /// The receiver of `seat`'s mailbox (give it to that seat's thread only).
    pub fn mailbox(&self, seat: SeatId) -> Option<Receiver<Delivery<P>>> {
        self.boxes.get(&seat).map(|(_, rx)| rx.clone())
    }
}

impl<P: Send> SeatSink<P> for KeyedMailboxes<P> {
    fn deliver(&self, seat: SeatId, meta: UnitMeta, payload: P) {
        send_or_log(
            self.boxes.get(&seat).map(|(tx, _)| tx),
            Delivery {
                seat,
                meta,
                payload,
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keyed_grants_land_only_in_their_seat_mailbox() {
        let sink = KeyedMailboxes::<u32>::new(&[(WorkerRole::Solver, 3)]);
        let seat = |index| SeatId {
            role: WorkerRole::Solver,
            index,
        };
        sink.deliver(seat(1), UnitMeta::keyed(9, WorkerRole::Solver, 4), 90);
        assert!(sink.mailbox(seat(0)).unwrap().try_recv().is_err());
        assert!(sink.mailbox(seat(2)).unwrap().try_recv().is_err());
        let d = sink.mailbox(seat(1)).unwrap().try_recv().unwrap();
        assert_eq!((d.seat, d.meta.id, d.payload), (seat(1), 9, 90));
        assert!(sink
            .mailbox(SeatId {
                role: WorkerRole::Merge,
                index: 0
            })
            .is_none());
    }

    #[test]
    fn pooled_grants_go_to_the_role_queue_with_their_seat() {
        let sink = PooledQueue::<u32>::new(&[WorkerRole::SimDriver, WorkerRole::Registrar]);
        let seat = SeatId {
            role: WorkerRole::SimDriver,
            index: 2,
        };
        sink.deliver(seat, UnitMeta::pooled(5, WorkerRole::SimDriver), 50);
        assert!(sink
            .receiver(WorkerRole::Registrar)
            .unwrap()
            .try_recv()
            .is_err());
        let d = sink
            .receiver(WorkerRole::SimDriver)
            .unwrap()
            .try_recv()
            .unwrap();
        assert_eq!((d.seat, d.payload), (seat, 50));
    }

    #[test]
    fn an_unserved_seat_drops_the_payload_so_its_receipt_resolves() {
        let sink = PooledQueue::new(&[]);
        let (tx, rx) = crate::receipt::receipt_pair();
        sink.deliver(
            SeatId {
                role: WorkerRole::Resolve,
                index: 0,
            },
            UnitMeta::pooled(1, WorkerRole::Resolve),
            tx,
        );
        assert_eq!(
            rx.wait().unwrap_err(),
            crate::receipt::TerminalReason::SenderDropped
        );
    }
}
