//! The stop signals, installed before routerd says it is listening.
//!
//! The line `routerd listening on …` promises that a SIGINT or SIGTERM sent
//! after it stops routerd gracefully (drain, final snapshot). The listeners
//! are therefore installed before that line is printed, not when the
//! server's shutdown future is first polled: a signal in between used to
//! kill routerd without its final snapshot (default disposition) or be lost
//! altogether, leaving routerd running (a SIGINT ignored on entry, as in a
//! shell's background job, which tokio's handler overrides only once it is
//! installed).

use anyhow::{Context, Result};

/// SIGINT and SIGTERM listeners, installed by [`StopSignal::install`]; a
/// signal delivered after that is kept until [`StopSignal::recv`].
pub(crate) struct StopSignal {
    #[cfg(unix)]
    interrupt: tokio::signal::unix::Signal,
    #[cfg(unix)]
    terminate: tokio::signal::unix::Signal,
}

impl StopSignal {
    /// Installs the listeners. Must run inside the Tokio runtime.
    ///
    /// Errors: the kernel refuses a handler (then routerd does not start:
    /// it could not promise a graceful stop).
    pub(crate) fn install() -> Result<StopSignal> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            Ok(StopSignal {
                interrupt: signal(SignalKind::interrupt())
                    .context("installing the SIGINT handler")?,
                terminate: signal(SignalKind::terminate())
                    .context("installing the SIGTERM handler")?,
            })
        }
        #[cfg(not(unix))]
        Ok(StopSignal {})
    }

    /// Resolves on the first SIGINT or SIGTERM since [`StopSignal::install`].
    pub(crate) async fn recv(mut self) {
        #[cfg(unix)]
        tokio::select! {
            _ = self.interrupt.recv() => {}
            _ = self.terminate.recv() => {}
        }
        #[cfg(not(unix))]
        let _ = tokio::signal::ctrl_c().await;
    }
}
