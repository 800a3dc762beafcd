#!/usr/bin/env python3
"""Testgen on TritonBench-G records: coverage (any machine) and, on a GPU, its performance sizes
against the records' own performance scripts.

    python scripts/testgen_compare.py OUT_DIR [--names a,b | --limit N] [--device auto|cpu|cuda]

For each record the generator sees only the kernel module and its test section (the performance
script stays hidden from it). It traces the test, generates correctness and performance cases and
validates them on the original. Written to OUT_DIR:

- records/<name>.json   one record's outcome (the sweep resumes: records already there are skipped)
- specs/<name>.toml     the generated spec
- testgen_compare.json  every record, plus counts by status
- testgen_compare.md    the same as tables

On a GPU (``--device cuda`` or auto with one visible) it also times the original, with the same
timing plan, at the generated performance sizes and at every size of the record's performance
script, and reports time per call at each. On the CPU interpreter timing means nothing: only the
coverage part is produced (performance sizes chosen by bytes, not run). The TritonBench-G data is
read at run time ($TRITONFORGE_TRITONBENCH or ../shared/tritonbench_g); none of it is written here
except record names.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from tritonforge.config import load_settings  # noqa: E402
from tritonforge.model import CaseRole, Task  # noqa: E402
from tritonforge.runtime.evaluator import Evaluator, original_variant  # noqa: E402
from tritonforge.runtime.hardware import resolve_device  # noqa: E402
from tritonforge.runtime.timing import TimingPlan  # noqa: E402
from tritonforge.tasks.tritonbench import (  # noqa: E402
    META_PERF_END, META_PERF_PRELUDE, count_perf_inputs, load_harness, load_records, task_from_record,
)
from tritonforge.testgen.generate import TestgenOptions  # noqa: E402
from tritonforge.testgen.tritonbench import RecordOutcome, generate_for_record  # noqa: E402

STATUS_ORDER = ["ok", "no_perf", "no_correctness", "no_cases", "no_calls", "interpreter_limitation",
                "test_fails", "timeout", "error"]
PLAN = TimingPlan(rounds=5, round_ms=10.0, warmup_ms=10.0, flush_l2=True, cuda_graph=False)


_BYTES_SCRIPT = META_PERF_PRELUDE + r"""
        def size(x, depth=0):
            if isinstance(x, torch.Tensor):
                return x.numel() * x.element_size()
            if isinstance(x, (tuple, list)) and depth < 3:
                return sum(size(v, depth + 1) for v in x)
            if isinstance(x, dict) and depth < 3:
                return sum(size(v, depth + 1) for v in x.values())
            return 0
        results[name] = [size(x) for x in inst.input_tensors]
