//! Each contender's bound on sims in flight at once, printed beside a
//! comparison: a walk waits for its sim, so a lower bound lengthens the
//! cycle (decision 0029).

use crate::lab::Contender;
use crate::report::RunReport;

/// The most sims a contender runs at once (`None`: no bound of its own): a
/// fleet's plan caps them at its sim seats (`DESIGN.md` §3, "Sim slots are
/// capped at 4"; `[budget] sim_slot_cap`), the pile of pools at its legacy
/// semaphore, and plain Tokio and Rayon + Tokio spawn every sim at once.
/// `census` is the run report's census; `cpus` the host's CPU count.
pub fn sims_at_once(
    contender: Contender,
    census: &[serde_json::Value],
    cpus: usize,
) -> Option<usize> {
    match contender {
        Contender::Fleet(_) => Some(
            census
                .iter()
                .filter(|row| row["role"] == "sim_driver")
                .count(),
        ),
        Contender::PileOfPools => Some(crate::baseline::PileOfPools::sim_permits(cpus)),
        Contender::PlainTokio | Contender::RayonTokio => None,
    }
}

/// Prints each contender's bound on sims at once ([`sims_at_once`]): a
/// walk waits for its sim, so a lower bound lengthens the cycle.
pub fn print_sim_bounds(table: &[Contender], runs: &[RunReport]) {
    let cpus = crate::baseline::cpu_count();
    println!(
        "  sims in flight at once, at most (each contender's own bound; a walk holds one at a time):"
    );
    for (c, r) in table.iter().zip(runs) {
        let bound = sims_at_once(*c, &r.census, cpus)
            .map_or_else(|| "no bound".to_string(), |n| n.to_string());
        println!("    {:<14} {bound}", r.label);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fleet::plan::Profile;

    #[test]
    fn each_contender_reports_its_own_bound_on_sims_at_once() {
        let row = |role: &str| serde_json::json!({ "role": role });
        let census = [
            row("solver"),
            row("sim_driver"),
            row("sim_driver"),
            row("merge"),
        ];
        assert_eq!(
            sims_at_once(Contender::Fleet(Profile::Auto), &census, 2),
            Some(2)
        );
        assert_eq!(
            sims_at_once(Contender::Fleet(Profile::Pinned), &[], 2),
            Some(0)
        );
        assert_eq!(sims_at_once(Contender::PileOfPools, &census, 1), Some(2));
        assert_eq!(sims_at_once(Contender::PileOfPools, &census, 2), Some(2));
        assert_eq!(sims_at_once(Contender::PileOfPools, &census, 16), Some(30));
        assert_eq!(sims_at_once(Contender::PlainTokio, &census, 2), None);
        assert_eq!(sims_at_once(Contender::RayonTokio, &census, 2), None);
    }
}
