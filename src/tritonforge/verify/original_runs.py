"""The original's guarded runs, kept for the next candidate a process checks (verifier side).

A worker verifies candidate after candidate of one record against the same original, on the same
cases and seeds (the case's own, and the worker's one recheck seed: ``runtime.worker_evaluate``).
The original's run on (case, seed, poisoned outputs) came out the same for each of them, and it
was half the runs of every check. ``OriginalRuns`` keeps them, per original module (weakly: a
module dropped drops its runs) and case by content (ids repeat across case sets), least recently
used first out, within a byte budget: a run whose tensors are larger than a quarter of it is never
kept (an attention kernel's performance case holds gigabytes). Runs meant to see the original
vary (its own re-runs, its other autotune configs) are never taken from here.

A kept run is read, never written: the verifier compares against it, and the candidate's inputs
are copied from its pristine inputs into tensors of the candidate's own. The objects the
original returned (``Run.returned``, used only for a candidate's own aliasing) are not kept.
"""

from __future__ import annotations

import dataclasses
import types
import weakref
from collections import OrderedDict
from typing import Any

import torch

from ..model import Case
from .runner import Run
from .tree import iter_tensors

DEFAULT_BYTES = 1 << 30


def case_key(case: Case) -> Any:
    """A case by what it is, not its id: ids repeat across the case sets one process verifies on
    (a generated case's draft and the case itself share one)."""
    try:
        hash(case)
        return case
    except TypeError:
        return repr(case)


def tree_bytes(tree: Any) -> int:
    """Bytes of the distinct tensors in ``tree`` (nested tuples, lists and dicts)."""
    seen: set[int] = set()
    total = 0
    for _, t in iter_tensors(tree, "tree"):
        if isinstance(t, torch.Tensor) and id(t) not in seen:
            seen.add(id(t))
            total += t.numel() * t.element_size()
    return total


def run_bytes(run: Run) -> int:
    """Bytes of the tensors a kept run holds (its result, arguments before and after, late ones)."""
    return tree_bytes((run.result, run.args, run.pristine, run.late_result, run.late_args or {}))


class OriginalRuns:
    """(module, case, seed, poisoned outputs, device) -> the original's ``Run``, within
    ``max_bytes``."""

    def __init__(self, max_bytes: int = DEFAULT_BYTES) -> None:
        self.max_bytes = max_bytes
        self._runs: weakref.WeakKeyDictionary[types.ModuleType, OrderedDict[tuple, tuple[Run, int]]] \
            = weakref.WeakKeyDictionary()
        self.hits = 0

    def key(self, case: Case, seed: int, poison: frozenset[str], device: str) -> tuple:
        return (case_key(case), seed, poison, device)

    def get(self, module: types.ModuleType, key: tuple) -> Run | None:
        runs = self._runs.get(module)
        found = runs.get(key) if runs is not None else None
        if found is None:
            return None
        runs.move_to_end(key)
        self.hits += 1
        return found[0]

    def put(self, module: types.ModuleType, key: tuple, run: Run) -> None:
        if run.error is not None:
            return
        size = run_bytes(run)
        if size > self.max_bytes // 4:
            return
        runs = self._runs.setdefault(module, OrderedDict())
        runs[key] = (dataclasses.replace(run, returned=[]), size)
        runs.move_to_end(key)
        while self._total() > self.max_bytes:
            # another original's runs first (an earlier record's, in a worker that outlived it)
            owner = next((m for m in self._runs if m is not module and self._runs[m]), module)
            self._runs[owner].popitem(last=False)

    def _total(self) -> int:
        return sum(size for runs in self._runs.values() for _, size in runs.values())


# one per process: a worker's verifications share it (a candidate cannot reach it: the policy
# refuses ``gc`` and frame access, and the tensors it is handed are copies)
ORIGINAL_RUNS = OriginalRuns()
