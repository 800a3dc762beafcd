"""``tritonforge bench ...``: the baseline sweep, the self-check, and the dispatch of every bench
command (the optimization pass itself: ``bench.pass_command``)."""

from __future__ import annotations

import datetime as dt
import json
import math
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from ..model.serialize import to_jsonable
from ..report.tables import fmt_ms, render_table
from ..runtime.evaluator import Evaluator
from ..runtime.hardware import resolve_device
from ..runtime.perf_inputs import remove_for
from ..store import RunStore
from ..tasks.tritonbench import load_records, load_tasks
from . import pass_command
from .baseline import run_baseline
from .options import BaselineOptions, SelfcheckOptions
from .selfcheck import self_check


def _names(options) -> list[str] | None:
    return list(options.names) or None


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _environment(evaluator: Evaluator) -> dict:
    """Date, device and versions for a summary: the worker's word, or, when no worker ran (a
    ``--budget 0`` table), the versions installed here (the worker imports the same ones)."""
    info = evaluator.worker.info
    return {"date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "device": info.name if info else evaluator.device,
            "torch": info.torch_version if info else _installed("torch"),
            "triton": info.triton_version if info else _installed("triton"),
            "command": " ".join(sys.argv)}


def _installed(package: str) -> str:
    try:
        return version(package)
    except PackageNotFoundError:
        return ""


def host_memory_gb() -> float:
    """The machine's memory in GiB (MemTotal; 0 where /proc/meminfo cannot be read)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) / 2**20
    except (OSError, ValueError, IndexError):
        pass
    return 0.0


def _baseline(args: BaselineOptions, settings) -> int:
    tasks = load_tasks(_names(args))
    run_dir = Path(settings.run_dir)
    with RunStore(run_dir / "store.sqlite") as store:
        device = resolve_device(settings.device)
        made: list[Evaluator] = []

        def make(i: int) -> Evaluator:
            made.append(Evaluator(settings, run_dir / f"w{i}", store, device=device))
            return made[-1]

        def alone() -> Evaluator:
            gb = args.alone_memory_gb or max(settings.host_memory_limit_gb, 0.7 * host_memory_gb())
            made.append(Evaluator(settings.replace(host_memory_limit_gb=gb), run_dir / "alone",
                                  store, device=device))
            return made[-1]

        records, left = run_baseline(tasks, make, store, jobs=args.jobs, budget_s=args.budget_s,
                                     progress=_say, make_alone=alone, rewarm_share=args.rewarm_share,
                                     done_with=lambda name: remove_for(run_dir / "perf-inputs", name))
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


def _selfcheck(args: SelfcheckOptions, settings) -> int:
    tasks = load_tasks(_names(args))
    run_dir = Path(settings.run_dir)
    copies = args.copies
    checks = []
    with RunStore(run_dir / "store.sqlite") as store, Evaluator(settings, run_dir, store) as ev:
        for task in tasks:
            check = self_check(task, ev, copies=copies)
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
                         f"{r.ratio:.4f}", *((f"{r.spread:.4f}",) if copies > 2 else ()),
                         "yes" if big else "no"))
    head = ("record", "case", "median A", "median B", "A/B",
            *((f"spread of {copies}",) if copies > 2 else ()), ">50us")
    print(render_table(head, rows))
    print(f"\n{within} of {long_cases} cases over 50 us within 2%")
    big_ratios = [r for c in checks for r in c.ratios
                  if min(r.median_a_ms, r.median_b_ms) > 0.05 and not math.isnan(r.ratio)]
    worst = max((abs(r.ratio - 1) for r in big_ratios), default=float("nan"))
    spread = max((r.spread for r in big_ratios if not math.isnan(r.spread)), default=float("nan"))
    if copies > 2:
        print(f"widest spread over {copies} copies, cases over 50 us: {spread:.4f}")
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps({
            "environment": env, "copies": copies, "cases_over_50us": long_cases,
            "within_2pct": within, "worst_deviation_over_50us": worst,
            "widest_spread_over_50us": spread, "checks": [to_jsonable(c) for c in checks]},
            indent=1))
    return 0


def dispatch(command: str, options, settings) -> int:
    """Run bench ``command`` with its typed ``options`` (``bench.options``)."""
    if command == "list":
        for name, rec in sorted(load_records().items()):
            print(f"{name}\t{rec.category}")
        return 0
    if command == "baseline":
        return _baseline(options, settings)
    if command == "selfcheck":
        return _selfcheck(options, settings)
    if command == "optimize":
        return pass_command.run_pass_command(options, settings)
    if command == "reverify":
        return pass_command.reverify_command(options, settings)
    if command == "isolation":
        return pass_command.isolation_command(options, settings)
    raise ValueError(command)
