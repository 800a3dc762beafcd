"""``bench optimize`` (a pass), ``bench reverify`` and ``bench isolation`` (driver side).

A pass: the records to run (``PassOptions``), less those already in ``records.jsonl`` made by
this engine with these settings (others are refused unless ``--allow-mixed-engines``), handed
to the per-GPU or the Ray executor; each finished record is appended to ``records.jsonl`` and
``--out`` is rewritten after each, so a process killed at any point leaves both readable. At the
end (and for a call with nothing left to run) ``LATEST.json`` and the Markdown tables are
written from ``records.jsonl`` alone.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import signal
import sys
import time
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from ..errors import ConfigError
from ..model.serialize import to_jsonable
from ..profile.session import measure_peaks_isolated, ncu_lock_mode
from ..report.tables import render_table
from ..runtime.hardware import resolve_device
from ..store import RunStore
from ..tasks.tritonbench import load_records, load_tasks, split_source
from .baseline import BaselineRecord  # noqa: F401 - registers the stored record types
from .engine import engine_id, settings_hash
from .isolation import measure
from .lane import LaneConfig
from .latest import RENDERERS, read_subset, summarize, write_latest
from .local import LocalGpuExecutor, visible_gpus
from .optimize import choose_subset
from .options import IsolationOptions, PassOptions, ReverifyOptions
from .passes import Job, PassOutcome, run_pass
from .ray_exec import RayExecutor
from .records import PassRecord, RecordRef, append_record, check_one_engine, read_records
from .reverify import reverify_record


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _installed(package: str) -> str:
    try:
        return version(package)
    except PackageNotFoundError:
        return ""


def kernel_refs(specs: tuple[str, ...]) -> list[RecordRef]:
    """``PATH`` or ``PATH=SPEC`` entries as records named by the file's stem."""
    refs = []
    for item in specs:
        path, _, spec = item.partition("=")
        p = Path(path)
        if not p.exists():
            raise ConfigError(f"--kernel {path}: no such file", hint="give a kernel file's path")
        refs.append(RecordRef(p.stem, "kernel file", len(p.read_text().splitlines()),
                              str(p.resolve()), str(Path(spec).resolve()) if spec else None))
    return refs


def _tritonbench_refs(names: list[str]) -> list[RecordRef]:
    records = load_records()
    missing = [n for n in names if n not in records]
    if missing:
        raise ConfigError(f"not in the TritonBench-G data: {', '.join(missing)}",
                          hint="list the names with `tritonforge bench list`")
    return [RecordRef(n, records[n].category, len(split_source(records[n].source)[0].splitlines()))
            for n in names]


def pass_names(options: PassOptions) -> list[str]:
    """The TritonBench-G records of the pass (see ``PassOptions``)."""
    if options.names:
        return list(options.names)
    if options.names_file:
        return read_subset(options.names_file)
    if options.kernels:
        return []
    if not Path(options.baseline_store).exists():
        raise ConfigError(f"no records named and no baseline store at {options.baseline_store}",
                          hint="pass --names, --names-file (e.g. bench/results/runnable.txt) or "
                               "--baseline-store")
    with RunStore(options.baseline_store) as base:
        # runnable by BENCHMARK.md: the test section ran and the perf script ran at >= 1 size
        runnable = sorted(k for k, rec in base.records("baseline-run") if rec.test_ok and rec.perf_ok)
    if options.size:
        records = load_records()
        return choose_subset([(n, records[n].category) for n in runnable if n in records], options.size)
    return runnable


def _executor(options: PassOptions, base: LaneConfig, device: str):
    if options.executor == "ray":
        init = {"num_gpus": options.ray_num_gpus} if options.ray_num_gpus and not options.address else {}
        return RayExecutor(base, options.address or None, init_kwargs=init)
    if options.executor != "local":
        raise ConfigError(f"--executor {options.executor}: expected local or ray")
    gpus = list(options.gpus) or visible_gpus() or (["0"] if device == "cpu" else [])
    return LocalGpuExecutor(gpus, base)


def _write_out(path: str, data: dict) -> None:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_suffix(p.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=1))
    tmp.replace(p)


