#!/usr/bin/env python3
"""A markdown table and BENCHMARK.md's headline figures from a ``tritonforge bench optimize`` store.

    python scripts/optimize_table.py STORE.sqlite [SUBSET.txt] > table.md

Reads the OptimizeResult records (kind ``optimize``); with SUBSET.txt (one name per line, ``#``
comments) the rows follow its order and the records not yet run are listed. Categories come from
the TritonBench-G data ($TRITONFORGE_TRITONBENCH or ../shared/tritonbench_g). "queued" is the part
of the wall time a record spent waiting for the GPU behind other shards (``--shard``; 0 unsharded).
"(resumed)" marks a record whose first attempt a call's end cut: its wall time is the last
attempt's alone. "kernels" is the Triton kernels' share of the profiled case: their Nsight Compute
durations over the case's timed time (``profile.diagnose.kernel_share``; "-" without a stored
ncu profile of the original).
The headline is also split by category and by quartile of kernel length in lines (BENCHMARK.md;
the kernel file's lines before the test section, quartiles over the records in the table).
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from tritonforge.bench.optimize import headline, held_back, phase_summary, resumed  # noqa: E402
from tritonforge.profile.diagnose import kernel_share  # noqa: E402
from tritonforge.search.loop import OptimizeResult  # noqa: E402,F401 - registers the record type
from tritonforge.store import RunStore  # noqa: E402
from tritonforge.tasks.tritonbench import load_records  # noqa: E402


def main(store_path: str, subset_path: str | None = None) -> None:
    records = load_records()
    with RunStore(store_path) as store:
        done = dict(store.records("optimize"))
        shares = {}
        for name, r in done.items():
            profile = store.latest_profile(name, r.original.hash)
            shares[name] = kernel_share(profile) if profile is not None else None
    order = list(done)
    if subset_path:
        order = [ln.strip() for ln in Path(subset_path).read_text().splitlines()
                 if ln.strip() and not ln.startswith("#")]
    results = [done[n] for n in order if n in done]
    print("| record | category | speedup | 95% low | geomean | rounds | tried | wall | queued | kernels | held back by |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        f = r.final
        ok = f is not None and f.accepted
        cat = records[r.task].category if r.task in records else "?"
        print(f"| {r.task} | {cat} | {f.speedup if ok else 1.0:.3f}x | "
              f"{f'{f.speedup_low:.3f}x' if ok else '-'} | {f'{f.geomean:.3f}x' if ok else '-'} | "
              f"{r.rounds} | {r.tried} | {r.wall_s:.0f} s{' (resumed)' if resumed(r) else ''} | "
              f"{getattr(r, 'blocked_s', 0.0):.0f} s | {_share(shares.get(r.task))} | "
              f"{held_back(r) or 'success'}: {(f.reason if f else r.stop_reason)[:90]} |")
    left = [n for n in order if n not in done]
    print(f"\n{len(results)} records done" + (f"; not yet run: {', '.join(left)}" if left else ""))
    print("\nHeadline over the records done (failures count as 1.0x):\n")
    print("```\n" + json.dumps(headline(results), indent=1) + "\n```")
    phases = phase_summary(results)
    if phases:
        print(f"\nWhere the time goes ({phases[0][1]} records that measured their phases):\n")
        print("| phase | records | median wall | median queued | longest |")
        print("|---|---|---|---|---|")
        for name, n, wall, wait, longest in phases:
            print(f"| {name} | {n} | {wall:.0f} s | {wait:.0f} s | {longest:.0f} s |")
    split(results, "category", lambda r: records[r.task].category if r.task in records else "?")
    lines = {r.task: kernel_lines(records[r.task].source) for r in results if r.task in records}
    if len(lines) >= 4:
        q1, q2, q3 = statistics.quantiles(sorted(lines.values()), n=4)
        bounds = [(0, q1, "Q1"), (q1, q2, "Q2"), (q2, q3, "Q3"), (q3, float("inf"), "Q4")]

        def quartile(r) -> str:
            n = lines.get(r.task)
            if n is None:
                return "?"
            lo, hi, name = next(b for b in bounds if n <= b[1])
            return f"{name} (over {lo:.0f} lines)" if name == "Q4" else f"{name} ({lo:.0f}-{hi:.0f} lines)"
        split(results, "quartile of kernel length", quartile)


def _share(share: float | None) -> str:
    """The Triton kernels' share of the profiled case (ncu durations over its timed time)."""
    return "-" if share is None else f"{min(share, 1.0):.0%}"


def kernel_lines(source: str) -> int:
    """Lines of the kernel file, without the test section after the line of 146 ``#``."""
    return len(source.split("#" * 146)[0].strip().splitlines())


def split(results: list, title: str, key) -> None:
    """The headline figures per group of records, as a markdown table."""
    groups: dict[str, list] = {}
    for r in results:
        groups.setdefault(key(r), []).append(r)
    print(f"\nBy {title}:\n")
    print(f"| {title} | records | successes | mean over successes | geomean (failures 1.0x) | best |")
    print("|---|---|---|---|---|---|")
    for name in sorted(groups):
        h = headline(groups[name])
        mean = h["mean_speedup_over_successes"]
        print(f"| {name} | {h['kernels']} | {h['successes']} | {'-' if mean != mean else f'{mean:.2f}x'} | "
              f"{h['geomean_all_failures_as_1']:.3f}x | {h['best']:.2f}x |")


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    main(*sys.argv[1:])
