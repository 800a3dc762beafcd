#!/usr/bin/env python3
"""A markdown table and BENCHMARK.md's headline figures from a ``tritonforge bench optimize`` store.

    python scripts/optimize_table.py STORE.sqlite [SUBSET.txt] > table.md

Reads the OptimizeResult records (kind ``optimize``); with SUBSET.txt (one name per line, ``#``
comments) the rows follow its order and the records not yet run are listed. Categories come from
the TritonBench-G data ($TRITONFORGE_TRITONBENCH or ../shared/tritonbench_g). "queued" is the part
of the wall time a record spent waiting for the GPU behind other shards (``--shard``; 0 unsharded).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from tritonforge.bench.optimize import headline, held_back  # noqa: E402
from tritonforge.search.loop import OptimizeResult  # noqa: E402,F401 - registers the record type
from tritonforge.store import RunStore  # noqa: E402
from tritonforge.tasks.tritonbench import load_records  # noqa: E402


def main(store_path: str, subset_path: str | None = None) -> None:
    records = load_records()
    with RunStore(store_path) as store:
        done = dict(store.records("optimize"))
    order = list(done)
    if subset_path:
        order = [ln.strip() for ln in Path(subset_path).read_text().splitlines()
                 if ln.strip() and not ln.startswith("#")]
    results = [done[n] for n in order if n in done]
    print("| record | category | speedup | 95% low | geomean | rounds | tried | wall | queued | held back by |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        f = r.final
        ok = f is not None and f.accepted
        cat = records[r.task].category if r.task in records else "?"
        print(f"| {r.task} | {cat} | {f.speedup if ok else 1.0:.3f}x | "
              f"{f'{f.speedup_low:.3f}x' if ok else '-'} | {f'{f.geomean:.3f}x' if ok else '-'} | "
              f"{r.rounds} | {r.tried} | {r.wall_s:.0f} s | {getattr(r, 'blocked_s', 0.0):.0f} s | "
              f"{held_back(r) or 'success'}: {(f.reason if f else r.stop_reason)[:90]} |")
    left = [n for n in order if n not in done]
    print(f"\n{len(results)} records done" + (f"; not yet run: {', '.join(left)}" if left else ""))
    print("\nHeadline over the records done (failures count as 1.0x):\n")
    print("```\n" + json.dumps(headline(results), indent=1) + "\n```")


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    main(*sys.argv[1:])