def write_pass_outputs(options: PassOptions, records: dict[str, PassRecord], names: list[str],
                       engine_commit: str) -> tuple[Path, Path]:
    """LATEST.json and the Markdown tables, from ``records`` (records.jsonl) only."""
    mine = [records[n] for n in names if n in records]
    gpu = next((r.gpu for r in mine if r.gpu), "")
    groups = {Path(f).stem: read_subset(f) for f in options.group_files}
    summary = summarize(records, names, read_subset(options.subset_file), groups=groups,
                        date=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                        gpu=gpu, torch=_installed("torch"), triton=_installed("triton"),
                        per_kernel_s=options.per_kernel_s, engine_commit=engine_commit)
    latest = write_latest(summary, options.latest)
    tables = Path(options.tables) if options.tables else latest.with_name("PASS.md")
    tables.write_text(RENDERERS["md"](summary))
    return latest, tables


def _measure_peaks_once() -> None:
    """The GPU's peaks (the roofline's), measured before the lanes start, when nothing holds the
    GPU: every lane's profile then reads them from the machine's cache. Measured by the first
    profile of each lane instead, they waited for the exclusive GPU lock behind that lane's own
    verifications: on four fresh H100s (engine b84f85a408d7, 2026-11-28) attn_fwd_causal's
    profile step that waits for the peaks beside the static compile (bounded at 30 s) took 69 s
    of a 120 s record, the first of its lane, which then timed one round. A failure is said and
    left to the profiles, which note it in their turn."""
    started = time.monotonic()
    peaks, problem = measure_peaks_isolated()
    _say(f"GPU peaks for the roofline: {problem.splitlines()[0][:200]}" if peaks is None else
         f"GPU peaks for the roofline: {peaks.dram_bw_gbs:,.0f} GB/s copy "
         f"({time.monotonic() - started:.0f} s; cached for every lane)")


class _Stopped(Exception):
    """SIGTERM during a pass: the running records are dropped, the written ones summarised."""


def run_pass_command(options: PassOptions, settings) -> int:
    """``bench optimize``; ``--out`` is written even when the pass stops on an error."""
    try:
        return _run_pass(options, settings)
    except Exception as exc:
        if options.out:
            _write_out(options.out, {"finished": False, "error": f"{type(exc).__name__}: {exc}"[:2000]})
        raise


def _run_pass(options: PassOptions, settings) -> int:
    ncu_lock_mode()         # a bad $TRITONFORGE_NCU_LOCK stops here, not in each record's profile
    engine = engine_id()
    s_hash = settings_hash(settings, options.per_kernel_s)
    refs = _tritonbench_refs(pass_names(options)) + kernel_refs(options.kernels)
    names = [r.name for r in refs]
    unknown = sorted(set(options.redo) - set(names))
    if unknown:
        raise ConfigError(f"--redo names records not in the pass: {', '.join(unknown)}",
                          hint="--redo takes names of the pass's records")
    done = check_one_engine(read_records(options.records), engine, s_hash, options.allow_mixed_engines)
    todo = [Job(r, redo=r.name in options.redo) for r in refs
            if r.name not in done or r.name in options.redo]
    if options.redo:
        _say(f"--redo {', '.join(options.redo)}: DEBUGGING ONLY, this pass is not publishable")
    if any(r.mixed for r in done.values()):
        _say(f"--allow-mixed-engines: {sum(r.mixed for r in done.values())} record(s) of another "
             "engine or settings kept; this pass is not publishable")
    _say(f"pass of {len(refs)} record(s), engine {engine.label}, settings {s_hash}: "
         f"{len(refs) - len(todo)} done, {len(todo)} to run")
    state: dict = {"engine_commit": engine.commit, "engine_source": engine.source_hash,
                   "settings": s_hash, "records": options.records, "names": names,
                   "written": [], "left": [j.ref.name for j in todo], "cut": [], "failed": [],
                   "finished": False}
    if options.out:
        _write_out(options.out, state)
    outcome = PassOutcome((), (), (), (), 0.0)
    if todo and (options.budget_s is None or options.budget_s >= options.per_kernel_s):
        device = resolve_device(settings.device)
        # absolute: a Ray worker's working folder is not the driver's
        settings = settings.replace(run_dir=str(Path(settings.run_dir).resolve()))
        base = LaneConfig(settings, str(Path(settings.run_dir) / "lanes"), options.jobs,
                          options.per_kernel_s,
                          "" if options.no_sweep_times else str(Path(options.baseline_store).resolve()))
        if device == "cuda" and options.executor == "local":
            _measure_peaks_once()
        executor = _executor(options, base, device)

        def on_record(record: PassRecord) -> None:
            state["written"].append(record.name)
            state["left"] = [n for n in state["left"] if n != record.name]
            if options.out:
                _write_out(options.out, state)

        def stop(signum, frame):     # `timeout` ends the call: stop the lanes, keep the records
            raise _Stopped(f"signal {signum}: the pass stops; records written so far are kept")

        signal.signal(signal.SIGTERM, stop)
        try:
            outcome = run_pass(todo, executor, records_path=options.records, engine=engine,
                               settings_hash=s_hash, per_kernel_s=options.per_kernel_s,
                               budget_s=options.budget_s, progress=_say, on_record=on_record)
        except _Stopped as exc:
            # LATEST.json and the tables are still written from the records (on four H100s a
            # call's timeout came while the lanes shut down, and they were not)
            _say(str(exc))
            state["stopped"] = str(exc)
        finally:
            executor.close()
    # marks the records another engine made (kept only under --allow-mixed-engines)
    records = check_one_engine(read_records(options.records), engine, s_hash,
                               options.allow_mixed_engines)
    latest, tables = write_pass_outputs(options, records, names, engine.commit)
    rest = [n for n in names if n not in records]
    state.update(left=rest, cut=list(outcome.cut), failed=[list(f) for f in outcome.failed],
                 finished=not rest, latest=str(latest), tables=str(tables),
                 wall_s=round(outcome.wall_s, 1))
    if options.out:
        _write_out(options.out, state)
    print(tables.read_text())
    print(f"{len(outcome.written)} record(s) written this call; {len(rest)} left"
          + (f" ({len(outcome.cut)} cut by the deadline, started again next call)" if outcome.cut else "")
          + (f"; {len(outcome.failed)} failed: " + ", ".join(n for n, _ in outcome.failed)
             if outcome.failed else ""))
    return 0


