"""What profiling produces: static compile stats, measured metrics, roofline position, diagnosis.

Hints are data (a kind, the evidence, the knobs they suggest) so that the rule engine and the LLM
prompt consume the same thing.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field


class Bound(str, enum.Enum):
    MEMORY = "memory"
    COMPUTE = "compute"
    LATENCY = "latency"
    LAUNCH = "launch"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class CompileStats:
    """What compiling one kernel at one constexpr/launch config for a target tells without a GPU."""

    kernel: str
    target: str                      # e.g. "cuda:90"
    num_warps: int
    num_stages: int
    registers: int | None = None     # per thread
    spills: int | None = None        # bytes spilled (stores + loads) per thread
    shared_bytes: int | None = None
    uses_tensor_cores: bool = False  # wgmma / mma in PTX
    vector_width_bytes: int | None = None   # widest global load/store seen (16 = 128-bit)
    constexprs: tuple[tuple[str, object], ...] = ()
    warnings: tuple[str, ...] = ()   # e.g. "exceeds 227 KiB of shared memory"
    has_dot: bool = False            # tt.dot in the Triton IR (whether or not it became mma)
    mma_kind: str | None = None      # "wgmma" or "mma" when tensor-core instructions are used
    stack_bytes: int | None = None   # local stack frame per thread (spills, local arrays)
    error: str | None = None         # compile failure (the stats above are then empty)


@dataclass(frozen=True)
class Metric:
    """One measured value under its short name (see profile.metrics for the name table)."""

    name: str
    value: float
    unit: str = ""


@dataclass(frozen=True)
class KernelProfile:
    """Metrics of one kernel launch as Nsight Compute measured it."""

    kernel: str
    metrics: tuple[Metric, ...]
    duration_us: float | None = None
    launch_id: int | None = None     # ncu's ID of the profiled launch

    def get(self, name: str) -> float | None:
        for m in self.metrics:
            if m.name == name:
                return m.value
        return None


@dataclass(frozen=True)
class Roofline:
    """Where a kernel sits against the measured peaks of the machine."""

    bytes_moved: float
    flops: float
    time_us: float
    achieved_bw_gbs: float
    achieved_tflops: float
    peak_bw_gbs: float
    peak_tflops: float
    fraction_of_peak: float          # the larger of the two fractions
    bound: Bound


@dataclass(frozen=True)
class Hint:
    """A concrete suggestion: what kind of change, why (evidence), and which knobs it moves."""

    kind: str                        # e.g. "more_parallelism", "reduce_registers", "near_roofline"
    evidence: str
    knobs: tuple[str, ...] = ()      # e.g. ("BLOCK_SIZE", "num_warps")
    priority: float = 0.5            # 0..1, higher first


@dataclass(frozen=True)
class Diagnosis:
    bound: Bound
    bottleneck: str                  # a short name, e.g. "too little memory parallelism"
    evidence: tuple[str, ...] = ()
    hints: tuple[Hint, ...] = ()
    near_roofline: bool = False


@dataclass(frozen=True)
class Profile:
    """Everything known about where the time goes for one task on one case."""

    task: str
    case_id: str | None
    source: str                      # "ncu", "timing-only", "static-only", "recorded"
    kernels: tuple[KernelProfile, ...] = ()
    compile_stats: tuple[CompileStats, ...] = ()
    roofline: Roofline | None = None
    diagnosis: Diagnosis | None = None
    notes: tuple[str, ...] = field(default=())
    # (step, seconds) of making this profile (profile.session.StepClock): for the run's records,
    # never for a prompt, which must be the same for the same kernel whatever the clock read
    step_s: tuple[tuple[str, float], ...] = ()
