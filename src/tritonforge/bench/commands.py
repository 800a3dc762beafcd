"""``tritonforge bench ...``: suite runs with a time budget, resumable from the run store."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import sys
from pathlib import Path

from ..model.serialize import to_jsonable
from ..report.tables import fmt_ms, render_table
from ..runtime.service import Evaluator, resolve_device
from ..store import RunStore
from ..tasks.tritonbench import load_records, load_tasks
from .baseline import run_baseline
from .selfcheck import self_check


def _names(args: argparse.Namespace) -> list[str] | None:
    return [n.strip() for n in args.names.split(",") if n.strip()] if getattr(args, "names", None) else None


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _environment(evaluator: Evaluator) -> dict:
    info = evaluator.worker.info
    return {"date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "device": info.name if info else evaluator.device,
            "torch": info.torch_version if info else "", "triton": info.triton_version if info else "",
            "command": " ".join(sys.argv)}


def _baseline(args: argparse.Namespace, settings) -> int:
    tasks = load_tasks(_names(args))
    run_dir = Path(settings.run_dir)
    with RunStore(run_dir / "store.sqlite") as store:
        device = resolve_device(settings.device)
        made: list[Evaluator] = []

        def make(i: int) -> Evaluator:
            made.append(Evaluator(settings, run_dir / f"w{i}", store, device=device))
            return made[-1]

        records, left = run_baseline(tasks, make, store, jobs=args.jobs, budget_s=args.budget,
                                     progress=_say)
        env = _environment(made[0])
    runnable = [r for r in records if r.runnable]
    summary = {"environment": env, "records": len(tasks), "done": len(records),
               "left": left, "runnable": len(runnable),
               "results": [to_jsonable(r) for r in records]}
    rows = []
    for r in records:
        times = [c.median_ms for c in r.cases if c.ok and c.median_ms is not None]
        rows.append((r.name, "yes" if r.runnable else "no", f"{r.perf_ok}/{len(r.cases)}",
                     fmt_ms(min(times)) if times else "-", fmt_ms(max(times)) if times else "-",
                     (r.test_error or next((c.error for c in r.cases if not c.ok), ""))[:70]))
    print(render_table(("record", "runnable", "perf ok", "fastest", "slowest", "first error"), rows))
    print(f"\n{len(runnable)} of {len(records)} done records runnable; {len(left)} left for a later run")
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(summary, indent=1))
    return 0


def _selfcheck(args: argparse.Namespace, settings) -> int:
    tasks = load_tasks(_names(args))
    run_dir = Path(settings.run_dir)
    checks = []
    with RunStore(run_dir / "store.sqlite") as store, Evaluator(settings, run_dir, store) as ev:
        for task in tasks:
            check = self_check(task, ev)
            checks.append(check)
            _say(f"{task.name}: sum ratio {check.sum_ratio:.4f} {check.error}")
        env = _environment(ev)
    rows, long_cases, within = [], 0, 0
    for c in checks:
        for r in c.ratios:
            big = min(r.median_a_ms, r.median_b_ms) > 0.05
            long_cases += big
            within += big and abs(r.ratio - 1) <= 0.02
            rows.append((c.name, r.case_id, fmt_ms(r.median_a_ms), fmt_ms(r.median_b_ms),
                         f"{r.ratio:.4f}", "yes" if big else "no"))
    print(render_table(("record", "case", "median A", "median B", "A/B", ">50us"), rows))
    print(f"\n{within} of {long_cases} cases over 50 us within 2%")
    worst = max((abs(r.ratio - 1) for c in checks for r in c.ratios
                 if min(r.median_a_ms, r.median_b_ms) > 0.05 and not math.isnan(r.ratio)),
                default=float("nan"))
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps({
            "environment": env, "cases_over_50us": long_cases, "within_2pct": within,
            "worst_deviation_over_50us": worst, "checks": [to_jsonable(c) for c in checks]},
            indent=1))
    return 0


def dispatch(args: argparse.Namespace, settings) -> int:
    if args.bench_command == "list":
        for name, rec in sorted(load_records().items()):
            print(f"{name}\t{rec.category}")
        return 0
    if args.bench_command == "baseline":
        return _baseline(args, settings)
    if args.bench_command == "selfcheck":
        return _selfcheck(args, settings)
    raise ValueError(args.bench_command)