def reverify_command(options: ReverifyOptions, settings) -> int:
    """Re-verify accepted kernels of ``records.jsonl`` (``bench.reverify``), one fresh worker
    each; each verdict is appended as the record's new line."""
    start = time.monotonic()
    records = read_records(options.records)
    refs = {r.name: r for r in kernel_refs(options.kernels)}
    chosen = [r for r in records.values() if r.was_accepted
              and (not options.names or r.name in options.names)
              and (options.again or r.reverified is None)]
    wrong = 0
    for i, rec in enumerate(chosen):
        if options.budget_s is not None and time.monotonic() - start > options.budget_s:
            _say(f"budget over: {len(chosen) - i} left for a later call")
            break
        ref = refs.get(rec.name) or RecordRef(rec.name, rec.category, rec.source_lines)
        verdict = reverify_record(rec, ref, settings, Path(settings.run_dir) / "reverify" / rec.name)
        append_record(options.records, dataclasses.replace(rec, reverified=verdict.ok,
                                                           reverify_note=verdict.note))
        wrong += not verdict.ok
        _say(f"{rec.name}: {'ok' if verdict.ok else 'WRONG'}: {verdict.note}")
    print(f"{len(chosen)} accepted kernel(s) to re-verify; {wrong} wrong")
    return 0


def isolation_command(options: IsolationOptions, settings) -> int:
    if len(options.gpus) != 2:
        raise ConfigError(f"--gpus {','.join(options.gpus)}: give two GPUs, the timed one first",
                          hint="e.g. --gpus 0,1")
    tasks = load_tasks(list(options.names) or None)
    cases = measure(tasks, settings.replace(device="cuda"), Path(settings.run_dir) / "isolation",
                    options.gpus[0], options.gpus[1], progress=_say, busy_cores=options.busy_cores)
    rows = [(c.name, c.case_id, f"{c.alone_ms:.4f}", f"{c.beside_ms:.4f}", f"{c.alone_again_ms:.4f}",
             f"{c.ratio:.4f}", f"{c.drift:.4f}", "yes" if c.long else "no") for c in cases]
    print(render_table(("record", "case", "alone ms", "beside ms", "alone again ms",
                        "beside/alone", "drift", ">50us"), rows))
    long = [c for c in cases if c.long]
    within = sum(abs(c.ratio - 1) <= 0.02 for c in long)
    print(f"\n{within} of {len(long)} cases over 50 us within 2% beside a busy neighbour")
    if options.out:
        _write_out(options.out, {"gpus": list(options.gpus), "busy_cores": options.busy_cores,
                                 "within_2pct": within,
                                 "cases_over_50us": len(long), "cases": to_jsonable(cases)})
    return 0
