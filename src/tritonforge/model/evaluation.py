"""What evaluating a variant produces: its status, failures, verification verdict and timings.

A failing candidate is data, never an exception (house style taken from Triton's autotuner): the
worker or the driver turns every compile error, crash, hang, out-of-memory and mismatch into a
``Failure`` with a short reason and the full error text.
"""

from __future__ import annotations

import enum
import statistics
from dataclasses import dataclass, field


class Status(str, enum.Enum):
    OK = "ok"
    POLICY_REJECTED = "policy_rejected"   # the static source policy refused it before import
    IMPORT_ERROR = "import_error"         # the module failed to import (syntax, NameError, ...)
    COMPILE_ERROR = "compile_error"       # Triton failed to compile a kernel
    RUNTIME_ERROR = "runtime_error"       # a Python exception while running a case
    CRASH = "crash"                       # the worker died (segfault, illegal memory access)
    TIMEOUT = "timeout"                   # no progress within the time limit: killed
    OOM = "oom"                           # device or host memory exhausted
    MISMATCH = "mismatch"                 # ran, but computed something else than the original
    CHEAT = "cheat"                       # ran and may match, but broke a rule (no launches, ...)
    SKIPPED = "skipped"                   # not evaluated: another variant killed the worker first
    PRUNED = "pruned"                     # not evaluated: a config over the device's shared memory
                                          # or registers, dropped before compiling (search.prune)

    @property
    def is_failure(self) -> bool:
        return self is not Status.OK


class TimingMethod(str, enum.Enum):
    CUDA_EVENTS = "cuda-events"
    # CUDA events with the GPU kept ahead of the host, each sample the longer of the call's GPU
    # time and its host issue time (runtime.timing._Pacer)
    CUDA_EVENTS_PACED = "cuda-events-paced"
    CUDA_GRAPH = "cuda-graph"
    INTERPRETER = "interpreter"   # CPU through TRITON_INTERPRET=1: never a performance figure


@dataclass(frozen=True)
class Failure:
    status: Status
    reason: str
    detail: str = ""
    case_id: str | None = None
    seed: int | None = None

    def one_line(self) -> str:
        where = f" [{self.case_id}" + (f" seed {self.seed}" if self.seed is not None else "") + "]" \
            if self.case_id else ""
        return f"{self.status.value}{where}: {self.reason}"


@dataclass(frozen=True)
class Mismatch:
    """One output of one case that differs from the original's, with the evidence."""

    case_id: str
    seed: int
    output: str            # where in the result: "return", "return[1]", "return['y']", "arg[2]"
    kind: str              # value | norm | nan | unwritten | input_mutated | shape | dtype | device
                           # | stride | type | missing  (verify.kinds.MismatchKind)
    message: str
    n_bad: int = 0
    n_total: int = 0
    worst_index: tuple[int, ...] = ()
    candidate_value: float | None = None
    reference_value: float | None = None
    max_abs_err: float | None = None
    rel_norm_err: float | None = None


@dataclass(frozen=True)
class Cheat:
    """A rule the candidate broke, whatever its values (verify.kinds.CheatKind names the kinds)."""

    kind: str              # no_launch | library_op | side_stream | race | rerun | stale_output | patched
    message: str
    case_id: str | None = None
    seed: int | None = None

    def one_line(self) -> str:
        where = f" [{self.case_id} seed {self.seed}]" if self.case_id is not None else ""
        return f"{self.kind}{where}: {self.message}"


@dataclass(frozen=True)
class Verdict:
    """The verifier's answer for one candidate against the original."""

    passed: bool
    mismatches: tuple[Mismatch, ...] = ()
    cheats: tuple[str, ...] = ()           # one line per entry of ``violations``
    checked: int = 0          # (case, seed) pairs compared
    violations: tuple[Cheat, ...] = ()
    failure: Failure | None = None         # the candidate raised (only when the verifier catches)
    reference_launches: int = 0            # Triton launches over all of the original's calls
    candidate_launches: int = 0
    reference_ops: tuple[str, ...] = ()    # torch ops the original dispatched (aten names)
    candidate_ops: tuple[str, ...] = ()
    uses_dot: bool = False                 # the original uses tl.dot (fp32: the tf32 tolerance)

    notes: tuple[str, ...] = ()    # e.g. differences forgiven as the original's own nondeterminism

    def summary(self, limit: int = 3) -> str:
        if self.passed:
            return f"correct on {self.checked} case/seed pairs"
        lines = [f"error: {self.failure.one_line()}"] if self.failure is not None else []
        lines += [f"cheat: {c}" for c in self.cheats]
        lines += [f"{m.case_id} seed {m.seed} {m.output}: {m.message}" for m in self.mismatches]
        more = len(lines) - limit
        return "; ".join(lines[:limit]) + (f"; (+{more} more)" if more > 0 else "")


@dataclass(frozen=True)
class Timing:
    """Every sample of one variant on one case, in milliseconds."""

    case_id: str
    variant: str
    method: TimingMethod
    samples_ms: tuple[float, ...]

    @property
    def median_ms(self) -> float:
        return statistics.median(self.samples_ms) if self.samples_ms else float("nan")

    @property
    def spread(self) -> float:
        """Interquartile range over the median: the relative spread of the samples."""
        s = sorted(self.samples_ms)
        if len(s) < 4:
            return 0.0
        q1, q3 = s[len(s) // 4], s[(3 * len(s)) // 4]
        med = self.median_ms
        return (q3 - q1) / med if med > 0 else 0.0


@dataclass(frozen=True)
class Variant:
    """A version of the task's source evaluated in the worker: the original or a candidate."""

    name: str
    source: str
    hash: str


@dataclass(frozen=True)
class VariantResult:
    """Everything one evaluation learned about one variant."""

    variant: str
    hash: str
    status: Status
    failure: Failure | None = None
    verdict: Verdict | None = None
    timings: tuple[Timing, ...] = ()
    launches: int = 0          # Triton kernel launches seen while running its cases
    wall_s: float = 0.0
    case_failures: tuple[Failure, ...] = ()   # per-case failures (baseline runs keep going)
    # (case id, seconds) of each case's one run before any check or timing: inputs built, the
    # call, a synchronisation; what one more run of the case costs a verification
    run_s: tuple[tuple[str, float], ...] = ()

    def timing(self, case_id: str) -> Timing | None:
        for t in self.timings:
            if t.case_id == case_id:
                return t
        return None


@dataclass(frozen=True)
class DeviceInfo:
    name: str
    interpreted: bool
    torch_version: str = ""
    triton_version: str = ""
    capability: str = ""
    sm_count: int = 0


@dataclass(frozen=True)
class Evaluation:
    """The outcome of one worker request: results per variant, on one device."""

    task: str
    results: tuple[VariantResult, ...]
    device: DeviceInfo
    notes: tuple[str, ...] = field(default=())

    def result(self, variant: str) -> VariantResult:
        for r in self.results:
            if r.variant == variant:
                return r
        raise KeyError(variant)
