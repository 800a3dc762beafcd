#!/usr/bin/env python3
"""How well the budget's timing model (``search.budget.FinalCheckEstimate``) predicts the timing a
pass measured: for every timing request in the given run stores (search rounds and final checks),
the seconds the worker spent timing over what the model says, for a few per-call overheads.

    python3 scripts/timing_model_fit.py .gpu-store/pass-*/lanes/gpu*/store.sqlite

Each request's cases, variants and the original's per-call times (its baseline in the same store)
are read from the store; the worker's own "timing N" note is the measured time. Prints the median,
range and spread (standard deviation of the log) of measured/model per overhead, then one line
per request. Read-only; no GPU needed.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import re
import sqlite3
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from tritonforge.config import Settings  # noqa: E402
from tritonforge.runtime.timing_plan import final_check_plan, timing_plan  # noqa: E402
from tritonforge.search.budget import case_timing_ms  # noqa: E402

OVERHEADS_MS = (0.0, 0.1, 0.2, 0.3, 0.35, 0.4, 0.6)


def _timing_s(notes: list[str]) -> float | None:
    for note in notes:
        if note.startswith("worker seconds"):
            m = re.search(r"timing ([0-9.]+)", note)
            return float(m.group(1)) if m else None
    return None


def requests(paths: list[str]) -> list[tuple[str, str, float, int, list[float]]]:
    """(record, purpose, measured s, variants, the original's per-call ms per timed case)."""
    out, seen = [], set()
    for path in paths:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        for (task,) in con.execute("select distinct task from evaluations"):
            if task in seen:
                continue
            seen.add(task)
            evs = [(p, json.loads(b)) for p, b in con.execute(
                "select purpose, body from evaluations where task=? order by id", (task,))]
            base = [b for p, b in evs if p == "baseline"]
            if not base:
                continue
            call = {t["case_id"]: statistics.median(t["samples_ms"])
                    for r in base[-1]["results"] for t in r["timings"] if t["samples_ms"]}
            for purpose, body in evs:
                if purpose not in ("time", "final"):
                    continue
                seconds = _timing_s(body.get("notes", []))
                timed = [r for r in body["results"] if r["timings"]]
                cases = sorted({t["case_id"] for r in timed for t in r["timings"]})
                if seconds and timed and all(c in call for c in cases):
                    out.append((task, purpose, seconds, len(timed), [call[c] for c in cases]))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("stores", nargs="+")
    parser.add_argument("--max-calls", type=int, default=None,
                        help="calls per round at most in the stores' engine (default: the settings')")
    parser.add_argument("--round-ms", type=float, default=None,
                        help="the round's ms in the stores' engine (default: the settings')")
    args = parser.parse_args(argv)
    base = Settings()
    settings = dataclasses.replace(
        base, timing_max_calls_per_round=args.max_calls or base.timing_max_calls_per_round,
        timing_round_ms=args.round_ms or base.timing_round_ms)
    plans = {"time": timing_plan(settings), "final": final_check_plan(settings)}
    got = requests(args.stores)
    if not got:
        print("no timing request with its baseline in these stores")
        return 1

    def ratio(r, c):
        model = sum(case_timing_ms(ms, r[3], plans[r[1]], c) for ms in r[4]) / 1000.0
        return r[2] / model

    print(f"{len(got)} timing requests")
    for c in OVERHEADS_MS:
        rs = [ratio(r, c) for r in got]
        print(f"overhead {c:.2f} ms a call: measured/model median {statistics.median(rs):.2f}, "
              f"range {min(rs):.2f}-{max(rs):.2f}, "
              f"spread {statistics.pstdev(math.log(x) for x in rs):.2f}")
    for r in got:
        print(f"{r[0][:26]:26s} {r[1]:5s} {r[2]:6.1f} s  {r[3]:2d} variants  {len(r[4]):2d} cases  "
              f"ratio {ratio(r, 0.0):5.1f} (no overhead)  {ratio(r, 0.4):4.1f} (0.4 ms)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
