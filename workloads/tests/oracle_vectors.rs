//! The hop math agrees exactly with an independent implementation: vectors
//! made once by degenbot 0.5.0's `constant_product_calc_exact_in` on real
//! hops of the shipped pool file (`tests/oracle/hop_vectors.py`).

use std::path::Path;

use fleet_workloads::corpus::read_pool_file;
use fleet_workloads::math::amount_out;

#[test]
fn every_oracle_vector_matches_exactly() {
    let text = include_str!("data/hop_vectors.txt");
    let pools =
        read_pool_file(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../corpus/pools-2020-09.txt"))
            .unwrap();
    let mut n = 0;
    for (i, line) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.starts_with('#'))
    {
        let f: Vec<&str> = line.split(' ').collect();
        assert_eq!(f.len(), 6, "line {}: {line}", i + 1);
        let id: u32 = f[0].parse().unwrap();
        let zero_for_one = f[1] == "1";
        let [r_in, r_out, x, want] = [f[2], f[3], f[4], f[5]].map(|s| s.parse::<u128>().unwrap());
        // The vector is a real hop of the shipped pool file.
        assert_eq!(
            pools.pools.get(id).reserves(zero_for_one),
            (r_in, r_out),
            "line {}",
            i + 1
        );
        assert_eq!(amount_out(x, r_in, r_out), want, "line {}: {line}", i + 1);
        n += 1;
    }
    assert!(n >= 200, "only {n} vectors");
}