""" + META_PERF_END


def perf_script_bytes(record) -> list[int] | None:
    """Bytes of the tensors each of the record's performance inputs holds (built on the meta
    device in a throwaway process: nothing allocated; outputs the kernel allocates not counted)."""
    import subprocess

    try:
        proc = subprocess.run([sys.executable, "-c", _BYTES_SCRIPT], text=True, capture_output=True,
                              input=json.dumps({record.name: record.perf_source}), timeout=300)
        return json.loads(proc.stdout.strip().splitlines()[-1]).get(record.name)
    except (subprocess.TimeoutExpired, json.JSONDecodeError, IndexError):
        return None


def outcome_json(o: RecordOutcome) -> dict:
    r = o.result
    out = {"name": o.name, "status": o.status, "detail": o.detail[:300], "perf_entries": list(o.perf_entries)}
    if r is None:
        return out
    by_origin: dict[str, int] = {}
    for c in r.cases:
        by_origin[c.origin] = by_origin.get(c.origin, 0) + 1
    dropped_origin: dict[str, int] = {}
    for d in r.dropped:
        kind = "perf" if "perf" in d.case_id or "ladder" in d.case_id else (
            "odd" if "odd" in d.case_id else "trace")
        dropped_origin[kind] = dropped_origin.get(kind, 0) + 1
    out.update({
        "trace": {"ok": r.trace.ok, "driver": r.trace.driver, "calls": len(r.trace.calls),
                  "error": r.trace.error, "wall_s": round(r.trace.wall_s, 1),
                  "timed_out": r.trace.timed_out},
        "entries": list(r.entries),
        "entry_matches_perf_script": bool(set(r.entries) & set(o.perf_entries)),
        "cases": by_origin, "dropped": dropped_origin,
        "dropped_reasons": [f"{d.case_id}: {d.reason}" for d in r.dropped][:12],
        "perf_cases": [{"id": c.case.id, "bytes": c.bytes, "sizes": dict(c.sizes), "note": c.note,
                        "label": c.case.label, "median_us": c.median_ms * 1000 if c.median_ms else None}
                       for c in r.performance],
        "symbols": {tid: [{"name": s.name, "value": s.value, "kind": s.kind, "why": s.why}
                          for s in syms] for tid, syms in r.symbols},
        "notes": list(r.notes)[:12], "device": r.device, "timings": dict(r.timings),
        "failure_kind": r.failure_kind,
    })
    return out


def time_cases(evaluator: Evaluator, task: Task, ids: tuple[str, ...]) -> dict[str, float | str]:
    """Median us per call of the original at each case (or the failure's one line)."""
    if not ids:
        return {}
    ev = evaluator.evaluate(task, (original_variant(task),), purpose="testgen-compare", case_ids=ids,
                            verify=False, time=True, keep_going=True, plan=PLAN, use_store=False)
    res = ev.results[0]
    out: dict[str, float | str] = {t.case_id: t.median_ms * 1000 for t in res.timings}
    for f in res.case_failures:
        out[f.case_id] = f.one_line()[:120]
    if res.failure is not None:
        for i in ids:
            out.setdefault(i, res.failure.one_line()[:120])
    return out


def gpu_compare(o: RecordOutcome, record, harness: str, evaluator: Evaluator) -> dict:
    r = o.result
    data: dict = {}
    if r is not None and r.performance:
        gen_task = Task(name=o.name, source=o.source or Path(o.module_path).read_text(), entries=r.entries,
                        cases=tuple(c.case for c in r.performance), origin="testgen")
        data["generated_us"] = time_cases(evaluator, gen_task, tuple(c.case.id for c in r.performance))
    count = count_perf_inputs([record]).get(record.name)
    script_task = task_from_record(record, harness, count)
    perf = tuple(c.id for c in script_task.cases if c.role is CaseRole.PERFORMANCE)
    data["script_us"] = time_cases(evaluator, script_task, perf)
    gen = [v for v in data.get("generated_us", {}).values() if isinstance(v, float)]
    scr = [v for v in data["script_us"].values() if isinstance(v, float)]
    if gen and scr:
        data["summary"] = {"generated_max_us": max(gen), "script_median_us": statistics.median(scr),
                           "script_max_us": max(scr), "script_min_us": min(scr),
                           "script_sizes_under_generated": sum(1 for s in scr if s < max(gen)),
                           "script_sizes": len(scr)}
    return data


def markdown(rows: list[dict], counts: dict[str, int], device: str, total: int, command: str) -> str:
    lines = [f"# Testgen on TritonBench-G ({device})", "",
             f"Command: `{command}`", "",
             "The generator saw only each record's kernel module and test section; performance "
             "scripts were hidden from it. `ok`: at least one correctness case and one performance "
             "case survived validation on the original.", "",
             "| status | records |", "|---|---|"]
    lines += [f"| {s} | {counts[s]} |" for s in STATUS_ORDER if counts.get(s)]
    lines += [f"| **all** | {total} |", ""]
    lines += ["| record | status | trace | entries (= perf script's?) | correctness kept (trace+odd) | "
              "dropped | perf cases | perf script inputs | detail |", "|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        cases, dropped = row.get("cases", {}), row.get("dropped", {})
        tr = row.get("trace", {})
        trace = ("ok" if tr.get("ok") else "partial" if tr.get("calls") else "failed") if tr else "-"
        perf = ", ".join(f"{p['bytes'] / 2**20:.0f} MB" + (f" {p['median_us']:.0f} us" if p.get("median_us") else "")
                         for p in row.get("perf_cases", []))
        ents = ", ".join(row.get("entries", [])) + (" (yes)" if row.get("entry_matches_perf_script") else
                                                    " (no)" if row.get("entries") else "")
        detail = (row.get("detail") or "").replace("|", "/").replace("\n", " ")[:90]
        sb = [b for b in (row.get("script_input_bytes") or []) if b]
        script = (f"{len(sb)}: {min(sb) / 2**20:.1f}-{max(sb) / 2**20:.0f} MB" if sb else "-")
        lines.append(f"| {row['name']} | {row['status']} | {trace} | {ents} | "
                     f"{cases.get('trace', 0)}+{cases.get('odd', 0)} | {sum(dropped.values())} | {perf} | "
                     f"{script} | {detail} |")
    gpu = [r for r in rows if r.get("gpu")]
    if gpu:
        lines += ["", "## Generated performance sizes against the performance scripts' (time per call of "
                  "the original, us)", "",
                  "| record | generated (us) | script min | script median | script max | script sizes below generated max |",
                  "|---|---|---|---|---|---|"]
        for row in gpu:
            g, s = row["gpu"].get("generated_us", {}), row["gpu"].get("summary")
            gen = ", ".join(f"{v:.1f}" if isinstance(v, float) else "fail" for v in g.values()) or "-"
            if s:
                lines.append(f"| {row['name']} | {gen} | {s['script_min_us']:.1f} | {s['script_median_us']:.1f} | "
                             f"{s['script_max_us']:.1f} | {s['script_sizes_under_generated']}/{s['script_sizes']} |")
            else:
                lines.append(f"| {row['name']} | {gen} | - | - | - | - |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("out", help="folder for the JSON and Markdown results")
    p.add_argument("--names", help="comma-separated record names (default: all, sorted)")
    p.add_argument("--limit", type=int, default=0, help="only the first N records (sorted by name)")
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    p.add_argument("--data", default=None, help="the TritonBench-G folder (kernels.json)")
    p.add_argument("--trace-timeout", type=float, default=120.0)
    p.add_argument("--case-timeout", type=float, default=120.0)
    p.add_argument("--budget", type=float, default=0.0, help="stop starting records after this many s")
    p.add_argument("--record-budget", type=float, default=600.0,
                   help="validation seconds per record; cases left then are dropped (default 600)")
    p.add_argument("--no-stability", action="store_true", help="skip the original-vs-itself check")
    p.add_argument("--run-dir", default=None, help="scratch folder (default OUT/work)")
    p.add_argument("--shard", default=None, metavar="K/N",
                   help="only every N-th name from the K-th (0-based), so that N processes can share "
                        "the sweep; with $TRITONFORGE_GPU_LOCK set their timed runs take turns")
    p.add_argument("--summary-only", action="store_true",
                   help="start no record: write the summary of the records already done")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    out = Path(args.out)
    (out / "records").mkdir(parents=True, exist_ok=True)
    (out / "specs").mkdir(exist_ok=True)
    work = Path(args.run_dir) if args.run_dir else out / "work"
    settings = load_settings(overrides={"device": args.device, "case_timeout_s": args.case_timeout,
                                        "run_dir": str(work)})
    device = resolve_device(settings.device)
    records = load_records(args.data)
    names = [n.strip() for n in args.names.split(",")] if args.names else sorted(records)
    if args.limit:
        names = names[: args.limit]
    todo = names
    if args.shard:
        k, n = (int(x) for x in args.shard.split("/"))
        if not 0 <= k < n:
            p.error(f"--shard {args.shard}: K must be in 0..N-1")
        todo = names[k::n]
    options = TestgenOptions(trace_timeout_s=args.trace_timeout, stability=not args.no_stability,
                             budget_s=args.record_budget or None)
    harness = load_harness(args.data) if device == "cuda" else ""
    started = time.time()
    evaluator = Evaluator(settings, work / "compare", store=None, device=device) \
        if device == "cuda" and not args.summary_only else None
    try:
        for name in ([] if args.summary_only else todo):
            path = out / "records" / f"{name}.json"
            if path.exists():
                row = json.loads(path.read_text())
                if "script_input_bytes" not in row:          # written by an older run of this script
                    row["script_input_bytes"] = perf_script_bytes(records[name])
                    path.write_text(json.dumps(row, indent=1, default=str))
                continue
            if args.budget and time.time() - started > args.budget:
                print(f"budget spent: stopping before {name}", flush=True)
                break
            t0 = time.time()
            outcome = generate_for_record(records[name], settings, work, options=options, device=device)
            row = outcome_json(outcome)
            row["script_input_bytes"] = perf_script_bytes(records[name])
            if outcome.result is not None and outcome.result.spec_text:
                (out / "specs" / f"{name}.toml").write_text(outcome.result.spec_text)
            if evaluator is not None and outcome.result is not None and outcome.result.trace.calls:
                row["gpu"] = gpu_compare(outcome, records[name], harness, evaluator)
            row["wall_s"] = round(time.time() - t0, 1)
            path.write_text(json.dumps(row, indent=1, default=str))
            print(f"{name:32s} {row['status']:24s} {row['wall_s']:6.1f}s {row.get('detail', '')[:80]}",
                  flush=True)
    finally:
        if evaluator is not None:
            evaluator.close()
    rows = [json.loads((out / "records" / f"{n}.json").read_text()) for n in names
            if (out / "records" / f"{n}.json").exists()]
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    command = "python scripts/testgen_compare.py " + " ".join(sys.argv[1:] if argv is None else argv)
    if args.summary_only:   # this run swept nothing: it must not pass for the sweep's command
        command += " (a summary of records swept by earlier runs; their commands are in the README)"
    summary = {"device": device, "records": len(rows), "counts": counts, "command": command, "rows": rows}
    (out / "testgen_compare.json").write_text(json.dumps(summary, indent=1, default=str))
    (out / "testgen_compare.md").write_text(markdown(rows, counts, device, len(rows), command))
    print(json.dumps(counts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
