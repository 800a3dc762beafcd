"""Run the ORIGINAL on generated cases in the worker; a case it fails on is dropped with a note.

Three checks, all through ``runtime.evaluator.Evaluator`` (the driver never runs kernel code):
- runs: every case once (``keep_going``: a failing case is recorded and the others go on; a
  case that kills the worker is dropped and the rest evaluated again);
- stable: the original verified against a copy of itself on the correctness cases (fresh seeds,
  poisoned outputs): a case where two runs on the same inputs disagree reads memory it was not
  given (an odd shape past a buffer's end) and cannot judge candidates;
- timed (GPU only): performance candidates timed with a short plan, to pick sizes that are long
  enough to measure and to check that time grows with size.
"""

from __future__ import annotations

import logging
import re
from time import monotonic as _clock
from dataclasses import dataclass, field

from ..model import Status, Task, Variant, content_hash
from ..runtime.evaluator import Evaluator, original_variant
from ..runtime.timing import TimingPlan
from ..verify.bounds import OUTSIDE_NOTE
from ..verify.kinds import NONFINITE_NOTE
from .model import Dropped

log = logging.getLogger(__name__)

# the verifier's note for differences it forgives as the original's own nondeterminism:
# "<case> seed <n> <output>: <k> elements differ, the original differs from itself on <m>"
_SELF_DIFF = re.compile(r"(\S+) seed -?\d+ .*differs from itself")

QUICK_PLAN = TimingPlan(rounds=3, round_ms=5.0, warmup_ms=5.0, flush_l2=True, cuda_graph=False)


@dataclass(frozen=True)
class Validation:
    kept: tuple[str, ...]
    dropped: tuple[Dropped, ...]
    median_ms: tuple[tuple[str, float], ...] = field(default=())
    notes: tuple[str, ...] = ()
    unchecked: tuple[str, ...] = ()   # kept without the check (check_stable: its time ran out)


def run_original(evaluator: Evaluator, task: Task, case_ids: tuple[str, ...], *,
                 time: bool = False, plan: TimingPlan | None = None, max_deaths: int = 4,
                 deadline: float | None = None) -> Validation:
    """Run the original on ``case_ids``, one request per case; drop each case it fails on.

    One case per request makes every failure (an error, a crash that kills the worker, a
    timeout) land on the right case, and a crash costs no re-run of the cases before it. After
    ``max_deaths`` cases that killed the worker, or past ``deadline`` (``time.monotonic()``), the
    rest are dropped unrun, with the reason.
    """
    kept: list[str] = []
    dropped: list[Dropped] = []
    timings: dict[str, float] = {}
    notes: list[str] = []
    deaths = 0
    for n, case_id in enumerate(case_ids):
        stop = None
        if deaths >= max_deaths:
            stop = f"not run: the original killed the worker on {deaths} other cases"
        elif deadline is not None and _clock() > deadline:
            stop = "not run: the validation time budget ran out"
        if stop:
            rest = case_ids[n:]
            dropped += [Dropped(c, stop, "not_run") for c in rest]
            notes.append(f"{len(rest)} case(s) {stop}")
            break
        evaluation = evaluator.evaluate(task, (original_variant(task),), purpose="testgen",
                                        case_ids=(case_id,), verify=False, time=time,
                                        keep_going=True, plan=plan, use_store=False)
        result = evaluation.results[0]
        failure = next((f for f in result.case_failures if f.case_id == case_id), None) or result.failure
        if failure is not None:
            dropped.append(Dropped(case_id, _reason(failure.status, failure.reason),
                                   "timeout" if failure.status is Status.TIMEOUT else "failed"))
            deaths += failure.status in (Status.CRASH, Status.TIMEOUT, Status.OOM)
            continue
        kept.append(case_id)
        timing = result.timing(case_id)
        if timing is not None:
            timings[case_id] = timing.median_ms
    return Validation(tuple(kept), tuple(dropped), tuple(sorted(timings.items())), tuple(notes))


def check_stable(evaluator: Evaluator, task: Task, case_ids: tuple[str, ...], *,
                 deadline: float | None = None) -> Validation:
    """Verify the original against a copy of itself, one case per request; drop cases that differ.

    A case on which the original crashes or fails under a fresh seed is dropped too. One that
    only runs out of time is kept, with a note (it ran on its own seed already; the stability of
    slow cases is not known).
    """
    copy = Variant("original-again", task.source, task.source_hash)
    kept: list[str] = []
    dropped: list[Dropped] = []
    notes: list[str] = []
    unchecked: list[str] = []
    for n, case_id in enumerate(case_ids):
        if deadline is not None and _clock() > deadline:
            unchecked += case_ids[n:]
            kept += case_ids[n:]
            break
        evaluation = evaluator.evaluate(task, (original_variant(task), copy),
                                        purpose="testgen-stable", case_ids=(case_id,),
                                        verify=True, time=False, keep_going=True, use_store=False)
        verdict = evaluation.result("original-again").verdict
        reason = None
        if verdict is None:
            failures = [r.failure for r in evaluation.results if r.failure is not None]
            failure = next((f for f in failures if f.status is not Status.SKIPPED), None)
            if failure is not None and failure.status is not Status.TIMEOUT:
                reason = _reason(failure.status, failure.reason)
            else:
                unchecked.append(case_id)
        else:
            for m in verdict.mismatches:
                reason = reason or ("unstable: two runs of the original on the same inputs differ "
                                    f"({m.output}: {m.message[:120]})")
            for note in getattr(verdict, "notes", ()):   # differences the verifier forgave
                found = _SELF_DIFF.match(note)
                if found and found.group(1) == case_id:
                    reason = reason or ("unstable: two runs of the original on the same inputs "
                                        f"differ ({note[len(case_id) + 1:][:120]})")
                if note.startswith(f"{case_id} seed ") and NONFINITE_NOTE in note:
                    # its NaN/Inf come from memory it should not read (verify.nonfinite)
                    reason = reason or f"unjudgeable: {note[len(case_id) + 1:][:160]}"
                if note.startswith(f"{case_id} seed ") and OUTSIDE_NOTE in note:
                    # it stores or loads past its tensors there (verify.bounds): a case of our
                    # own making need not be one whose result hangs on memory it was not given
                    reason = reason or f"unjudgeable: {note[len(case_id) + 1:][:160]}"
            if verdict.failure is not None:
                reason = reason or _reason(verdict.failure.status, verdict.failure.reason)
            if verdict.cheats and reason is None:
                notes.append(f"stability check of {case_id}: " + "; ".join(verdict.cheats)[:200])
        if reason is None:
            kept.append(case_id)
        else:
            dropped.append(Dropped(case_id, reason))
    if unchecked:
        notes.append(f"stability not checked for {len(unchecked)} case(s) (time limit): "
                     + ", ".join(unchecked[:6]))
    return Validation(tuple(kept), tuple(dropped), notes=tuple(notes), unchecked=tuple(unchecked))


