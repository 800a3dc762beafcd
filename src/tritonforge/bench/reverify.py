"""After a pass: every accepted kernel verified once more, in a fresh worker process, with fresh
seeds, on every case (driver side; the worker is new for each record).

The search verified each candidate on its own seeds and the final check again in a new process;
both drew their inputs from the cases' seeds. Here each case gets seeds no earlier check used,
drawn from the OS's randomness, so an accepted kernel that is right only on the inputs it was
checked on (a mask that depends on the values, a race that a seed happens to hide) shows up as
``wrong_accepted`` in LATEST.json. Nothing is cached: the request bypasses the run store.
"""

from __future__ import annotations

import dataclasses
import logging
import secrets
from pathlib import Path
from typing import Callable

from ..config import Settings
from ..model import Status, Task, Variant, content_hash
from ..runtime.evaluator import Evaluator, original_variant
from ..search.blame import (
    TWIN_RUNS_WHERE_IT_VARIES, blamed_cases, original_varies, twin_blamed,
)
from ..search.loop import interpreter_cases
from .lane import load_ref
from .records import PassRecord, RecordRef

log = logging.getLogger(__name__)

FRESH_SEEDS_PER_CASE = 2


def with_fresh_seeds(task: Task, draw: Callable[[], int] | None = None,
                     per_case: int = FRESH_SEEDS_PER_CASE) -> Task:
    """``task`` with every case's seeds replaced by ``per_case`` new ones (none of its own)."""
    draw = draw or (lambda: 1_000_000 + secrets.randbelow(2**30))
    cases = []
    for case in task.cases:
        seeds: list[int] = []
        while len(seeds) < per_case:
            s = draw()
            if s not in case.seeds and s not in seeds:
                seeds.append(s)
        cases.append(dataclasses.replace(case, seeds=tuple(seeds)))
    return dataclasses.replace(task, cases=tuple(cases))


@dataclasses.dataclass(frozen=True)
class Reverified:
    name: str
    ok: bool
    note: str


def reverify_record(record: PassRecord, ref: RecordRef, settings: Settings, work_dir: Path,
                    device: str | None = None) -> Reverified:
    """Verify ``record``'s accepted kernel against the original on every case, fresh seeds.

    A case where the original fails alone, or where it does not reproduce itself run as its own
    candidate (the twin, on the same fresh seeds, in a fresh worker: ``search.blame``), judges
    nothing, as in the search and the final check: flash_decode2_llama's test section reads
    blocks past its 3-block tensors (B_Seqlen 64 at a block of 8), the search dropped it for
    that, and its accepted num_warps change read NaN there on fresh seeds where the original
    read numbers (H100 x4, engine 1018ceeea5af, 2026-11-27). The twin runs only where the
    accepted kernel failed: first over the whole sequence of cases the accepted kernel ran, in
    the same order, since what memory an undefined original reads depends on what ran before it
    (the twin alone on flash_decode2_llama's test section reproduced itself, in the same call
    where the accepted kernel, run after every performance case, read NaN there), then on the
    failing cases alone."""
    task = with_fresh_seeds(load_ref(ref))
    with Evaluator(settings, work_dir, None, device=device) as ev:
        if ev.device == "cpu":
            task, _ = interpreter_cases(task)
        accepted = Variant("accepted", record.accepted_source, content_hash(record.accepted_source))
        ev_ = ev.evaluate(task, (original_variant(task), accepted), purpose="reverify",
                          verify=True, time=False, keep_going=True, use_store=False)
        original = ev_.result("original")
        result = ev_.result("accepted")
        dropped = {f.case_id for f in original.case_failures}
        if result.status is Status.OK:
            checked = result.verdict.checked if result.verdict else 0
            return Reverified(record.name, True,
                              f"correct on {checked} case/seed pairs, fresh seeds"
                              + (f"; {len(dropped)} case(s) the original fails skipped"
                                 if dropped else ""))
        why = (result.verdict.summary() if result.verdict and not result.verdict.passed
               else result.failure.one_line() if result.failure else result.status.value)
        failing = {f.case_id for f in result.case_failures} | blamed_cases(result)
        if failing and failing <= dropped:
            return Reverified(record.name, True, "fails only where the original fails too")
    if failing:
        # the twin in a worker of its own: nothing the accepted kernel left in this one (a
        # patched module, a global flag) can make the original fail beside itself
        with Evaluator(settings, work_dir / "twin", None, device=device) as fresh:
            unsafe = _twin_fails(fresh, task, failing - dropped, whole_sequence=True)
            unsafe |= _twin_fails(fresh, task, failing - dropped - unsafe)
            # where the verdict saw the original vary, one reproducing twin proves little
            varies = (failing - dropped - unsafe) & original_varies(result)
            for _ in range(TWIN_RUNS_WHERE_IT_VARIES - 2):   # two runs made: whole, alone
                if not varies:
                    break
                found = _twin_fails(fresh, task, varies)
                unsafe |= found
                varies -= found
        if failing <= dropped | unsafe:
            return Reverified(record.name, True,
                              f"fails only on case(s) {', '.join(sorted(failing - dropped))}, "
                              "where the original does not reproduce itself run as its own "
                              "candidate: they judge nothing")
    return Reverified(record.name, False, f"{result.status.value}: {why}"[:300])


def _twin_fails(ev: Evaluator, task: Task, case_ids: set[str],
                whole_sequence: bool = False) -> set[str]:
    """The cases of ``case_ids`` where the original, run as its own candidate after itself in
    ``ev``'s worker on ``task``'s seeds, fails (``search.blame.twin_blamed``): run on those
    cases alone, or with ``whole_sequence`` on every case of ``task`` in its order."""
    if not case_ids:
        return set()
    sub = task if whole_sequence else dataclasses.replace(
        task, cases=tuple(c for c in task.cases if c.id in case_ids))
    if not sub.cases:
        return set()
    twin = Variant("twin", task.source, task.source_hash)
    got = ev.evaluate(sub, (original_variant(sub), twin), purpose="reverify-twin", verify=True,
                      time=False, keep_going=True, use_store=False)
    result = got.result("twin")
    return (twin_blamed(result) | {f.case_id for f in result.case_failures}) & case_ids
