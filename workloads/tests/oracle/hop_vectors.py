"""Produce the hop-math oracle vectors from an independent implementation.

Reads the filtered pool-state file (corpus/pools-2020-09.txt), draws real hops
(pool, direction, input size) from a fixed seed, and prices each one with
degenbot 0.5.0's `constant_product_calc_exact_in` (fee 3/1000). Writes
workloads/tests/data/hop_vectors.txt, one vector per line:

    POOL_ID ZERO_FOR_ONE RESERVE_IN RESERVE_OUT AMOUNT_IN AMOUNT_OUT

Run it from the repository root (never from inside degenbot's package folder):

    python -m venv /tmp/oracle && /tmp/oracle/bin/pip install degenbot==0.5.0
    /tmp/oracle/bin/python workloads/tests/oracle/hop_vectors.py

Importing degenbot creates ~/.config/degenbot/ with a SQLite file; if the
import fails with "database is locked", run with HOME pointing at an empty
directory and set `[database] path` in its config.toml to a local file.

Requires Python >= 3.12. All arithmetic is Python integers (no floats).
"""

import random
import sys
from fractions import Fraction
from pathlib import Path

from degenbot.uniswap.v2_functions import constant_product_calc_exact_in

ROOT = Path(__file__).resolve().parents[3]
POOLS = ROOT / "corpus" / "pools-2020-09.txt"
OUT = ROOT / "workloads" / "tests" / "data" / "hop_vectors.txt"
SEED = 20200901
COUNT = 320
FEE = Fraction(3, 1000)


def read_pools(path):
    pools = []
    for line in path.read_text().splitlines():
        f = line.split(" ")
        if f[0] == "pool":
            pools.append((int(f[1]), int(f[6]), int(f[7])))
    return pools


def size(rng, i, reserve_in):
    """Input size of vector i: three edge cases (1 wei, the whole input
    reserve, ten times it), then log-spread shares m/1000 * 10^-k of the
    input reserve (integer arithmetic only)."""
    if i == 0:
        return 1
    if i == 1:
        return reserve_in
    if i == 2:
        return reserve_in * 10 + 7
    k = rng.randrange(0, 10)
    m = rng.randrange(1, 1000)
    return max(1, reserve_in * m // (1000 * 10**k))


def main():
    pools = read_pools(POOLS)
    rng = random.Random(SEED)
    lines = []
    for i in range(COUNT):
        pid, r0, r1 = pools[rng.randrange(len(pools))]
        zero_for_one = rng.randrange(2)
        r_in, r_out = (r0, r1) if zero_for_one else (r1, r0)
        x = size(rng, i, r_in)
        out = constant_product_calc_exact_in(x, r_in, r_out, FEE)
        lines.append(f"{pid} {zero_for_one} {r_in} {r_out} {x} {out}")
    header = [
        "# hop vectors: POOL_ID ZERO_FOR_ONE RESERVE_IN RESERVE_OUT AMOUNT_IN AMOUNT_OUT",
        "# amount_out by degenbot 0.5.0 constant_product_calc_exact_in, fee 3/1000",
        f"# pools: corpus/pools-2020-09.txt, seed {SEED}, {COUNT} vectors; made by workloads/tests/oracle/hop_vectors.py",
    ]
    OUT.write_text("\n".join(header + lines) + "\n")
    print(f"wrote {OUT} ({len(lines)} vectors)", file=sys.stderr)


if __name__ == "__main__":
    main()