_CONTIGUOUS_WRAPPER = '''

def _tf_contiguous_call(fn):
    """Call ``fn`` on contiguous copies of its tensor arguments, then copy back what it wrote."""
    import functools
    import torch as _torch

    @functools.wraps(fn)
    def call(*args, **kwargs):
        pairs = []

        def dense(v):
            if isinstance(v, _torch.Tensor) and not v.is_contiguous():
                c = v.contiguous()
                pairs.append((v, c))
                return c
            if isinstance(v, (list, tuple)):
                return type(v)(dense(x) for x in v)
            return v

        out = fn(*dense(args), **{k: dense(v) for k, v in kwargs.items()})
        with _torch.no_grad():
            for view, copy in pairs:
                if not _torch.equal(view, copy):
                    view.copy_(copy)
        return out
    return call

'''


def contiguous_twin(task: Task, entries: tuple[str, ...]) -> Variant:
    """The original with every entry in ``entries`` called on contiguous copies of its tensors:
    what the original computes for a non-contiguous view when it handles strides."""
    source = task.source.rstrip("\n") + "\n" + _CONTIGUOUS_WRAPPER + "".join(
        f"{e} = _tf_contiguous_call({e})\n" for e in entries)
    return Variant("original-contiguous", source, content_hash(source))


def check_layout(evaluator: Evaluator, task: Task, case_ids: tuple[str, ...], *,
                 deadline: float | None = None) -> Validation:
    """Keep the non-contiguous-view cases on which the original computes what it computes on
    contiguous copies of the same inputs: it accepts such views. One where they differ (the
    original ignores strides) cannot judge candidates, and is dropped with the reason."""
    kept: list[str] = []
    dropped: list[Dropped] = []
    for n, case_id in enumerate(case_ids):
        if deadline is not None and _clock() > deadline:
            dropped += [Dropped(c, "not run: the validation time budget ran out", "not_run")
                        for c in case_ids[n:]]
            break
        recipe = task.case(case_id).recipe
        entry = getattr(recipe, "entry", "")
        if not entry.isidentifier():
            dropped.append(Dropped(case_id, f"layout not checked: {entry!r} is not a plain function"))
            continue
        twin = contiguous_twin(task, (entry,))
        evaluation = evaluator.evaluate(task, (original_variant(task), twin),
                                        purpose="testgen-layout", case_ids=(case_id,),
                                        verify=True, time=False, keep_going=True, use_store=False)
        verdict = evaluation.result(twin.name).verdict
        if verdict is None or verdict.failure is not None or verdict.mismatches:
            messages = [m.message for m in verdict.mismatches] if verdict is not None else []
            why = messages[0] if messages else "the check did not complete"
            noisy = [m for m in messages if "differs from itself" in m]
            if not noisy and messages:
                # noise or strides? the original against itself on the same view tells
                again = check_stable(evaluator, task, (case_id,), deadline=deadline)
                noisy = [d.reason for d in again.dropped if d.reason.startswith("unstable")]
            if noisy:     # two runs of the original on the same inputs differ: noise
                reason = (noisy[0] if noisy[0].startswith("unstable") else "unstable: two runs of "
                          f"the original on the same inputs differ ({noisy[0][:120]})")
            else:
                reason = ("the original does not handle non-contiguous views (differs from itself "
                          f"on contiguous copies: {why[:120]})")
            dropped.append(Dropped(case_id, reason))
            continue
        noise = [n for n in getattr(verdict, "notes", ())
                 if (m := _SELF_DIFF.match(n)) and m.group(1) == case_id]
        if noise:       # differences the verifier forgave as the original's own noise
            dropped.append(Dropped(case_id, "unstable: two runs of the original on the same inputs "
                                            f"differ ({noise[0][len(case_id) + 1:][:120]})"))
        else:
            kept.append(case_id)
    return Validation(tuple(kept), tuple(dropped))


def _reason(status: Status, reason: str) -> str:
    return f"the original failed ({status.value}): {reason.splitlines()[0][:200] if reason else ''}"
