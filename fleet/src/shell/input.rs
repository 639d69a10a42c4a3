//! What a message from the shell's inbox asks of the pump: the table from
//! [`ShellMsg`] (or a timeout, or a closed inbox) to the [`PumpInput`] the
//! shell thread steps the pump with.

use super::{InboxRecv, PendingEnqueue, ShellMsg};
use crate::pump::PumpInput;

/// The pump input a received message makes, with the enqueue to answer
/// (`None`: a wake-up, or an enqueue whose payload is gone, steps
/// nothing). A disconnected inbox closes the pump; a timeout ticks the
/// backstop.
pub(super) fn pump_input<P>(
    received: InboxRecv<ShellMsg<P>>,
) -> Option<(PumpInput<P>, Option<PendingEnqueue<P>>)> {
    match received {
        InboxRecv::Msg(ShellMsg::Wake) => None,
        InboxRecv::Msg(ShellMsg::Enqueue(mut p)) => match p.payload.take() {
            Some(payload) => Some((
                PumpInput::Enqueue {
                    meta: p.meta,
                    payload,
                },
                Some(p),
            )),
            None => None,
        },
        InboxRecv::Msg(ShellMsg::SeatDone { seat, unit }) => {
            Some((PumpInput::SeatDone { seat, unit }, None))
        }
        InboxRecv::Msg(ShellMsg::SeatLost { seat }) => Some((PumpInput::SeatLost { seat }, None)),
        InboxRecv::Msg(ShellMsg::PostureEdge { seq }) => {
            Some((PumpInput::PostureEdge { seq }, None))
        }
        InboxRecv::Msg(ShellMsg::Rebudget { bounds }) => {
            Some((PumpInput::Rebudget { bounds }, None))
        }
        InboxRecv::Msg(ShellMsg::EpochBoundary { epoch }) => {
            Some((PumpInput::EpochBoundary { epoch }, None))
        }
        InboxRecv::Msg(ShellMsg::Close) | InboxRecv::Disconnected => Some((PumpInput::Close, None)),
        InboxRecv::Timeout => Some((PumpInput::BackstopTick, None)),
    }
}
