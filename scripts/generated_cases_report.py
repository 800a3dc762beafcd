"""How generated cases (``testgen.augment``) change TritonBench-G tasks: how many tasks gain them,
how many the original fails (dropped), and what they add to verifying one candidate.

For each record (in name order, or in ``--names``' order, until ``--budget-s`` is spent): load its task as ``bench`` does,
add generated cases, then verify a copy of the original against the original twice, on the
task's own correctness cases (the record's test section) and on its generated cases, one
request each; the second wall time is what generated cases add to each candidate's check.

    CPU (interpreter; slow, pick a budget):
      PYTHONPATH=src TRITONFORGE_TRITONBENCH=../shared/tritonbench_g \\
        python scripts/generated_cases_report.py --device cpu --budget-s 1500 --out gen_cpu.json
    GPU:
      PYTHONPATH=src python scripts/generated_cases_report.py --device cuda --budget-s 1500 \\
        --out gen_gpu.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from tritonforge.config import Settings
from tritonforge.model import Variant
from tritonforge.runtime.evaluator import Evaluator, original_variant
from tritonforge.tasks.tritonbench import load_tasks
from tritonforge.testgen.augment import AugmentOptions, augment_task


def _verify_s(ev: Evaluator, task, ids: tuple[str, ...]) -> tuple[float, bool]:
    """Wall seconds to verify a copy of the original on ``ids``, and whether it passed."""
    if not ids:
        return 0.0, True
    copy = Variant("copy", task.source + "\n# copy\n", "copy-" + task.source_hash)
    t0 = time.perf_counter()
    evaluation = ev.evaluate(task, (original_variant(task), copy), purpose="gen-report",
                             case_ids=ids, verify=True, time=False, keep_going=True, use_store=False)
    verdict = evaluation.result("copy").verdict
    return time.perf_counter() - t0, bool(verdict is not None and verdict.passed)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    ap.add_argument("--names", default="", help="comma-separated record names (default: all)")
    ap.add_argument("--budget-s", type=float, default=1800.0, help="no record starts after this")
    ap.add_argument("--record-budget-s", type=float, default=300.0,
                    help="validation time per record (AugmentOptions.budget_s)")
    ap.add_argument("--case-timeout-s", type=float, default=180.0)
    ap.add_argument("--work", default="tritonforge-runs/generated-cases")
    ap.add_argument("--out", default="")
    args = ap.parse_args(argv)
    names = [n.strip() for n in args.names.split(",") if n.strip()] or None
    # --names in the order given (e.g. shortest source first, to cover the most records in a
    # budget); every record in name order otherwise
    tasks = load_tasks(names)
    tasks = (sorted(tasks, key=lambda t: names.index(t.name)) if names
             else sorted(tasks, key=lambda t: t.name))
    settings = Settings(device=args.device, run_dir=args.work, case_timeout_s=args.case_timeout_s)
    options = AugmentOptions(budget_s=args.record_budget_s)
    work = Path(args.work)
    rows = []
    start = time.perf_counter()
    with Evaluator(settings, work / "worker", store=None, device=args.device) as ev:
        for task in tasks:
            if time.perf_counter() - start > args.budget_s:
                break
            aug = augment_task(task, settings, work / task.name, options=options,
                               device=args.device, evaluator=ev)
            own = tuple(c.id for c in aug.task.correctness_cases if not c.generated)
            gen = tuple(c.id for c in aug.task.generated_cases)
            own_s, own_ok = _verify_s(ev, aug.task, own)
            gen_s, gen_ok = _verify_s(ev, aug.task, gen)
            row = dict(name=task.name, added=len(gen), augment_s=round(aug.seconds, 1),
                       dropped_failed=sum(d.kind == "failed" for d in aug.dropped),
                       dropped_other=sum(d.kind != "failed" for d in aug.dropped),
                       traced=aug.traced, own_verify_s=round(own_s, 2), gen_verify_s=round(gen_s, 2),
                       own_ok=own_ok, gen_ok=gen_ok, notes=list(aug.notes)[:3],
                       dropped=[f"{d.case_id}: {d.reason[:100]}" for d in aug.dropped][:8])
            rows.append(row)
            print(f"{task.name}: +{row['added']} generated, {row['dropped_failed']} dropped (original "
                  f"fails), {row['dropped_other']} not run; verify own {own_s:.1f} s, generated "
                  f"{gen_s:.1f} s; augment {aug.seconds:.0f} s", flush=True)
    gained = [r for r in rows if r["added"]]
    added_s = [r["gen_verify_s"] for r in gained]
    summary = dict(device=args.device, records=len(rows), of=len(tasks), gained=len(gained),
                   cases_added=sum(r["added"] for r in rows),
                   dropped_original_fails=sum(r["dropped_failed"] for r in rows),
                   dropped_not_run=sum(r["dropped_other"] for r in rows),
                   median_added_verify_s=round(statistics.median(added_s), 2) if added_s else None,
                   median_own_verify_s=round(statistics.median([r["own_verify_s"] for r in gained]), 2)
                   if gained else None,
                   copy_failed_on_generated=[r["name"] for r in gained if not r["gen_ok"]],
                   wall_s=round(time.perf_counter() - start, 1))
    print(json.dumps(summary, indent=1))
    if args.out:
        Path(args.out).write_text(json.dumps(dict(summary=summary, records=rows), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
