"""Prove a candidate computes what the original computes, and plays fair while doing it.

Public API (the rest is private):

- ``verify(reference, candidate, cases, make_invocation, ...) -> Verdict``: differential check
  with poisoning, launch/library/stream/race/patch guards and a fresh-seed re-run;
  ``verify_against_reference`` is the worker's adapter; ``reasons(verdict)`` gives labels.
- ``compare_outputs(...) -> list[Mismatch]`` and ``tolerance_table(overrides)``.
- ``poison_allocations()``, ``poison_()``, ``poison_mask()``.
- ``count_launches()``, ``record_torch_calls()``, ``integrity_snapshot()``, ``check_integrity()``,
  ``restore_integrity()``, ``watch_integrity()``.
- ``check_source(source, allowed_imports=...) -> PolicyResult``, ``imports_of(source)``.

Beyond the guarded calls, ``verify`` checks what ships: returned tensors fresh and plain and the
module's state unchanged on repeated calls (``freshness``), and one case run through bare calls,
changed inputs and (on a GPU) identical re-runs, with the profiler's census of every op and
kernel (``shipped``, ``census``); ``shipped.shipped_after_timing`` is the worker's bare call after
the timing runs.

Importing this package imports torch but not triton; the guards import triton when first used.
"""

from .compare import ToleranceFor, compare_outputs, tolerance_table
from .differential import (
    PLUMBING_OPS, OracleFailure, VerifyOptions, reasons, uses_dot, verify, verify_against_reference,
)
from .guards import (
    LaunchCounter, LaunchRecord, TorchCallRecorder, count_launches, record_torch_calls,
)
from .integrity import (
    IntegritySnapshot, check_integrity, integrity_snapshot, restore_integrity, watch_integrity,
)
from .kinds import CheatKind, MismatchKind
from .poison import poison_, poison_allocations, poison_mask
from .policy import (
    DEFAULT_ALLOWED_IMPORTS, PolicyResult, PolicyViolation, check_source, imports_of,
)
from .runner import InvocationLike, MakeInvocation

__all__ = [
    "CheatKind", "DEFAULT_ALLOWED_IMPORTS", "IntegritySnapshot", "InvocationLike", "LaunchCounter",
    "LaunchRecord", "MakeInvocation", "MismatchKind", "OracleFailure", "PLUMBING_OPS",
    "PolicyResult", "PolicyViolation", "ToleranceFor", "TorchCallRecorder", "VerifyOptions",
    "check_integrity", "check_source", "compare_outputs", "count_launches", "imports_of",
    "integrity_snapshot", "poison_", "poison_allocations", "poison_mask", "reasons",
    "record_torch_calls", "restore_integrity", "tolerance_table", "uses_dot", "verify",
    "verify_against_reference", "watch_integrity",
]
