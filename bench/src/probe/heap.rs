//! Hands the allocator's free memory back to the operating system once a
//! cordon's backlog has drained.
//!
//! A cordon holds deferrable work back (`DESIGN.md` §3 "Posture"); when it
//! lifts, the held units run and free what they allocated, but the
//! allocator keeps those pages as free heap. Without a release the resident
//! set stays at the backlog's peak for the rest of the run, and a later
//! cordon stacks its own fragmentation on top. The lab's host releases once
//! per cordon, at the first cycle end after the posture is back to Nominal
//! with nothing held, queued or running ([`fleet_bindings::FleetHandle::backlog`]).
//!
//! Which call releases depends on the allocator `fleet-lab` was built with:
//! mimalloc's `mi_collect(true)` (the default `mimalloc` feature: frees the
//! calling thread's empty pages and purges the arenas' free segments
//! now), glibc's `malloc_trim(0)` otherwise (returns every arena's free
//! pages with `madvise`).

/// Turns transparent huge pages off for this process and its children
/// (`prctl(PR_SET_THP_DISABLE, 1)`): from now on neither a page fault nor
/// the kernel's `khugepaged` backs its memory with 2 MiB pages, whatever
/// `madvise(MADV_HUGEPAGE)` its allocator asked for.
///
/// Why the lab does this by default (`fleet-lab --allow-thp` keeps them):
/// mimalloc reserves its arena with `MADV_HUGEPAGE`, and `khugepaged`
/// (default `max_ptes_none` 511) collapses any 2 MiB range with a single
/// resident 4 KiB page into a whole huge page. After a heap release has
/// returned a drained backlog's pages, the collapse fills the holes back
/// in a few minutes later, in 2 MiB steps: the resident set climbs by
/// 8–11 MB with no allocation behind it, and a soak cannot tell a leak
/// from the kernel's page accounting. Errors: the kernel refused the call
/// (before Linux 3.15).
pub fn deny_transparent_huge_pages() -> std::io::Result<()> {
    // SAFETY: PR_SET_THP_DISABLE takes one integer argument; the rest are 0.
    let rc = unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Whether transparent huge pages are turned off for this process
/// (`prctl(PR_GET_THP_DISABLE)`); `None` where the kernel cannot say.
pub fn transparent_huge_pages_denied() -> Option<bool> {
    // SAFETY: PR_GET_THP_DISABLE takes no argument and returns the flag.
    let rc = unsafe { libc::prctl(libc::PR_GET_THP_DISABLE, 0, 0, 0, 0) };
    (rc >= 0).then_some(rc > 0)
}

/// The allocator call a release makes, for logs and the report.
pub const RELEASE_CALL: &str = if cfg!(feature = "mimalloc") {
    "mi_collect(true)"
} else {
    "malloc_trim(0)"
};

/// Releases the allocator's free memory to the OS; returns the resident
/// set size before and after, KiB (`None` where `/proc` cannot be read).
pub fn release_free_heap() -> (Option<u64>, Option<u64>) {
    let before = crate::probe::threads::rss_kib();
    release();
    (before, crate::probe::threads::rss_kib())
}

#[cfg(feature = "mimalloc")]
fn release() {
    // SAFETY: mi_collect has no preconditions; `force` also purges the
    // arenas' free segments.
    unsafe { libmimalloc_sys::mi_collect(true) };
}

#[cfg(all(not(feature = "mimalloc"), target_os = "linux", target_env = "gnu"))]
fn release() {
    // SAFETY: malloc_trim has no preconditions; 0 keeps no padding.
    unsafe { libc::malloc_trim(0) };
}

#[cfg(all(
    not(feature = "mimalloc"),
    not(all(target_os = "linux", target_env = "gnu"))
))]
fn release() {}

#[cfg(test)]
mod tests {
    use super::*;

    /// The call sets the process's flag, and the flag reads back; the
    /// test process is given its huge pages back after.
    #[test]
    fn denying_huge_pages_sets_the_process_flag() {
        deny_transparent_huge_pages().unwrap();
        assert_eq!(transparent_huge_pages_denied(), Some(true));
        // SAFETY: as above, clearing the flag.
        assert_eq!(
            unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 0, 0, 0, 0) },
            0
        );
        assert_eq!(transparent_huge_pages_denied(), Some(false));
    }

    const BLOCK: usize = 4096;
    const BLOCKS: usize = 16 * 1024; // 64 MiB in blocks below any mmap threshold

    #[cfg(feature = "mimalloc")]
    fn raw_alloc(n: usize) -> *mut u8 {
        // SAFETY: a plain allocation; checked for null by the caller.
        unsafe { libmimalloc_sys::mi_malloc(n) as *mut u8 }
    }
    #[cfg(feature = "mimalloc")]
    fn raw_free(p: *mut u8) {
        // SAFETY: `p` came from `raw_alloc` and is freed once.
        unsafe { libmimalloc_sys::mi_free(p as *mut _) }
    }
    #[cfg(not(feature = "mimalloc"))]
    fn raw_alloc(n: usize) -> *mut u8 {
        // SAFETY: a plain allocation; checked for null by the caller.
        unsafe { libc::malloc(n) as *mut u8 }
    }
    #[cfg(not(feature = "mimalloc"))]
    fn raw_free(p: *mut u8) {
        // SAFETY: `p` came from `raw_alloc` and is freed once.
        unsafe { libc::free(p as *mut _) }
    }

    /// A backlog's worth of small blocks, touched and then freed except the
    /// last (which pins the heap's top, as live data does after a drain):
    /// the allocator keeps the freed pages until a release hands them back.
    #[cfg(any(feature = "mimalloc", all(target_os = "linux", target_env = "gnu")))]
    #[test]
    fn a_release_hands_a_drained_backlogs_pages_back() {
        let blocks: Vec<*mut u8> = (0..BLOCKS)
            .map(|_| {
                let p = raw_alloc(BLOCK);
                assert!(!p.is_null());
                // SAFETY: `p` is a live BLOCK-byte allocation.
                unsafe { std::ptr::write_bytes(p, 0xa5, BLOCK) };
                p
            })
            .collect();
        let (last, rest) = blocks.split_last().expect("blocks");
        for p in rest {
            raw_free(*p);
        }
        let (before, after) = release_free_heap();
        let (before, after) = (
            before.expect("statm readable"),
            after.expect("statm readable"),
        );
        raw_free(*last);
        let freed_kib = (BLOCK * BLOCKS / 1024) as u64;
        assert!(
            before >= after + freed_kib / 2,
            "{RELEASE_CALL} returned {} KiB of a {freed_kib} KiB drained backlog ({before} → {after} KiB)",
            before.saturating_sub(after)
        );
    }
}
