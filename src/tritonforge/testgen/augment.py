"""Generated cases for any task, however it was loaded: trace the calls its own cases make, add a
handful of cases drawn from them, validated on the original (driver side).

A TritonBench-G task is its test section plus its performance script's inputs; a GEMM record
tested by one 256x128x256 call whose performance sizes all have K a multiple of 128 accepts a
kernel that drops the last partial K tile, accumulates in fp16 or calls torch.matmul above a
size. Its own cases cannot tell; cases at sizes that divide no block size, with unusual values
and non-contiguous views, can. ``augment_task``:

1. writes the task's source and a *driver* (the test sections and captured-call sources its cases
   run, and its small spec calls written out as code that draws their inputs), then
2. runs ``generate.generate`` on them with the variety options: odd sizes, one case per value and
   layout variety (``cases.VARIETIES``) at sizes that divide no block, no performance cases, each
   validated on the task's own source (a case the original fails, or whose views it does not
   handle, is dropped with the reason), then
3. returns the task with the kept cases added as correctness cases marked ``generated`` (ids
   ``gen-...``), which the search verifies before it accepts a candidate.

Performance-script inputs are not traced (GPU-sized; the test section covers the same calls).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..config import Settings
from ..model import CapturedCall, Case, CaseRole, SpecCall, Task, TestSectionCall
from ..model.progress import ProgressEvent, ProgressSink
from ..model.task import spec_elements
from ..runtime.evaluator import Evaluator
from ..runtime.hardware import resolve_device
from .cases import VARIETIES
from .generate import TestgenOptions, generate
from .model import Dropped

log = logging.getLogger(__name__)

PREFIX = "gen-"


@dataclass(frozen=True)
class AugmentOptions:
    """How many cases to add. The search verifies every candidate on them: a handful."""

    max_odd: int = 2                       # odd-size cases per traced call structure ...
    max_odd_total: int = 4                 # ... and over all of them
    variety: tuple[str, ...] = tuple(VARIETIES)
    seeds: int = 1                         # each generated case is one draw of unusual values
    max_spec_calls: int = 3                # spec calls written into the driver (the smallest)
    max_spec_elements: int = 1 << 16       # ... and only those this small
    trace_timeout_s: float = 180.0
    budget_s: float | None = 300.0         # validation time; cases left when it ends are dropped
    stability: bool = True
    max_cases: int = 8                     # kept per task, in turn from each call structure
    big_bytes: int = 16 << 20              # the large odd case: at most this many bytes ...
    big_bytes_interpreted: int = 2 << 20   # ... and this on the CPU interpreter (every candidate
                                           # runs it: a 1025x513x1025 GEMM took minutes there)


@dataclass(frozen=True)
class Augmented:
    """The task with its generated cases, and what happened to the others."""

    task: Task
    added: tuple[str, ...]
    dropped: tuple[Dropped, ...] = ()
    notes: tuple[str, ...] = field(default=())
    seconds: float = 0.0
    traced: bool = False                   # a driver ran and recorded kernel-launching calls


def driver_source(task: Task, options: AugmentOptions = AugmentOptions()) -> str:
    """Code that makes the calls the task's cases make, run in a copy of its module's namespace:
    its test sections and captured-call sources once each, and its smallest spec calls with
    inputs drawn as the worker draws them."""
    blocks: list[str] = []
    seen: set[str] = set()
    for case in task.cases:
        r = case.recipe
        if isinstance(r, (TestSectionCall, CapturedCall)) and r.source not in seen:
            seen.add(r.source)
            blocks.append(r.source)
    specs = sorted(((spec_elements((c.recipe.args, tuple(v for _, v in c.recipe.kwargs))), c.id, c.recipe)
                    for c in task.cases if isinstance(c.recipe, SpecCall)), key=lambda t: (t[0], t[1]))
    specs = [s for s in specs if s[0] <= options.max_spec_elements][: options.max_spec_calls]
    if specs:
        lines = ["import torch as _tf_torch",
                 "from tritonforge.model import TensorSpec",
                 "from tritonforge.runtime.inputs import build_args as _tf_build",
                 '_tf_device = "cuda" if _tf_torch.cuda.is_available() else "cpu"']
        for _, case_id, call in specs:
            lines += [f"# case {case_id}",
                      "_tf_g = _tf_torch.Generator().manual_seed(0)",
                      f"_tf_args = _tf_build({call.args!r}, _tf_g, _tf_device)",
                      f"_tf_kwargs = dict(_tf_build({call.kwargs!r}, _tf_g, _tf_device))",
                      f"{call.entry}(*_tf_args, **_tf_kwargs)"]
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def _rename(case: Case, seeds: int) -> Case:
    return replace(case, id=PREFIX + case.id, seeds=tuple(range(seeds)), generated=True,
                   role=CaseRole.CORRECTNESS)


def augment_task(task: Task, settings: Settings, work_dir: str | Path, *,
                 options: AugmentOptions = AugmentOptions(), device: str | None = None,
                 evaluator: Evaluator | None = None) -> Augmented:
    """``task`` with generated correctness cases added (see the module doc). Never raises for a
    task it cannot augment: the task comes back unchanged, with the reason in ``notes``."""
    start = time.perf_counter()
    if task.generated_cases:
        return Augmented(task, (), notes=("the task has generated cases already",))
    driver = driver_source(task, options)
    if not driver.strip():
        return Augmented(task, (), notes=("no case of the task can be traced (performance-script "
                                          "inputs only, or spec calls too large)",))
    dev = device or (evaluator.device if evaluator is not None else resolve_device(settings.device))
    work = Path(work_dir) / f"augment-{task.source_hash}"
    work.mkdir(parents=True, exist_ok=True)
    module_path = work / f"{_module_name(task.name)}.py"
    module_path.write_text(task.source, encoding="utf-8")
    section_path = work / "driver.py"
    section_path.write_text(driver, encoding="utf-8")
    opts = TestgenOptions(perf=False, seeds=options.seeds, max_traced=0, max_traced_total=0,
                          max_odd=options.max_odd, max_odd_total=options.max_odd_total,
                          variety=options.variety, stability=options.stability, probe_tied=True,
                          stable_only=True,
                          big_bytes=options.big_bytes_interpreted if dev == "cpu" else options.big_bytes,
                          trace_timeout_s=options.trace_timeout_s, budget_s=options.budget_s)
    try:
        result = generate(module_path, settings, work, options=opts, section_path=section_path,
                          device=dev, source=task.source, evaluator=evaluator)
    except Exception as exc:  # noqa: BLE001 - a generator bug must not cost the task its run
        log.warning("generated cases for %s failed: %s", task.name, exc)
        return Augmented(task, (), notes=(f"no generated cases: {type(exc).__name__}: {exc}",),
                         seconds=time.perf_counter() - start)
    existing = {c.recipe for c in task.cases}
    # the traced call re-drawn duplicates the task's own cases: only what they lack is added
    new = _capped([_rename(g.case, options.seeds) for g in result.correctness
                   if g.origin != "trace" and g.case.recipe not in existing], options.max_cases)
    notes = list(result.notes)
    if result.trace.error and not result.trace.ok:
        notes.insert(0, f"the driver did not run to its end: {result.trace.error[:200]}")
    dropped = tuple(replace(d, case_id=PREFIX + d.case_id) for d in result.dropped)
    return Augmented(replace(task, cases=task.cases + tuple(new)), tuple(c.id for c in new),
                     dropped, tuple(notes), time.perf_counter() - start,
                     traced=any(c.n_launches for c in result.trace.calls))


def _capped(cases: list[Case], limit: int) -> list[Case]:
    """At most ``limit`` cases, taken in turn from each call structure (ids ``gen-t<N>-...``) so
    that every traced entry keeps some, in the order they were generated."""
    groups: dict[str, list[Case]] = {}
    for c in cases:
        rest = c.id[len(PREFIX):]
        key = rest.split("-", 1)[0] if rest.startswith("t") and rest.split("-", 1)[0][1:].isdigit() else ""
        groups.setdefault(key, []).append(c)
    out: list[Case] = []
    while len(out) < limit and any(groups.values()):
        for key in list(groups):
            if groups[key] and len(out) < limit:
                out.append(groups[key].pop(0))
    return sorted(out, key=cases.index)


def _module_name(name: str) -> str:
    safe = "".join(ch if ch.isalnum() or ch == "_" else "_" for ch in name)
    return safe if safe and not safe[0].isdigit() else f"m_{safe}"


MIN_TRACE_S = 20.0     # the least a trace gets: starting its process with CUDA takes ~10 s


def with_generated_cases(task: Task, settings: Settings, work_dir: str | Path,
                         evaluator: Evaluator | None = None,
                         progress: ProgressSink | None = None,
                         budget_s: float | None = None) -> Task:
    """``task`` with generated cases when ``settings.generated_cases`` is on ("auto": on the GPU)
    (the entry points' hook before a search), saying in one ``progress`` event what was added and
    dropped. ``budget_s`` bounds the tracing and validation (default:
    ``settings.generated_cases_budget_s``)."""
    return generated_cases(task, settings, work_dir, evaluator, progress, budget_s).task


def generated_cases(task: Task, settings: Settings, work_dir: str | Path,
                    evaluator: Evaluator | None = None, progress: ProgressSink | None = None,
                    budget_s: float | None = None) -> Augmented:
    """``with_generated_cases`` with what happened: the cases added and dropped and the seconds
    (a task left as it was, when generated cases are off, has none)."""
    if settings.generated_cases == "off":
        return Augmented(task, ())
    device = evaluator.device if evaluator is not None else resolve_device(settings.device)
    if settings.generated_cases == "auto" and device == "cpu":
        return Augmented(task, ())
    budget = settings.generated_cases_budget_s if budget_s is None else budget_s
    # the trace is bounded by the budget too: an H100 pass at 120 s a record (budget 30 s) spent
    # 74 s on one record's generated cases under the fixed 180 s trace limit
    aug = augment_task(task, settings, work_dir, device=device, evaluator=evaluator,
                       options=AugmentOptions(budget_s=budget, trace_timeout_s=min(
                           AugmentOptions.trace_timeout_s, max(budget, MIN_TRACE_S))))
    failed = sum(d.refused for d in aug.dropped)
    if progress is not None:
        progress(ProgressEvent(
            phase="cases", elapsed_s=aug.seconds,
            message=f"{task.name}: {len(aug.added)} generated case(s) added in "
                    f"{aug.seconds:.0f} s"
                    + (f", {failed} dropped (the original fails them)" if failed else "")
                    + (f"; {aug.notes[0][:120]}" if not aug.added and aug.notes else "")))
    return aug
