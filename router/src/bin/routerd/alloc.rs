//! routerd's allocator: mimalloc, with freed memory given back to the
//! system when it is freed rather than some milliseconds later.
//!
//! mimalloc 3 (what the bindings build) keeps a freed page's memory for
//! `purge_delay` milliseconds, 1,000 by default, and carries out a delayed
//! purge only when the heap that owns it next calls into the allocator. A
//! worker thread that goes quiet after a burst (the registrations, the
//! facts, a snapshot) keeps its freed pages resident, and in a box with a
//! memory limit they count as the heap does: at 100,000 registered
//! devices routerd's resident set when the load began was 158 MiB with
//! the default and 122 MiB with no delay (docs/router.md, "The small
//! box").

/// mimalloc: the router allocates many small, short-lived objects per
/// decision (receipts); measured with `examples/core_bench.rs`. Built with
/// `--cfg system_alloc` in `RUSTFLAGS`, routerd allocates through `malloc`
/// instead, so that valgrind's massif can name the call sites of its heap
/// (docs/router.md, "The small box").
#[cfg(not(system_alloc))]
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `mi_option_purge_delay`: its place in mimalloc's `mi_option_e`
/// (`mimalloc.h`), which the bindings do not name; the test below reads
/// its documented default through it.
const PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Sets how long freed memory is kept before it is returned, milliseconds
/// (0: at once); segments wait the allocator's multiple of it.
pub fn set_purge_delay_ms(ms: u32) {
    // SAFETY: mi_option_set takes any option and value; the purge delay
    // is read on every purge decision, so a change applies from here on.
    unsafe { libmimalloc_sys::mi_option_set(PURGE_DELAY, ms.into()) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_option_set_is_the_purge_delay() {
        // SAFETY: reads an option.
        let read = || unsafe { libmimalloc_sys::mi_option_get(PURGE_DELAY) };
        // Its default in mimalloc 3's options.c (1,000 ms), and no
        // neighbour's: the retired eager-commit delay before it is 0 or 1,
        // the NUMA node count after it 0.
        assert_eq!(read(), 1000);
        set_purge_delay_ms(0);
        assert_eq!(read(), 0);
        set_purge_delay_ms(250);
        assert_eq!(read(), 250);
    }
}
