"""What the test generator learns and produces, as frozen dataclasses.

A *trace* is what running a file's own test or example recorded: every call of the candidate entry
functions (argument shapes, dtypes, strides, value statistics, which tensors the call wrote) and
every Triton launch under it. A *template* groups the traced calls of one function that share one
structure and names the dimensions they share (*symbols*); cases are drawn from templates. The
result of a run is a ``TestgenResult``: kept cases, dropped ones with the reason, and notes that say
which dimensions were scaled and why.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Union

from ..model import Case


@dataclass(frozen=True)
class TensorStats:
    """Statistics of a tensor's values before the call (finite values only for the moments)."""

    numel: int
    finite: int
    min: float | None = None
    max: float | None = None
    mean: float | None = None
    std: float | None = None
    kurtosis: float | None = None
    zero_frac: float = 0.0
    integral: bool = False          # every finite value is a whole number
    unique: int | None = None       # distinct values (integer and small tensors)
    sorted: bool = False            # non-decreasing when flattened
    permutation: bool = False       # the values are a permutation of 0..numel-1
    values: tuple | None = None     # the flattened data, kept for small tensors


@dataclass(frozen=True)
class TracedTensor:
    shape: tuple[int, ...]
    dtype: str
    stride: tuple[int, ...] = ()
    device: str = "cpu"
    layout: str = "contiguous"      # contiguous | transposed | strided
    requires_grad: bool = False
    stats: TensorStats | None = None
    written: bool = False           # the call changed its contents


@dataclass(frozen=True)
class TracedValue:
    """A non-tensor leaf: int, float, bool, str, none, dtype (value: its name) or other."""

    kind: str
    value: object = None
    type_name: str = ""


@dataclass(frozen=True)
class TracedSeq:
    kind: str                       # tuple | list
    items: tuple["ArgNode", ...] = ()


ArgNode = Union[TracedTensor, TracedValue, TracedSeq]


@dataclass(frozen=True)
class KernelLaunch:
    """One Triton launch: the kernel, its runtime arguments, constexprs and launch options."""

    kernel: str
    args: tuple[tuple[str, ArgNode], ...] = ()
    constexprs: tuple[tuple[str, object], ...] = ()
    grid: tuple[int, ...] | None = None
    options: tuple[tuple[str, object], ...] = ()


@dataclass(frozen=True)
class Parameter:
    name: str
    kind: str                       # positional_only | positional_or_keyword | var_positional | ...
    default: ArgNode | None = None  # None: no default
    has_default: bool = False


@dataclass(frozen=True)
class TracedCall:
    """One distinct call of a traced function (identical repeats folded into ``repeats``)."""

    function: str
    index: int
    parent: int | None
    args: tuple[ArgNode, ...]
    kwargs: tuple[tuple[str, ArgNode], ...]
    returns: ArgNode | None = None
    launches: tuple[KernelLaunch, ...] = ()
    n_launches: int = 0
    repeats: int = 1
    error: str | None = None
    wall_s: float = 0.0

    @property
    def launched(self) -> bool:
        return self.n_launches > 0


@dataclass(frozen=True)
class Trace:
    """Everything one run of a file's test or example recorded."""

    ok: bool                        # the driver ran to its end
    driver: str                     # section | tests | main | <what ran>
    device: str                     # cpu (interpreter) | cuda
    calls: tuple[TracedCall, ...] = ()
    signatures: tuple[tuple[str, tuple[Parameter, ...]], ...] = ()
    error: str | None = None        # the driver's exception, one line
    error_detail: str = ""
    launches_outside: int = 0       # launches under no traced call (backward passes, helpers)
    wall_s: float = 0.0
    timed_out: bool = False
    died: bool = False              # the tracing process crashed (signal, abort)

    def signature(self, function: str) -> tuple[Parameter, ...]:
        return dict(self.signatures).get(function, ())


# --------------------------------------------------------------------------- templates

@dataclass(frozen=True)
class Symbol:
    """A size shared by several dimensions/scalars of a call (one name, many places).

    ``kind``: free (may be changed: odd shapes, scaling), block_following (free, but a constexpr
    block size follows it: scaled last), tied (equals a constexpr of every launch: kept), pinned
    (an index tensor's structure depends on it: kept), rejected (the original refused other
    values), output (only the return value has it: it follows from the inputs). ``why`` says
    what evidence decided it.
    """

    name: str
    value: int
    kind: str = "free"
    why: str = ""
    places: tuple[str, ...] = ()


@dataclass(frozen=True)
class GeneratedCase:
    """A case and where it came from, before and after validation."""

    case: Case
    origin: str                     # trace | odd | values | layout (variety) | perf
    note: str = ""                  # shown as a comment in the spec
    bytes: int = 0                  # bytes the call moves (inputs + outputs)
    sizes: tuple[tuple[str, int], ...] = ()   # symbol values of this case
    median_ms: float | None = None  # time of the original (GPU sizing only)
    est_s: float = 0.0              # estimated run time of one call (from the traced call)


@dataclass(frozen=True)
class Dropped:
    """A generated case the original did not pass, and why.

    ``kind``: ``failed`` (the original raised, crashed or mismatched on it: it refuses the case),
    ``timeout`` (it ran out of time: too slow here, not refused) or ``not_run`` (a time budget or
    the worker's deaths stopped validation before it). Only ``failed`` says anything about which
    sizes the original accepts.
    """

    case_id: str
    reason: str
    kind: str = "failed"

    @property
    def refused(self) -> bool:
        return self.kind == "failed"


@dataclass(frozen=True)
class TestgenResult:
    """Cases for one kernel file, the spec text and everything the user should be told."""

    entries: tuple[str, ...]
    cases: tuple[GeneratedCase, ...]
    dropped: tuple[Dropped, ...]
    symbols: tuple[tuple[str, tuple[Symbol, ...]], ...]   # per template id
    notes: tuple[str, ...]
    trace: Trace
    spec_text: str = ""
    device: str = "cpu"
    validated: bool = True
    perf_by_bytes_only: bool = False   # CPU interpreter: sizes chosen by bytes, never timed
    stage_failed: str | None = None    # trace | entry | cases | validate: where it stopped
    failure_kind: str | None = None    # interpreter_limitation | test_fails | no_calls | ...
    timings: tuple[tuple[str, float], ...] = field(default=())

    __test__ = False

    @property
    def correctness(self) -> tuple[GeneratedCase, ...]:
        return tuple(c for c in self.cases if c.case.role.value == "correctness")

    @property
    def performance(self) -> tuple[GeneratedCase, ...]:
        return tuple(c for c in self.cases if c.case.role.value == "performance")
