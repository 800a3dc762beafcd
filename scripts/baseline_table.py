#!/usr/bin/env python3
"""Markdown tables of a baseline sweep's store: the runnable check of every record (phase 1) and,
where phase 2 ran, each record's time per performance case.

    python scripts/baseline_table.py STORE.sqlite > table.md

Reads the records ``tritonforge bench baseline`` writes (kinds ``baseline-run`` and
``baseline``); categories come from the TritonBench-G data ($TRITONFORGE_TRITONBENCH or
../shared/tritonbench_g). Runnable (BENCHMARK.md): the test section ran and the performance
script ran at one size or more.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from tritonforge.bench.baseline import BaselineRecord, RunCheck  # noqa: E402,F401 - registers types
from tritonforge.report.tables import fmt_ms  # noqa: E402
from tritonforge.store import RunStore  # noqa: E402
from tritonforge.tasks.tritonbench import load_records  # noqa: E402


def main(store_path: str) -> None:
    records = load_records()
    with RunStore(store_path) as store:
        checks = dict(store.records("baseline-run"))
        timed = dict(store.records("baseline"))
    runnable = [n for n, c in checks.items() if c.test_ok and c.perf_ok]
    print(f"records checked: {len(checks)} of {len(records)}; runnable: **{len(runnable)}**; "
          f"timed (phase 2): {len(timed)}\n")
    print("| record | category | test section | perf cases that ran | first failure |")
    print("|---|---|---|---|---|")
    for name in sorted(checks):
        c = checks[name]
        total = len(c.perf_ok) + len(c.perf_failed)
        first = c.test_error or (c.perf_failed[0][1] if c.perf_failed else "")
        cat = records[name].category if name in records else "?"
        print(f"| {name} | {cat} | {'ok' if c.test_ok else 'FAILED'} | {len(c.perf_ok)}/{total} | "
              f"{first[:90].replace('|', '/')} |")
    if timed:
        print("\n## Time per performance case (median, ms; phase 2, alone on the GPU)\n")
        print("| record | runnable | cases (case: median) |")
        print("|---|---|---|")
        for name in sorted(timed):
            r = timed[name]
            cells = ", ".join(f"{c.case_id}: {fmt_ms(c.median_ms)}" if c.ok else f"{c.case_id}: failed"
                              for c in r.cases)
            print(f"| {name} | {'yes' if r.runnable else 'no'} | {cells} |")


if __name__ == "__main__":
    main(sys.argv[1])
