#!/usr/bin/env python3
"""Verification seconds per candidate over TritonBench-G records: what the verifier's checks cost.

    python scripts/verify_cost.py [--names a,b | --subset bench/results/subset-40.txt] [--limit N]
                                  [--device auto|cuda|cpu] [--repeat 1] [--run-dir DIR]

For each record: the original's baseline (its timings choose the cases, as the search does:
correctness cases plus the two quickest performance cases), then verification requests exactly as
the search makes them (``verify=True, time=False``), one per candidate:

- ``self``: the original itself as a candidate (a trailing comment makes it another variant);
- ``rewrite``: a trivially rewritten honest candidate (a module constant added, the launch
  unchanged).

One JSON line per (record, candidate, repeat) on stdout: record, candidate, seconds (wall time of
the request: import, first runs, verification), status, checked (case/seed pairs), cases, device,
engine (the tritonforge package that ran). Run it once per engine on the same machine and compare
the seconds, e.g. on a GPU:

    PYTHONPATH=/path/to/old/src python scripts/verify_cost.py > before.jsonl
    python scripts/verify_cost.py > after.jsonl

The script takes the engine's API defensively (it must also run against an older engine via
PYTHONPATH): the repository's src is used only when no ``tritonforge`` is importable.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
try:
    import tritonforge  # noqa: F401 - PYTHONPATH's engine wins (the "before" run)
except ImportError:
    sys.path.append(str(REPO / "src"))
    import tritonforge  # noqa: F401

from tritonforge.config import load_settings  # noqa: E402
from tritonforge.model import CaseRole, Variant  # noqa: E402
from tritonforge.runtime.service import Evaluator, original_variant, resolve_device  # noqa: E402


def _names(args: argparse.Namespace) -> list[str]:
    if args.names:
        names = [n.strip() for n in args.names.split(",") if n.strip()]
    else:
        lines = Path(args.subset).read_text().splitlines()
        names = [ln.strip() for ln in lines if ln.strip() and not ln.startswith("#")]
    return names[: args.limit] if args.limit else names


def _variant(name: str, source: str) -> Variant:
    import hashlib

    return Variant(name, source, hashlib.sha256(source.encode()).hexdigest()[:16])


def candidates(source: str) -> list[Variant]:
    """The original as a candidate, and a trivially rewritten honest one."""
    return [_variant("self", source + "\n# verify-cost: the original as a candidate\n"),
            _variant("rewrite", source + "\n\n_VERIFY_COST_REWRITE = 1   # an honest no-op\n")]


def verification_cases(task, baseline) -> tuple[str, ...]:
    """The cases the search verifies a candidate on (its own function where the engine has one)."""
    try:
        from tritonforge.search.loop import search_verification_cases
        return tuple(search_verification_cases(task, baseline))
    except Exception:  # noqa: BLE001 - an engine without it: the same rule, written here
        times = {t.case_id: t.median_ms for t in baseline.timings}
        perf = sorted((c.id for c in task.cases if c.role is CaseRole.PERFORMANCE),
                      key=lambda cid: times.get(cid, float("inf")))
        return tuple(c.id for c in task.cases if c.role is CaseRole.CORRECTNESS) + tuple(perf[:2])


def measure(name: str, settings, run_dir: Path, device: str, repeat: int,
            untimed: bool = False) -> list[dict]:
    from tritonforge.api import load_task

    task = load_task(tritonbench=name)
    rows = []
    with Evaluator(settings, run_dir / name, None, device=device) as ev:
        on_gpu = ev.device == "cuda"
        base = ev.evaluate(task, (original_variant(task),), purpose="baseline", verify=False,
                           time=on_gpu and not untimed, keep_going=True, use_store=False)
        reference = base.results[0]
        ids = verification_cases(task, reference)
        if not on_gpu:   # interpreter: performance sizes take minutes; correctness cases only
            ids = tuple(c.id for c in task.cases if c.role is CaseRole.CORRECTNESS) or ids
        for rep in range(repeat):
            for cand in candidates(task.source):
                started = time.perf_counter()
                evaluation = ev.evaluate(task, (original_variant(task), cand), purpose="verify",
                                         case_ids=ids, verify=True, time=False, use_store=False)
                seconds = time.perf_counter() - started
                result = evaluation.results[-1]
                verdict = getattr(result, "verdict", None)
                rows.append({
                    "record": name, "candidate": cand.name, "repeat": rep,
                    "seconds": round(seconds, 3), "status": result.status.value,
                    "checked": getattr(verdict, "checked", 0) if verdict else 0,
                    "reasons": list(getattr(verdict, "cheats", ()) or ())[:3] if verdict else [],
                    "failure": result.failure.one_line()[:200] if result.failure else None,
                    "cases": len(ids), "device": evaluation.device.name,
                    "engine": str(Path(tritonforge.__file__).parent),
                })
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--names", help="comma-separated record names")
    parser.add_argument("--subset", default=str(REPO / "bench" / "results" / "subset-40.txt"))
    parser.add_argument("--limit", type=int, default=0)
    parser.add_argument("--device", default="auto", choices=["auto", "cuda", "cpu"])
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--run-dir", default=".verify-cost")
    parser.add_argument("--untimed", action="store_true",
                        help="skip the baseline's timing (8-117 s a record on an H100): the "
                             "performance cases verified are then the first two in the task's order")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    settings = load_settings(None, overrides={"device": args.device, "run_dir": args.run_dir})
    device = resolve_device(settings.device)
    per_candidate: list[float] = []
    for name in _names(args):
        try:
            rows = measure(name, settings, Path(args.run_dir), device, args.repeat, args.untimed)
        except Exception as exc:  # noqa: BLE001 - one record's failure is a line, not the end
            print(json.dumps({"record": name, "error": f"{type(exc).__name__}: {exc}"[:300]}),
                  flush=True)
            continue
        for row in rows:
            per_candidate.append(row["seconds"])
            print(json.dumps(row), flush=True)
    if per_candidate:
        print(json.dumps({"summary": True, "candidates": len(per_candidate),
                          "median_s": round(statistics.median(per_candidate), 3),
                          "total_s": round(sum(per_candidate), 3)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
