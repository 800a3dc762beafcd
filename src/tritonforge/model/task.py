"""What is optimized: a task (a kernel file, its entry points and cases) and how cases are built.

A case never holds tensors: it holds a *recipe* that the worker turns into inputs on its own device
with a given seed. That keeps tasks picklable, hashable and storable, and lets the verifier draw
fresh inputs (new seeds) for every check.
"""

from __future__ import annotations

import enum
import hashlib
from dataclasses import dataclass, field
from typing import Union


class CaseRole(str, enum.Enum):
    """Why a case exists: to check correctness only, or to be timed (and checked) too."""

    CORRECTNESS = "correctness"
    PERFORMANCE = "performance"


@dataclass(frozen=True)
class TensorSpec:
    """A tensor input drawn at random in the worker.

    ``init`` is one of: randn (normal * scale + offset), rand (uniform in [low, high)), randint
    (integers in [low, high)), zeros, ones, full (``value``), arange, empty (an output buffer the
    caller passes in; the worker poisons it), values (the literal, flattened data in ``values``:
    index tensors whose structure matters, such as permutations or sorted offsets, kept as traced
    by testgen). ``layout`` "transposed" makes a non-contiguous view (the last two dimensions
    swapped) so that stride handling is exercised; "strided" holds the same values as the
    contiguous draw in every other element of a buffer twice as long in the last dimension (a
    non-contiguous view of any rank). ``sparsity`` sets that fraction of the drawn elements to
    exact zeros (drawn after the values, so the other elements are those of the dense draw).
    """

    shape: tuple[int, ...]
    dtype: str = "float32"
    init: str = "randn"
    low: float | None = None
    high: float | None = None
    value: float | None = None
    scale: float = 1.0
    offset: float = 0.0
    layout: str = "contiguous"
    requires_grad: bool = False
    values: tuple | None = None       # init "values": the data, flattened (added for testgen)
    sparsity: float = 0.0             # fraction of elements set to exact zeros

    def describe(self) -> str:
        dims = "x".join(str(d) for d in self.shape) or "scalar"
        lay = "" if self.layout == "contiguous" else f" {self.layout}"
        return f"{self.dtype}[{dims}]{lay}"


# An argument of a spec call: a tensor recipe, a plain scalar, or a sequence of them.
ArgValue = Union[TensorSpec, int, float, bool, str, None, tuple]


@dataclass(frozen=True)
class SpecCall:
    """Call ``module.<entry>(*args, **kwargs)`` with inputs built from declarative specs."""

    entry: str
    args: tuple = ()
    kwargs: tuple[tuple[str, ArgValue], ...] = ()


@dataclass(frozen=True)
class PerfScriptCall:
    """Input ``index`` of a TritonBench-style performance script (``performance_metrics`` class).

    The script's ``get_input_tensors`` builds the inputs (seeded), ``to_cuda`` moves them, and
    ``call_op`` calls the kernel module, which the worker binds to the variant being evaluated.
    """

    script: str
    module_name: str
    index: int
    elements: int | None = None       # tensor elements of the input (None: not known)


@dataclass(frozen=True)
class TestSectionCall:
    """Run a test section against the variant module and compare what it returns.

    ``source`` is Python code executed in a copy of the variant module's namespace; the value of
    ``result_name`` afterwards is the output. Used for TritonBench-G test sections.
    """

    source: str
    result_name: str = "result_gold"


@dataclass(frozen=True)
class CapturedCall:
    """The ``call_index``-th top-level call of an entry function made by a test section.

    The worker runs ``source`` (seeded) with the module's functions wrapped, keeps the arguments
    of that call, and replays the call on each variant with copies of them.
    """

    source: str
    entry: str
    call_index: int


Recipe = Union[SpecCall, PerfScriptCall, TestSectionCall, CapturedCall]


@dataclass(frozen=True)
class Case:
    """One way of calling the task's code: an id unique within the task, a role and a recipe."""

    id: str
    role: CaseRole
    recipe: Recipe
    seeds: tuple[int, ...] = (0,)
    label: str = ""
    generated: bool = False           # added by testgen from the task's own calls (testgen.augment):
                                      # a correctness case every verification before acceptance runs


@dataclass(frozen=True)
class Tolerance:
    """Elementwise |c - o| <= atol + rtol*|o| and norm ||c - o|| / ||o|| <= rel_norm."""

    atol: float
    rtol: float
    rel_norm: float


@dataclass(frozen=True)
class Task:
    """A kernel file to optimize, with its entry points and cases.

    ``source`` is the importable kernel module (for TritonBench-G, the part before the test
    section). ``support_modules`` are extra importable modules (name, source) the cases need,
    such as TritonBench's ``performance_utils``.
    """

    name: str
    source: str
    entries: tuple[str, ...]
    cases: tuple[Case, ...]
    origin: str
    source_path: str | None = None
    support_modules: tuple[tuple[str, str], ...] = ()
    tolerance_overrides: tuple[tuple[str, Tolerance], ...] = ()
    notes: tuple[str, ...] = field(default=())
    reference: str | None = None      # a plain-PyTorch function in the source that checks the original

    def cases_with_role(self, role: CaseRole) -> tuple[Case, ...]:
        return tuple(c for c in self.cases if c.role is role)

    @property
    def performance_cases(self) -> tuple[Case, ...]:
        return self.cases_with_role(CaseRole.PERFORMANCE)

    @property
    def correctness_cases(self) -> tuple[Case, ...]:
        return self.cases_with_role(CaseRole.CORRECTNESS)

    @property
    def generated_cases(self) -> tuple[Case, ...]:
        """Correctness cases testgen added from the task's own calls (odd sizes, value and
        layout variety); a candidate is accepted only after it passes them too."""
        return tuple(c for c in self.cases if c.generated)

    def case(self, case_id: str) -> Case:
        for c in self.cases:
            if c.id == case_id:
                return c
        raise KeyError(case_id)

    @property
    def source_hash(self) -> str:
        return content_hash(self.source)


def content_hash(text: str) -> str:
    """Short, stable content address of a source text (sha256, 16 hex digits)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def spec_elements(value: object) -> int:
    """Elements of the tensors a recipe's argument describes (``TensorSpec``s, nested in tuples);
    other values count 0."""
    if isinstance(value, TensorSpec):
        n = 1
        for d in value.shape:
            n *= d
        return n
    if isinstance(value, tuple):
        return sum(spec_elements(v) for v in value)
    return 0
