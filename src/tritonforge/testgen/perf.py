"""Performance cases: sizes large enough to measure, and proof that they measure the kernel.

Per entry, the template of its largest traced call is scaled along a ladder (``cases.perf_ladder``:
the sizes that scale doubled, smallest first) until one call moves ``perf_bytes``. On a GPU the
traced size and every rung from ``perf_bytes / 64`` up are run and timed with a short plan; the
first rung that moves ``perf_bytes`` or runs ``perf_us`` above the traced size's time (the
overhead floor) becomes ``perf-1`` and the rung about four times larger ``perf-2``, and the time
must grow between them (else the note says so: the scaled sizes are not what the kernel's work
depends on). On the CPU interpreter timing means nothing: sizes are chosen
by bytes only, not run (unless asked), and marked so.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ..model import CaseRole, Task
from .cases import Unrepresentable, call_bytes, launch_bytes, make_case, materialize, perf_ladder
from .dims import Template, symbol_values
from .model import Dropped, GeneratedCase
from .validate import QUICK_PLAN, run_original


ENOUGH = 0.9         # "at least about 64 MB": a rung within 10% of the target counts


@dataclass(frozen=True)
class PerfChoice:
    cases: tuple[GeneratedCase, ...]
    notes: tuple[str, ...]
    dropped: tuple[Dropped, ...]


def _mb(n: int) -> str:
    return f"{n / 2**20:.1f} MB" if n >= 2**20 else f"{n / 1024:.1f} KB"


def explain_scaling(template: Template, traced: dict[str, int], values: dict[str, int],
                    fixed: dict[str, int]) -> str:
    changed = [f"{k} {traced.get(k)} -> {v}" for k, v in sorted(values.items())
               if traced.get(k) != v and k not in fixed]
    user = [f"{k} = {v} (fixed by you)" for k, v in sorted(fixed.items()) if k in values]
    kept = [f"{s.name} = {s.value} ({s.kind}: {s.why})" for s in template.symbols
            if s.kind not in ("free", "block_following", "aligned") and s.name not in fixed]
    parts = []
    if changed:
        parts.append("scaled " + ", ".join(changed))
    if user:
        parts.append(", ".join(user))
    if kept:
        parts.append("kept " + "; ".join(kept))
    return "; ".join(parts) or "nothing scales: the traced size"


def choose_perf_cases(templates: list[Template], entries: tuple[str, ...], builder: Any,
                      evaluator: Any, task: Task, options: Any, interpreted: bool) -> PerfChoice:
    cases: list[GeneratedCase] = []
    notes: list[str] = []
    dropped: list[Dropped] = []
    fixed_all = dict(options.fixed)
    known = {s.name for t in templates for s in t.symbols}
    unknown = sorted(set(fixed_all) - known)
    if unknown:
        notes.append(f"fixed sizes {', '.join(unknown)} name no size of the traced calls "
                     f"(known: {', '.join(sorted(known))})")
    for entry in entries:
        mine = [t for t in templates if t.function == entry]
        if not mine:
            continue

        def size(t: Template, c) -> tuple[int, int]:
            # the call's own tensors first; where it takes none (it builds them from integers),
            # the tensors its kernels were launched with tell the largest call
            return call_bytes(t, c, symbol_values(t, c)), launch_bytes(c)

        template = max(mine, key=lambda t: max(size(t, c) for c in t.calls))
        call = max(template.calls, key=lambda c: size(template, c))
        fixed = {k: v for k, v in fixed_all.items() if k in {s.name for s in template.symbols}}
        params = builder.trace.signature(entry)

        def representable(values: dict[str, int], template=template, call=call, params=params) -> bool:
            try:
                materialize(template, call, values, params)
            except Unrepresentable:
                return False
            return True

        ladder = perf_ladder(template, call, target_bytes=options.perf_bytes, fixed=fixed,
                             valid=representable)
        traced = symbol_values(template, call)
        prefix = "" if len(entries) == 1 else f"{entry}-"

        def build(case_id: str, values: dict[str, int], note: str) -> GeneratedCase | None:
            try:
                built = materialize(template, call, values, params)
            except Unrepresentable as exc:
                notes.append(f"{case_id}: skipped, {exc}")
                return None
            return GeneratedCase(make_case(case_id, CaseRole.PERFORMANCE, built, 1, note), "perf",
                                 note, built.bytes, tuple(sorted(values.items())))

        if len(ladder) == 1 and ladder[0].bytes < options.perf_bytes and not fixed:
            notes.append(f"{entry}: no size scales ({explain_scaling(template, traced, traced, fixed)}); "
                         f"the performance case is the largest traced call ({_mb(ladder[0].bytes)})")
        if interpreted:
            first = next((i for i, r in enumerate(ladder) if r.bytes >= ENOUGH * options.perf_bytes),
                         len(ladder) - 1)
            later = range(first + 1, len(ladder))
            picks = [first] + ([min(later, key=lambda i: abs(ladder[i].bytes / max(ladder[first].bytes, 1) - 4))]
                               if later else [])
            made = []
            for n, i in enumerate(picks):
                values = dict(ladder[i].values)
                why = explain_scaling(template, traced, values, fixed)
                g = build(f"{prefix}perf-{n + 1}", values,
                          f"{_mb(ladder[i].bytes)} per call; {why}; sized by bytes only "
                          f"(CPU interpreter: not timed)")
                if g is not None:
                    made.append(g)
            if made and options.perf_on_cpu and evaluator is not None:
                probe = replace(task, cases=tuple(g.case for g in made))
                ran = run_original(evaluator, probe, tuple(g.case.id for g in made))
                dropped += ran.dropped
                made = [g for g in made if g.case.id in ran.kept]
            elif made:
                notes.append(f"{entry}: performance sizes chosen by bytes only and not run "
                             f"(CPU interpreter); run testgen on a GPU to time and check them")
            cases += made
            continue
        cases += _gpu_choice(template, entry, ladder, traced, fixed, build, evaluator, task, options,
                             prefix, notes, dropped)
    return PerfChoice(tuple(cases), tuple(notes), tuple(dropped))


def _gpu_choice(template, entry, ladder, traced, fixed, build, evaluator, task, options, prefix,
                notes, dropped) -> list[GeneratedCase]:
    """Time the ladder on the original; pick sizes whose time is the kernel's, not overhead.

    The traced size is timed too: its time is the floor (launch, Python and timer overhead, about
    100 us per call on an H200 with the default timer), and a size counts as long enough when
    it moves ``perf_bytes`` or runs ``perf_us`` above that floor.
    """
    floor_bytes = options.perf_bytes / 64
    rungs = sorted({0} | {i for i, r in enumerate(ladder) if r.bytes >= floor_bytes} | {len(ladder) - 1})
    made = {}
    for i in rungs:
        g = build(f"{prefix}ladder-{i}", dict(ladder[i].values), "")
        if g is not None:
            made[i] = g
    if not made:
        return []
    if evaluator is None:
        notes.append(f"{entry}: performance sizes not validated (validation off)")
        first = next((i for i in made if ladder[i].bytes >= ENOUGH * options.perf_bytes), max(made))
        return [_final(made[first], f"{prefix}perf-1", None, template, traced, ladder[first], fixed)]
    probe = replace(task, cases=tuple(g.case for g in made.values()))
    ran = run_original(evaluator, probe, tuple(g.case.id for g in made.values()), time=True,
                       plan=QUICK_PLAN)
    times = dict(ran.median_ms)
    ok = [i for i in sorted(made) if made[i].case.id in ran.kept and made[i].case.id in times]
    failed = [i for i in sorted(made) if made[i].case.id not in ran.kept]
    if failed:
        reason = next((d.reason for d in ran.dropped if d.case_id == made[failed[0]].case.id), "")
        notes.append(f"{entry}: the original failed at {_mb(ladder[failed[0]].bytes)} "
                     f"({reason[:120]}); larger sizes not used")
        ok = [i for i in ok if i < failed[0]]
    if not ok:
        dropped.append(Dropped(f"{prefix}perf-1", "the original failed on every performance size"))
        return []
    floor_ms = min(times[made[i].case.id] for i in ok)
    notes.append(f"{entry}: timed sizes " + ", ".join(
        f"{_mb(ladder[i].bytes)}: {times[made[i].case.id] * 1000:.0f} us" for i in ok)
        + f" (floor {floor_ms * 1000:.0f} us)")
    target_ms = options.perf_us / 1000.0
    scaled = [i for i in ok if i > 0] or ok
    first = next((i for i in scaled if ladder[i].bytes >= ENOUGH * options.perf_bytes
                  or times[made[i].case.id] - floor_ms >= target_ms), scaled[-1])
    out = [_final(made[first], f"{prefix}perf-1", times[made[first].case.id], template, traced,
                  ladder[first], fixed)]
    bigger = [i for i in ok if i > first]
    if bigger:
        second = min(bigger, key=lambda i: abs(ladder[i].bytes / max(ladder[first].bytes, 1) - 4))
        t1, t2 = times[made[first].case.id], times[made[second].case.id]
        out.append(_final(made[second], f"{prefix}perf-2", t2, template, traced, ladder[second], fixed))
        growth, more = t2 / max(t1, 1e-9), ladder[second].bytes / max(ladder[first].bytes, 1)
        if growth < 1.5 and more >= 3:
            notes.append(f"{entry}: time grew only {growth:.2f}x for {more:.1f}x the bytes "
                         f"({t1 * 1000:.1f} us -> {t2 * 1000:.1f} us): the scaled sizes may not be "
                         f"what the kernel's work depends on; fix sizes with --set")
    return out


def _final(g: GeneratedCase, case_id: str, median_ms: float | None, template: Template,
           traced: dict[str, int], rung: Any, fixed: dict[str, int]) -> GeneratedCase:
    why = explain_scaling(template, traced, dict(rung.values), fixed)
    timing = f"{median_ms * 1000:.1f} us on the original; " if median_ms is not None else ""
    note = f"{_mb(rung.bytes)} per call; {timing}{why}"
    return replace(g, case=replace(g.case, id=case_id), note=note, median_ms=median_ms)
