//! Software perf counters (context switches, CPU migrations, task clock) for
//! the whole run and per fleet seat thread, from `perf-event`.
//!
//! Hardware counters (instructions, cycles) are tried too; where the host
//! does not support them (`ENOENT`, as on many VMs) they are reported as
//! skipped with the OS's reason, never as a failure of the run.

use std::collections::BTreeMap;

pub use crate::report::CounterValue;
use perf_event::events::{Event, Hardware, Software};
use perf_event::{Builder, Counter};

/// Why a counter could not be opened, in words: hardware counters absent on
/// this host (ENOENT), perf events forbidden, or the OS's own message.
fn skip_reason(name: &str, e: &std::io::Error) -> String {
    match e.raw_os_error() {
        Some(libc::ENOENT) | Some(libc::EOPNOTSUPP) => {
            format!("not supported: this host exposes no {name} counter; errno {e}")
        }
        Some(libc::EACCES) | Some(libc::EPERM) => {
            format!(
                "not permitted: perf events are restricted here (kernel.perf_event_paranoid; {e})"
            )
        }
        _ => format!("not supported: {e}"),
    }
}

fn events() -> Vec<(&'static str, Event)> {
    vec![
        ("context_switches", Software::CONTEXT_SWITCHES.into()),
        ("cpu_migrations", Software::CPU_MIGRATIONS.into()),
        ("task_clock_ns", Software::TASK_CLOCK.into()),
        ("instructions", Hardware::INSTRUCTIONS.into()),
        ("cycles", Hardware::CPU_CYCLES.into()),
    ]
}

/// Counters for this thread and every thread it creates from now on
/// (`inherit`), so a fleet booted after [`RunCounters::start`] is counted.
pub struct RunCounters {
    counters: Vec<(&'static str, Result<Counter, String>)>,
}

impl RunCounters {
    /// Opens and enables the counters; a counter that cannot be opened is
    /// kept as skipped with its reason.
    pub fn start() -> Self {
        let counters = events()
            .into_iter()
            .map(|(name, ev)| {
                let mut b = Builder::new().kind(ev);
                // Context switches and migrations happen in the kernel: count it.
                b.inherit(true).include_kernel();
                let c = b.build().and_then(|mut c| {
                    c.enable()?;
                    Ok(c)
                });
                (name, c.map_err(|e| skip_reason(name, &e)))
            })
            .collect();
        RunCounters { counters }
    }

    /// Reads every counter. Inherited counts are folded in by the kernel when
    /// child threads exit, so read after the fleet has shut down.
    pub fn finish(mut self) -> BTreeMap<String, CounterValue> {
        self.counters
            .iter_mut()
            .map(|(name, c)| {
                let v = match c {
                    Ok(c) => match c.read() {
                        Ok(v) => CounterValue::Value(v),
                        Err(e) => CounterValue::Skipped {
                            skipped: format!("read failed: {e}"),
                        },
                    },
                    Err(reason) => CounterValue::Skipped {
                        skipped: reason.clone(),
                    },
                };
                (name.to_string(), v)
            })
            .collect()
    }
}

/// Software counters attached to each named thread of this process whose
/// name starts with a prefix (e.g. `work-fleet-`).
pub struct ThreadCounters {
    threads: Vec<(String, Vec<(&'static str, Counter)>)>,
    skipped: Option<String>,
}

impl ThreadCounters {
    /// Attaches to the threads present now.
    pub fn attach(prefix: &str) -> Self {
        let mut threads = Vec::new();
        let mut skipped = None;
        let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
            return ThreadCounters {
                threads,
                skipped: Some("no /proc/self/task".into()),
            };
        };
        for entry in dir.flatten() {
            let Some(tid) = entry
                .file_name()
                .to_str()
                .and_then(|s| s.parse::<i32>().ok())
            else {
                continue;
            };
            let name = std::fs::read_to_string(entry.path().join("comm"))
                .unwrap_or_default()
                .trim()
                .to_string();
            if !name.starts_with(prefix) {
                continue;
            }
            let mut cs = Vec::new();
            for (ev_name, ev) in events().into_iter().take(3) {
                let mut b = Builder::new().kind(ev).observe_pid(tid);
                b.include_kernel();
                match b.build().and_then(|mut c| {
                    c.enable()?;
                    Ok(c)
                }) {
                    Ok(c) => cs.push((ev_name, c)),
                    Err(e) => skipped = Some(skip_reason(ev_name, &e)),
                }
            }
            threads.push((format!("{name} ({tid})"), cs));
        }
        threads.sort_by(|a, b| a.0.cmp(&b.0));
        ThreadCounters { threads, skipped }
    }

    /// Reads every attached counter: thread → counter → value.
    pub fn read(mut self) -> (BTreeMap<String, BTreeMap<String, u64>>, Option<String>) {
        let mut out = BTreeMap::new();
        for (thread, cs) in &mut self.threads {
            let row: BTreeMap<String, u64> = cs
                .iter_mut()
                .filter_map(|(n, c)| c.read().ok().map(|v| (n.to_string(), v)))
                .collect();
            out.insert(thread.clone(), row);
        }
        (out, self.skipped)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn software_counters_count_or_hardware_ones_say_why_not() {
        let run = RunCounters::start();
        let h = std::thread::spawn(|| {
            let mut x = 0u64;
            for i in 0..2_000_000u64 {
                x = x.wrapping_mul(31).wrapping_add(i);
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
            x
        });
        std::hint::black_box(h.join().unwrap());
        let values = run.finish();
        for name in [
            "context_switches",
            "cpu_migrations",
            "task_clock_ns",
            "instructions",
            "cycles",
        ] {
            assert!(values.contains_key(name), "{name} missing: {values:?}");
        }
        match &values["task_clock_ns"] {
            CounterValue::Value(v) => assert!(*v > 0, "{values:?}"),
            // Some sandboxes forbid perf_event_open entirely; the reason must be given.
            CounterValue::Skipped { skipped } => assert!(!skipped.is_empty()),
        }
        for hw in ["instructions", "cycles"] {
            if let CounterValue::Skipped { skipped } = &values[hw] {
                assert!(skipped.starts_with("not supported"), "{skipped}");
            }
        }
    }
}
