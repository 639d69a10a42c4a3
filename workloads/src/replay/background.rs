//! The replay's background work beside the cycles: one pool-state update
//! per cycle (deferrable) and the registration crawl's bounded window of
//! [`CRAWL_WINDOW`] units. Neither ever blocks a cycle or drops a unit: a
//! full window stops submitting until the host resolves its oldest, a
//! refused submit is counted and tried again next cycle, and resolved
//! receipts are counted as they come, so a long run keeps only the ones
//! still pending. When the cycles end, what is still pending is settled
//! under one deadline.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use fleet::receipt::{Receipt, TerminalReason};
use fleet::WorkerRole;
use futures::FutureExt;

use super::host::CycleHost;
use super::record::{BackgroundRecord, OverrunRecord};
use super::CRAWL_WINDOW;
use crate::corpus::PathCase;
use crate::pools::CurrentPools;

/// The pending background receipts and their counts.
#[derive(Default)]
pub(super) struct Background {
    pub(super) record: BackgroundRecord,
    poolupd: VecDeque<Receipt>,
    crawl: VecDeque<Receipt>,
}

impl Background {
    /// Counts the resolved receipts at the front of each window (never
    /// waits): pool updates always, the crawl when it runs.
    pub(super) fn collect(&mut self, crawl_runs: bool) {
        let r = &mut self.record;
        while let Some(front) = self.poolupd.front_mut() {
            match front.now_or_never() {
                Some(Ok(_)) => r.poolupd_completed += 1,
                Some(Err(_)) => r.terminal += 1,
                None => break,
            }
            self.poolupd.pop_front();
        }
        if !crawl_runs {
            return;
        }
        while let Some(front) = self.crawl.front_mut() {
            match front.now_or_never() {
                Some(Ok(_)) => r.crawl_completed += 1,
                Some(Err(_)) => r.terminal += 1,
                None => break,
            }
            self.crawl.pop_front();
        }
    }

    /// Submits up to `units` crawl units of `cpu_us` while the window has
    /// room; a refusal is counted and ends this cycle's submissions.
    pub(super) fn submit_crawl(
        &mut self,
        host: &dyn CycleHost,
        units: u32,
        cpu_us: u64,
        pools: &CurrentPools,
        probe: &PathCase,
    ) {
        for _ in 0..units {
            if self.crawl.len() >= CRAWL_WINDOW {
                break;
            }
            match host.background(WorkerRole::Registrar, cpu_us, pools.clone(), probe.clone()) {
                Ok(r) => {
                    self.record.crawl_submitted += 1;
                    self.crawl.push_back(r)
                }
                Err(reason) => {
                    note_refusal(
                        &mut self.record.crawl_refused,
                        WorkerRole::Registrar,
                        &reason,
                    );
                    break;
                }
            }
        }
    }

    /// Submits the cycle's pool-state update of `cpu_us`; a refusal is counted.
    pub(super) fn submit_poolupd(
        &mut self,
        host: &dyn CycleHost,
        cpu_us: u64,
        pools: &CurrentPools,
        probe: &PathCase,
    ) {
        match host.background(
            WorkerRole::PoolStateUpdater,
            cpu_us,
            pools.clone(),
            probe.clone(),
        ) {
            Ok(r) => {
                self.record.poolupd_submitted += 1;
                self.poolupd.push_back(r);
            }
            Err(reason) => note_refusal(
                &mut self.record.poolupd_refused,
                WorkerRole::PoolStateUpdater,
                &reason,
            ),
        }
    }

    /// Waits for every pending receipt under one `deadline` for them all (a
    /// hung unit costs it once, not once per receipt); an overrun is
    /// counted in `overruns`.
    pub(super) fn settle(
        mut self,
        deadline: Duration,
        overruns: &mut OverrunRecord,
    ) -> BackgroundRecord {
        let until = Instant::now().checked_add(deadline);
        let left = || until.map_or(deadline, |u| u.saturating_duration_since(Instant::now()));
        for r in std::mem::take(&mut self.poolupd) {
            let answer = r.wait_deadline(left(), Some(WorkerRole::PoolStateUpdater));
            if completed(answer, &mut self.record, overruns) {
                self.record.poolupd_completed += 1;
            }
        }
        for r in std::mem::take(&mut self.crawl) {
            let answer = r.wait_deadline(left(), Some(WorkerRole::Registrar));
            if completed(answer, &mut self.record, overruns) {
                self.record.crawl_completed += 1;
            }
        }
        self.record
    }
}

/// Counts one refused background submit; the first of each kind is logged
/// with the host's reason.
fn note_refusal(count: &mut u64, role: WorkerRole, reason: &str) {
    if *count == 0 {
        tracing::warn!(%role, reason, "background submit refused (counted in the report's background figures)");
    }
    *count += 1;
}

/// Whether a background answer completed; an overrun (also counted as
/// terminal: it never reported) or another terminal answer is counted here.
fn completed(
    answer: fleet::receipt::ReceiptResult,
    background: &mut BackgroundRecord,
    overruns: &mut OverrunRecord,
) -> bool {
    match answer {
        Ok(_) => return true,
        Err(TerminalReason::Overrun { .. }) => overruns.background += 1,
        Err(_) => {}
    }
    background.terminal += 1;
    false
}
