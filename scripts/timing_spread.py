"""How widely a run store's timings of the reference spread, by call time: the share of cases
whose samples' 90th percentile is over 1.5x (and over 3x) their 10th.

    python scripts/timing_spread.py STORE.sqlite [STORE.sqlite ...] [--purposes baseline,time,final]

Reads the ``evaluations`` and ``timings`` tables of each store (a pass's lanes keep one each:
``.gpu-store/pass-ENGINE/lanes/gpuN/store.sqlite``): the samples of the variant every request
times first (``original`` in a baseline or a final check, ``incumbent`` in a search round), on
every case with 20 samples or more, bucketed by the median (under 50 us, 50 us to 1 ms, over
1 ms). On four H100s (engine 1018ceeea5af, 2026-11-27) half the cases under 50 us spread over
1.5x and a third over 3x: the figure to compare when the timing or the host's load changes
(``runtime.priority``).
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
from pathlib import Path

REFERENCES = ("original", "incumbent")
BUCKETS = ((0.05, "under 50 us"), (1.0, "50 us to 1 ms"), (float("inf"), "over 1 ms"))
MIN_SAMPLES = 20


def spreads(store: str | Path, purposes: set[str] | None = None) -> list[tuple[str, str, float, float]]:
    """(record, purpose, median ms, p90 / p10) of every reference timing with enough samples."""
    con = sqlite3.connect(f"file:{Path(store)}?mode=ro", uri=True)
    try:
        rows = con.execute(
            "select e.task, e.purpose, t.variant, t.median_ms, t.samples from evaluations e "
            "join timings t on t.evaluation = e.id").fetchall()
    finally:
        con.close()
    out = []
    for task, purpose, variant, median, samples in rows:
        if variant not in REFERENCES or not median or (purposes and purpose not in purposes):
            continue
        s = sorted(json.loads(samples))
        if len(s) < MIN_SAMPLES or s[len(s) // 10] <= 0:
            continue
        out.append((task.split(":")[0], purpose, median, s[9 * len(s) // 10] / s[len(s) // 10]))
    return out


def render(rows: list[tuple[str, str, float, float]]) -> str:
    lines = ["| median call | cases | spread over 1.5x | over 3x |", "|---|---|---|---|"]
    low = 0.0
    for high, label in BUCKETS:
        got = [r for r in rows if low <= r[2] < high]
        low = high
        if not got:
            lines.append(f"| {label} | 0 | - | - |")
            continue
        wide = sum(r[3] > 1.5 for r in got) / len(got)
        wider = sum(r[3] > 3.0 for r in got) / len(got)
        lines.append(f"| {label} | {len(got)} | {wide:.0%} | {wider:.0%} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("stores", nargs="+")
    parser.add_argument("--purposes", help="comma-separated (default: every request that times)")
    args = parser.parse_args(argv)
    purposes = {p for p in (args.purposes or "").split(",") if p} or None
    rows = [r for store in args.stores for r in spreads(store, purposes)]
    print(render(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
