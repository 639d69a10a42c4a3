//! Host contention for a run: N busy threads in a separate process.
//!
//! `--contend N` asks how a contender copes when another tenant of the host
//! keeps N CPUs busy (a noisy neighbour, not the process's own work: that is
//! [`super::cotenant`]). The lab starts `fleet-lab spin --threads N` as a
//! child process before the run and stops it after, the same for every
//! contender. The child spins until its stdin closes, so it also ends when
//! the lab dies.

use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// The largest `--contend` the lab accepts.
pub const MAX_CONTEND_THREADS: u32 = 256;

/// The scheduling class of the contention process's busy threads
/// (`--contend-class`): how much a neighbour's busy loop outweighs the
/// fleet's lent cycle threads, which run at the idle class (decision 0009).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Default,
    clap::ValueEnum,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum ContendClass {
    /// `SCHED_OTHER` at nice 0: a neighbour as important as the lab.
    #[default]
    Normal,
    /// `SCHED_OTHER` at nice 19: a background batch job (a compile, a log
    /// shipper); its weight, 15, is still five times the idle class's 3.
    Nice19,
    /// `SCHED_IDLE`: a neighbour that takes only what nothing else wants.
    Idle,
}

impl ContendClass {
    /// The name on the command line and in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            ContendClass::Normal => "normal",
            ContendClass::Nice19 => "nice19",
            ContendClass::Idle => "idle",
        }
    }

    /// Puts the calling thread (and the threads it starts after) in this
    /// class. Errors: the kernel refused.
    pub fn apply(self) -> std::io::Result<()> {
        // SAFETY: plain system calls on the calling thread with valid
        // arguments.
        let ok = match self {
            ContendClass::Normal => true,
            ContendClass::Nice19 => unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, 19) == 0 },
            ContendClass::Idle => {
                let param = libc::sched_param { sched_priority: 0 };
                unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) == 0 }
            }
        };
        if ok {
            Ok(())
        } else {
            Err(std::io::Error::last_os_error())
        }
    }
}

/// A running contention process; stopped (killed and reaped) on drop.
pub struct Contention {
    child: Option<Child>,
}

impl Contention {
    /// Starts `exe spin --threads n --class class` (`exe`: a `fleet-lab`
    /// binary). Errors: the OS could not start it.
    pub fn start(exe: &Path, n: u32, class: ContendClass) -> std::io::Result<Self> {
        let child = Command::new(exe)
            .args([
                "spin",
                "--threads",
                &n.to_string(),
                "--class",
                class.as_str(),
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()?;
        Ok(Contention { child: Some(child) })
    }

    /// Starts `exe spin --threads n --wake-us us`: `n` threads that each
    /// sleep `us` µs and wake, until the contention is stopped (the
    /// "awake" host state of `compare --host-awake`). Errors: the OS could
    /// not start it.
    pub fn start_waker(exe: &Path, n: u32, us: u64) -> std::io::Result<Self> {
        let child = Command::new(exe)
            .args([
                "spin",
                "--threads",
                &n.to_string(),
                "--wake-us",
                &us.to_string(),
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()?;
        Ok(Contention { child: Some(child) })
    }

    /// The child's process id.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Stops the child now.
    pub fn stop(mut self) {
        self.kill();
    }

    fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            drop(c.stdin.take());
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Contention {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Keeps `n` threads busy on real arithmetic until stdin reaches its end
/// (the parent closed it or died), then returns. Errors: a thread could not
/// be started.
pub fn spin(n: u32) -> std::io::Result<()> {
    until_stdin_ends(n, |stop| {
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        while !stop.load(Ordering::Relaxed) {
            for _ in 0..10_000 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
            }
            std::hint::black_box(x);
        }
    })
}

/// Keeps `n` threads waking every `period` (a sleep, then nothing) until
/// stdin reaches its end: a low-duty load that keeps the CPUs out of their
/// deep idle states (with `haltpoll`, its poll window stays grown). Errors:
/// a thread could not be started.
pub fn wake(n: u32, period: std::time::Duration) -> std::io::Result<()> {
    until_stdin_ends(n, move |stop| {
        while !stop.load(Ordering::Relaxed) {
            std::thread::sleep(period);
        }
    })
}

/// Runs `body` on `n` threads until stdin reaches its end, then sets their
/// stop flag and joins them.
fn until_stdin_ends(
    n: u32,
    body: impl Fn(&AtomicBool) + Send + Sync + Clone + 'static,
) -> std::io::Result<()> {
    let stop = Arc::new(AtomicBool::new(false));
    let mut threads = Vec::new();
    for i in 0..n {
        let stop = stop.clone();
        let body = body.clone();
        threads.push(
            std::thread::Builder::new()
                .name(format!("spin-{i}"))
                .spawn(move || body(&stop))?,
        );
    }
    let mut sink = [0u8; 64];
    let mut stdin = std::io::stdin();
    while matches!(stdin.read(&mut sink), Ok(k) if k > 0) {}
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        let _ = t.join();
    }
    Ok(())
}
