"""The size dispatch's final check (search side): the original and a candidate vetoed by one size,
joined by a Python size test at the launch (``search.dispatch``), probed, built and checked like
any output. A part of ``search.final_check.FinalCheck`` (its ``_emit_dispatch``), kept apart so that
each module stays small; the probes get only the time that leaves the check room before the cap.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

from ..model import Candidate, Decision, Task
from .cascade import variant as _variant

# ``.dispatch`` is imported inside a function: it needs libcst, which the GPU image lacks, and this
# module must import there.

if TYPE_CHECKING:
    from .final_check import FinalCheck

PROBE_BUDGET_S = 90.0       # size probes of the size dispatch, all cases together


def size_dispatch_check(check: "FinalCheck", task: Task, original: Candidate, cand: Candidate,
                        vetoed_by: Decision, notes: list[str]) -> tuple[Decision | None, Candidate]:
    """The original and ``cand`` joined by a Python size test at the launch (``search.dispatch``):
    each performance case runs once with a probe that records the launch function's argument
    sizes, the final check's per-case speedups choose the test, and the joined file goes
    through the final check like any output. ``(None, original)`` when it cannot be built."""
    from .dispatch import (
        NotDispatchable, choose_rule, dispatch_source, probe_kinds, probe_source, read_probe,
        size_expression, statement_changes, twin_kernels,
    )

    try:
        # base: the original plus the candidate's changed kernels under other names (unused
        # there); other: the candidate launching those. Same as the two when no kernel differs.
        base, other = twin_kernels(original.source, cand.source)
        changes = statement_changes(base, other)
    except NotDispatchable as exc:
        notes.append(f"size dispatch not possible: {exc}")
        return None, original
    speedups = {cid: r for cid, r in vetoed_by.per_case if r == r and r > 0}
    probe_dir = Path(check.settings.run_dir) / "probes" / cand.hash[:16]
    probe_dir.mkdir(parents=True, exist_ok=True)
    # The joined file gets a final check of its own in a fresh process: its worker starts
    # now, while the probes run untimed (``PrestartedEvaluators``; nothing is timed before
    # that check takes it, and taking it waits for the start to end).
    prestart = getattr(check.make_final_evaluator, "prestart", None)
    if callable(prestart):
        prestart()
    sizes: dict[str, dict[str, int]] = {}
    kinds: dict[str, set[str]] = {}
    # One probe file, so one probe source for every case: the worker imports it once and
    # keeps its compiled kernels. A source per case (its own file path written in) was a new
    # module each time, and each first launch in a new module cost 3-4 s on the H100
    # (mean_reduction's 16 probes took 67 s on the H100); the file is emptied between cases.
    path = probe_dir / "sizes.jsonl"
    probe = Candidate(probe_source(base, changes, path), "emit:dispatch-probe",
                      original.hash, "size probe")
    probe_start = time.perf_counter()
    budget = getattr(check, "budget", None)
    probe_s = (PROBE_BUDGET_S if budget is None
               else budget.probe_budget_s(PROBE_BUDGET_S, check._shortest(
                   cand, original, len(task.performance_cases))[0]))
    if probe_s <= 0:
        notes.append("size dispatch not tried: its probes and final check would not end by "
                     "the record's time cap")
        return None, original
    for case in task.performance_cases:
        if case.id not in speedups:
            continue
        if time.perf_counter() - probe_start > probe_s:
            # a rule from the cases probed so far; the final check still runs every case
            notes.append(f"size probes stopped after {probe_s:.0f} s ({len(sizes)} case(s))")
            break
        path.unlink(missing_ok=True)
        check.timer.evaluate(task, (_variant(probe, "probe"),), purpose="dispatch-probe",
                            case_ids=(case.id,), verify=False, time=False, keep_going=True,
                            use_store=False)
        got = read_probe(path)
        if got:
            sizes[case.id] = got
            for name, seen in probe_kinds(path).items():
                kinds.setdefault(name, set()).update(seen)
    # a case within half the per-case limit of even may go either way; the final check judges
    rule = choose_rule(sizes, speedups, floor=1 - check.policy.max_case_regression / 2)
    if rule is None:
        notes.append(f"size dispatch not possible: no size test separates the cases where "
                     f"{cand.description!r} is slower ({len(sizes)} case(s) probed)")
        return None, original
    expr = size_expression(rule.param, kinds.get(rule.param, set()))
    joined = Candidate(dispatch_source(base, other, changes, rule, expr),
                       "emit:size_dispatch", original.hash,
                       f"size dispatch: {cand.description} where {rule.describe()}")
    if check.store:
        check.store.put_candidate(task.name, joined)
    decision = check._final(task, original, joined)
    verdict = "kept" if decision.accepted else "not kept"
    notes.append(f"size dispatch ({rule.describe()}) {verdict}: {decision.reason}")
    check.progress(f"{task.name}: {notes[-1]}")
    return decision, joined
