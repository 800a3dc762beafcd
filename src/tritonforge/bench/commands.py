"""``tritonforge bench ...``: suite runs with a time budget, resumable from the run store."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import sys
from pathlib import Path

from ..errors import ConfigError
from ..model.serialize import to_jsonable
from ..report.tables import fmt_ms, render_table
from ..runtime.perf_inputs import remove_for
from ..runtime.service import Evaluator, PrestartedEvaluators, resolve_device
from ..store import RunStore
from ..tasks.tritonbench import load_records, load_tasks
from .baseline import run_baseline
from .redo import forget_for_redo
from .selfcheck import self_check


def _names(args: argparse.Namespace) -> list[str] | None:
    return [n.strip() for n in args.names.split(",") if n.strip()] if getattr(args, "names", None) else None


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
    from importlib.metadata import PackageNotFoundError, version

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


def _baseline(args: argparse.Namespace, settings) -> int:
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

        records, left = run_baseline(tasks, make, store, jobs=args.jobs, budget_s=args.budget,
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


def _selfcheck(args: argparse.Namespace, settings) -> int:
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


def _shard(spec: str | None, tasks: list, settings, device: str,
           dynamic: bool = False) -> tuple[list, object]:
    """This process's share of ``tasks`` under ``--shard K/N``, and settings whose run folder is
    its own (workers and modules of two processes must not mix; the store stays shared).
    The share is every K-th task from K, or, ``dynamic`` (``--shard-group``), all of them: the
    shards then take tasks one at a time through claims in the store.

    Shards share one GPU: unless each of their GPU runs takes the lock, one shard's verification
    would run inside the other's timed samples, and those timings decide what is accepted.
    """
    if not spec:
        return tasks, settings
    from ..runtime.service import gpu_lock_covers_all

    try:
        k, n = (int(x) for x in spec.split("/"))
    except ValueError:
        raise ConfigError(f"--shard {spec}: expected K/N, e.g. 0/2") from None
    if n < 1 or not 0 <= k < n:
        raise ConfigError(f"--shard {spec}: K must be in 0..N-1 and N at least 1")
    if device == "cuda" and n > 1 and not gpu_lock_covers_all():
        raise ConfigError(f"--shard {spec}: shards that share a GPU must take turns on it",
                          hint="export TRITONFORGE_GPU_LOCK=/tmp/tritonforge-gpu.lock "
                               "TRITONFORGE_GPU_LOCK_SCOPE=all")
    work = Path(settings.run_dir) / f"shard{k}of{n}"
    return (list(tasks) if dynamic else tasks[k::n]), settings.replace(run_dir=str(work))


def _sweep_times(args: argparse.Namespace, task):
    """The baseline sweep's times of ``task`` (``--baseline-store``), for the optimizer to skip
    timing the original again; None without a usable record (``baseline.as_known_baseline``)."""
    from .baseline import as_known_baseline

    path = Path(args.baseline_store)
    if args.no_sweep_times or not path.exists():
        return None
    with RunStore(path) as base:
        return as_known_baseline(base.get_record("baseline", task.name), task)


def _optimize(args: argparse.Namespace, settings) -> int:
    from ..api import build_proposers, record_llm_usage
    from ..search.loop import Optimizer, make_evaluators
    from ..profile.session import ncu_lock_mode
    from ..tasks.tritonbench import load_records
    from .baseline import BaselineRecord  # noqa: F401 - registers the stored record types
    from .optimize import choose_subset, headline, held_back, run_suite

    ncu_lock_mode()         # a bad $TRITONFORGE_NCU_LOCK stops here, not in each record's profile
    names = _names(args)
    if not names:
        with RunStore(args.baseline_store) as base:
            # runnable by BENCHMARK.md: the test section ran and the perf script ran at >= 1 size
            runnable = [k for k, rec in base.records("baseline-run") if rec.test_ok and rec.perf_ok]
        records = load_records()
        names = choose_subset([(n, records[n].category) for n in runnable if n in records], args.size)
        _say(f"subset of {len(names)} from {len(runnable)} runnable records: {', '.join(names)}")
    # a --redo of a record not in the run stops before any data is loaded or device asked
    redo = {n.strip() for n in (args.redo or "").split(",") if n.strip()}
    unknown = sorted(redo - set(names))
    if unknown:
        raise ConfigError(f"--redo names records not among those to run: {', '.join(unknown)}",
                          hint="--redo takes names from --names (or the subset)")
    tasks = load_tasks(names)
    run_dir = Path(settings.run_dir)
    group = args.shard_group if args.shard else None
    device = resolve_device(settings.device)     # asks a child process: once
    mine, settings = _shard(args.shard, tasks, settings, device, dynamic=group is not None)
    with RunStore(run_dir / "store.sqlite") as store:
        def forget(name: str) -> None:
            """Forget ``name``'s cached work just before it runs again (``run_suite``); its record
            stays until the re-run stores a new one (session 9 lost three records to a call that
            ended mid re-run, and got them back only by running them once more)."""
            gone, resumed = forget_for_redo(store, name)
            if resumed:
                _say(f"--redo {name}: resuming the re-run an earlier call did not finish (same "
                     f"engine); {gone} older evaluation(s) forgotten, its own kept")
            else:
                _say(f"--redo {name}: {gone} cached evaluation(s) forgotten; it runs again (its "
                     "stored record stays until the new one replaces it)")
        work_dir = Path(settings.run_dir)   # run_dir itself, or this shard's folder in it
        evaluators = make_evaluators(settings, work_dir, store, args.jobs, device)
        counter = iter(range(100_000))
        fresh = PrestartedEvaluators(
            lambda: Evaluator(settings, work_dir / f"final{next(counter)}", store, device=device))

        # run_suite starts a record only with its whole budget left; the budget is the record's,
        # its final check included (search.budget)
        def one(task, remaining):
            from ..testgen.augment import with_generated_cases
            task = with_generated_cases(task, settings, work_dir / "generated", evaluators[0], _say)
            proposers = build_proposers(settings, work_dir)
            opt = Optimizer(task, settings, evaluators, proposers, store, _say,
                            make_final_evaluator=fresh, known_baseline=_sweep_times(args, task))
            try:
                return opt.run(args.per_kernel)
            finally:
                record_llm_usage(store, task.name, proposers)
                remove_for(Path(settings.run_dir) / "perf-inputs", task.name)

        try:
            owner = f"{args.shard} pid {os.getpid()}"
            claim = (lambda name: store.claim("optimize-claim", name, group, owner)) if group else None
            _, left = run_suite(mine, one, store, budget_s=args.budget, progress=_say,
                                need_s=args.per_kernel, claim=claim,
                                redo=redo, forget=forget)
            # every record done so far, the other shards' included, in the subset's order
            results = [r for r in (store.get_record("optimize", t.name) for t in tasks) if r is not None]
            env = _environment(evaluators[0])
        finally:
            fresh.close()
            for e in evaluators:
                e.close()
    head = headline(results)
    rows = []
    for r in results:
        f = r.final
        rows.append((r.task, f"{f.speedup:.3f}x" if f and f.accepted else "1.000x",
                     f"{f.speedup_low:.3f}x" if f and f.accepted else "-",
                     r.rounds, r.tried, f"{r.wall_s:.0f}s", held_back(r) or "success",
                     (f.reason if f else r.stop_reason)[:60]))
    print(render_table(("record", "speedup", "low", "rounds", "tried", "wall", "held back by",
                        "last word"), rows))
    print("\n" + json.dumps(head, indent=1))
    print(f"{len(left)} records left for a later run")
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps({"environment": env, "headline": head, "left": left,
                                              "names": names, "per_kernel_s": args.per_kernel,
                                              "results": [to_jsonable(r) for r in results]},
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
    if args.bench_command == "optimize":
        return _optimize(args, settings)
    raise ValueError(args.bench_command)
