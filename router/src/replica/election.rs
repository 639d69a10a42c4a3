//! The campaign loop: every third of the lead's TTL a replica campaigns
//! ([`PgStore::campaign`]), and [`decide`] says
//! what that means. Taking a lead opens the router from the store, fenced
//! by the lead, and starts its ticker; losing it (another replica leads,
//! or the local deadline passed without a renewal) closes the shell's
//! long polls and drops it, so every write it still had under way fails
//! on its fence. A replica that rejoins after a cut needs no restart: its
//! next campaign says who leads.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;

use super::decide::{decide, Now, Step};
use super::{holder_name, Opener, Replica, Role};
use crate::core::ReplicaLabel;
use crate::http::{app, Shell};
use crate::store::{Fence, Leadership, PgStore};

/// The leader's background work for one term: its ticker.
struct Term {
    ticker: JoinHandle<()>,
}

impl Drop for Term {
    fn drop(&mut self) {
        self.ticker.abort();
    }
}

impl Replica {
    fn now(&self) -> Now {
        match &*self.role.read() {
            Role::Unknown(_) => Now::Unknown,
            Role::Following { term, .. } => Now::Following(*term),
            Role::Leading { term, until, .. } => Now::Leading(*term, *until),
        }
    }

    /// Sets the role; a shell it replaces stops its long polls.
    fn set_role(&self, role: Role) {
        let old = std::mem::replace(&mut *self.role.write(), role);
        if let Role::Leading { shell, term, .. } = old {
            tracing::warn!(term, "no longer leading: closing the router's shell");
            shell.begin_close();
        }
    }

    /// Runs campaigns until `stop` turns true. `store` is an unfenced
    /// handle on the shared store (it only campaigns); `open` opens the
    /// router for a lead won.
    pub async fn campaign_loop(
        self: Arc<Self>,
        store: Arc<PgStore>,
        open: Opener,
        mut stop: tokio::sync::watch::Receiver<bool>,
    ) {
        let mut term: Option<Term> = None;
        let period = self.cfg.ttl / 3;
        loop {
            let sent = Instant::now();
            let outcome = self.campaign_once(&store).await;
            let step = decide(
                self.now(),
                outcome.as_ref(),
                &self.holder,
                sent,
                Instant::now(),
            );
            match step {
                Step::Keep => {}
                Step::Renew(until) => {
                    if let Role::Leading { until: u, .. } = &mut *self.role.write() {
                        *u = until;
                    }
                }
                Step::Take(lead, until) => {
                    drop(term.take());
                    self.set_role(Role::Unknown("opening the router for a new lead".into()));
                    term = self.take(lead, until, &open, &store).await;
                }
                Step::Follow(lead) => {
                    term = None;
                    tracing::info!(term = lead.term, leader = %lead.holder, "following");
                    self.set_role(Role::Following {
                        term: lead.term,
                        leader: holder_name(&lead.holder).to_string(),
                        url: lead.url,
                    });
                }
                Step::Unknown => {
                    term = None;
                    self.set_role(Role::Unknown(
                        "the lead lapsed, or this replica cannot reach the store".into(),
                    ));
                }
            }
            tokio::select! {
                _ = tokio::time::sleep(period) => {}
                _ = stop.changed() => break,
            }
        }
        drop(term);
    }

    async fn campaign_once(&self, store: &Arc<PgStore>) -> Option<Leadership> {
        let (st, holder, url, ttl) = (
            store.clone(),
            self.holder.clone(),
            self.cfg.url.clone(),
            self.cfg.ttl,
        );
        match tokio::task::spawn_blocking(move || st.campaign(&holder, &url, ttl)).await {
            Ok(Ok(l)) => Some(l),
            Ok(Err(e)) => {
                tracing::warn!("campaign failed: {e}");
                None
            }
            Err(e) => {
                tracing::warn!("campaign task failed: {e}");
                None
            }
        }
    }

    /// Opens the router for `lead` and serves it until `until`; on
    /// failure resigns the lead, so another replica can take it.
    async fn take(
        &self,
        lead: Leadership,
        until: Instant,
        open: &Opener,
        store: &Arc<PgStore>,
    ) -> Option<Term> {
        let fence = lead.fence();
        let started = Instant::now();
        let opener = open.clone();
        let f = fence.clone();
        let opened = tokio::task::spawn_blocking(move || opener(f))
            .await
            .map_err(|e| e.to_string())
            .and_then(|r| r);
        match opened {
            Ok(shell) => {
                shell.set_replica(ReplicaLabel {
                    name: self.cfg.name.clone(),
                    term: lead.term,
                });
                tracing::info!(
                    term = lead.term,
                    open_ms = started.elapsed().as_millis() as u64,
                    "leading: the router is open"
                );
                let ticker = tokio::spawn(tick_every(shell.clone(), self.cfg.tick));
                self.set_role(Role::Leading {
                    term: lead.term,
                    app: app(shell.clone()),
                    shell,
                    until,
                });
                Some(Term { ticker })
            }
            Err(e) => {
                tracing::error!(term = lead.term, "could not open the router: {e}");
                self.resign(store, &fence).await;
                self.set_role(Role::Unknown(format!("opening the router failed: {e}")));
                None
            }
        }
    }

    async fn resign(&self, store: &Arc<PgStore>, fence: &Fence) {
        let (st, f) = (store.clone(), fence.clone());
        if let Ok(Err(e)) = tokio::task::spawn_blocking(move || st.resign(&f)).await {
            tracing::warn!("could not resign the lead: {e}");
        }
    }

    /// Starts a stop: a leader's held long polls answer now.
    pub fn close_long_polls(&self) {
        if let Role::Leading { shell, .. } = &*self.role.read() {
            shell.begin_close();
        }
    }

    /// A clean stop: when leading, writes the final snapshot (under the
    /// fence) and resigns, so another replica takes over at its next
    /// campaign instead of after the TTL.
    pub async fn finish(&self, store: &Arc<PgStore>) {
        let old = std::mem::replace(&mut *self.role.write(), Role::Unknown("stopping".into()));
        if let Role::Leading { shell, term, .. } = old {
            shell.begin_close();
            let s = shell.clone();
            let _ = tokio::task::spawn_blocking(move || s.final_tick()).await;
            let fence = Fence {
                term,
                holder: self.holder.clone(),
            };
            self.resign(store, &fence).await;
            tracing::info!(term, "resigned the lead");
        }
    }
}

/// The leader's ticker: one tick every `period` on the blocking pool.
async fn tick_every(shell: Arc<Shell>, period: Duration) {
    let mut every = tokio::time::interval(period);
    loop {
        every.tick().await;
        let s = shell.clone();
        let _ = tokio::task::spawn_blocking(move || s.tick()).await;
    }
}
