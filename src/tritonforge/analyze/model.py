"""What the static analysis of a kernel file finds: kernels, launch sites and their tunable knobs.

Everything is a frozen dataclass holding plain values and source text, so that an analysis can be
stored, hashed, compared and sent to another process. Positions are 1-based lines and 0-based
character columns (what ``ast`` gives, converted from bytes to characters).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Union

# A Python literal as it appears in source: ``4``, ``1.0``, ``True``, ``"evict_first"``, ``None``.
Literal = Union[int, float, bool, str, None]


class ConstexprStyle(str, enum.Enum):
    """How a parameter was marked ``tl.constexpr``."""

    ANNOTATION = "annotation"        # X: tl.constexpr
    STRING = "string"                # X: "tl.constexpr" (a forward-reference string)


@dataclass(frozen=True)
class Span:
    """Where a node sits in the source: lines are 1-based and inclusive, columns 0-based."""

    line: int
    col: int
    end_line: int
    end_col: int


@dataclass(frozen=True)
class Param:
    """One parameter of a kernel, in declaration order."""

    name: str
    index: int
    annotation: str | None = None            # source text of the annotation, if any
    default: str | None = None               # source text of the default, if any
    constexpr: ConstexprStyle | None = None  # None: a runtime argument

    @property
    def is_constexpr(self) -> bool:
        return self.constexpr is not None


@dataclass(frozen=True)
class AutotuneConfig:
    """One ``triton.Config(...)`` of an ``@triton.autotune`` decorator."""

    kwargs: tuple[tuple[str, Literal], ...]   # constexpr name -> literal value (non-literals: None)
    num_warps: int | None = None
    num_stages: int | None = None
    source: str = ""


@dataclass(frozen=True)
class AutotuneInfo:
    """An ``@triton.autotune`` decorator as written."""

    configs: tuple[AutotuneConfig, ...]       # every triton.Config call found in ``configs=``
    key: tuple[str, ...]
    configs_source: str                       # the ``configs=`` expression as written
    configs_literal: bool                     # a list literal of triton.Config calls (editable)
    restore_value: tuple[str, ...] = ()
    reset_to_zero: tuple[str, ...] = ()
    has_prune: bool = False                   # prune_configs_by= present
    has_hooks: bool = False                   # pre_hook= / post_hook= present
    configs_extendable: bool = False          # a list display (maybe ``[...] + more``) to append to
    configs_complete: bool = False            # every config is one of ``configs`` as written
                                              # (a list of Config calls or a comprehension)

    @property
    def tuned_names(self) -> tuple[str, ...]:
        """Constexpr names any config sets."""
        seen: dict[str, None] = {}
        for cfg in self.configs:
            for name, _ in cfg.kwargs:
                seen.setdefault(name, None)
        return tuple(seen)


class LoopKind(str, enum.Enum):
    RANGE = "range"                  # for i in range(...)
    TL_RANGE = "tl.range"            # for i in tl.range(...)
    STATIC_RANGE = "tl.static_range"  # for i in tl.static_range(...): unrolled at compile time
    OTHER_FOR = "for"                # for over something else
    WHILE = "while"


@dataclass(frozen=True)
class LoopInfo:
    """A loop inside a kernel; ``index`` counts loops of the kernel in source order."""

    index: int
    kind: LoopKind
    span: Span
    target: str                      # loop variable(s) as written ("" for while)
    loads: int                       # tl.load calls inside (nested loops included)
    innermost: bool                  # holds no other loop
    depth: int                       # 0 for a loop directly in the kernel body
    num_stages: int | None = None    # tl.range(..., num_stages=S) when given as a literal


@dataclass(frozen=True)
class TiledConstexpr:
    """A constexpr that multiplies a program id: the kernel's tile size along those grid axes."""

    name: str
    axes: tuple[int, ...]            # grid axes whose program id it multiplies (-1: unknown)


@dataclass(frozen=True)
class MemAccess:
    """One tl.load / tl.store / tl.atomic_* call of a kernel."""

    op: str                          # "load", "store", "atomic_add", ...
    span: Span
    bases: tuple[str, ...]           # pointer params it goes through ("" unknown: empty)
    in_loop: bool
    masked: bool
    block_ptr: bool = False          # through tl.make_block_ptr / tl.advance
    eviction_policy: str | None = None
    cache_modifier: str | None = None


@dataclass(frozen=True)
class TiledOffset:
    """``offs = pid * BLOCK + tl.arange(0, BLOCK)``: a contiguous tile of BLOCK starting at a
    multiple of BLOCK (what ``tl.multiple_of``/``tl.max_contiguous`` hints describe)."""

    name: str
    span: Span                       # the assignment statement
    block: str                       # the block size as written (a constexpr name or a literal)
    axes: tuple[int, ...]
    hinted: bool                     # already wrapped in tl.multiple_of / tl.max_contiguous
    top_level: bool                  # a statement directly in the kernel body


@dataclass(frozen=True)
class ProgramIdVar:
    """``pid = tl.program_id(axis)`` as a statement directly in the kernel body."""

    name: str
    axis: int
    span: Span
    reassigned: bool                 # assigned again elsewhere in the kernel


@dataclass(frozen=True)
class KernelInfo:
    """One ``@triton.jit`` function and what its body does."""

    name: str
    span: Span                       # from the first decorator to the last line of the body
    def_line: int                    # the line of ``def``
    params: tuple[Param, ...]
    decorators: tuple[str, ...]      # decorator expressions as written, outermost first
    autotune: AutotuneInfo | None
    heuristics: tuple[str, ...]      # names that @triton.heuristics computes
    jit_kwargs: str = ""             # arguments of @triton.jit(...) as written, if called
    uses_dot: bool = False
    atomics: tuple[str, ...] = ()    # atomic ops used, e.g. ("atomic_add",)
    loops: tuple[LoopInfo, ...] = ()
    program_id_axes: tuple[int, ...] = ()   # literal axes of tl.program_id calls (-1: not literal)
    uses_num_programs: bool = False
    loads: int = 0
    stores: int = 0
    loaded_params: tuple[str, ...] = ()     # pointer params read through (tl.load)
    stored_params: tuple[str, ...] = ()     # pointer params written through (tl.store)
    atomic_params: tuple[str, ...] = ()     # pointer params updated with tl.atomic_*
    unresolved_accesses: int = 0            # stores/atomics whose base pointer was not found
    tiled_constexprs: tuple[TiledConstexpr, ...] = ()
    arange_constexprs: tuple[str, ...] = ()  # constexprs used as a tl.arange bound (powers of 2)
    compared_params: tuple[str, ...] = ()   # runtime params compared or used as loop bounds
    compared_constexprs: tuple[str, ...] = ()  # constexprs compared or used as loop bounds,
                                               # not tl.arange bounds (a problem size: T, N)
    has_return: bool = False                # a ``return`` anywhere in the body
    return_guards: tuple[int, ...] = ()     # lines of ``if cond: return`` statements directly in
                                            # the body (a bare return, no else)
    other_returns: int = 0                  # returns that are neither such a guard nor a bare
                                            # return ending the body
    nested: bool = False                    # defined inside another function or class
    stepped_constexprs: tuple[str, ...] = ()  # constexprs that step a loop (range(0, N, BLOCK))
    program_id_calls: tuple[int, ...] = ()  # axis of every tl.program_id call, in order
    pid_vars: tuple[ProgramIdVar, ...] = ()
    offsets: tuple[TiledOffset, ...] = ()
    accesses: tuple[MemAccess, ...] = ()
    body_names: tuple[str, ...] = ()        # every name assigned in the body
    has_varargs: bool = False               # *args / **kwargs in the signature
    reassigned_params: tuple[str, ...] = ()  # params the body assigns to (X = X + pid * N)

    @property
    def param_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.params)

    @property
    def constexpr_params(self) -> tuple[Param, ...]:
        return tuple(p for p in self.params if p.is_constexpr)

    @property
    def constexpr_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.params if p.is_constexpr)

    @property
    def pointer_params(self) -> tuple[str, ...]:
        """Params used as the base of a load, store or atomic (in declaration order)."""
        used = set(self.loaded_params) | set(self.stored_params) | set(self.atomic_params)
        return tuple(p.name for p in self.params if p.name in used)

    @property
    def in_place_params(self) -> tuple[str, ...]:
        """Pointer params both read and written: running the kernel twice changes the result."""
        written = set(self.stored_params) | set(self.atomic_params)
        return tuple(p for p in self.loaded_params if p in written)

    @property
    def block_constexprs(self) -> tuple[str, ...]:
        """Constexprs that act as tile sizes (they multiply a program id or step a loop): the
        ones a search may vary without changing what the kernel computes, provided the grid
        follows. Others (HEAD_DIM, ACTIVATION, IS_CAUSAL) describe the problem itself.

        One that multiplies a program id counts only if it also sizes something: a tl.arange, a
        loop's range or a cdiv. A convolution's constexpr ``stride_height`` multiplies a
        pid-derived offset too (triton_conv2d_fwd), and offering it as a tile wasted two of six
        candidates a round on a different convolution."""
        sizing = (set(self.arange_constexprs) | set(self.compared_constexprs)
                  | set(self.stepped_constexprs))
        tiled = {t.name for t in self.tiled_constexprs if t.name in sizing} \
            | set(self.stepped_constexprs)
        return tuple(p.name for p in self.params if p.is_constexpr and p.name in tiled)

    def param(self, name: str) -> Param | None:
        for p in self.params:
            if p.name == name:
                return p
        return None

    def tiled(self, name: str) -> TiledConstexpr | None:
        for t in self.tiled_constexprs:
            if t.name == name:
                return t
        return None


class ValueOrigin(str, enum.Enum):
    """Where the value a launch passes for a parameter comes from."""

    KEYWORD = "keyword"              # BLOCK=64 (a literal at the launch)
    POSITIONAL = "positional"        # ..., 64) (a literal at the launch)
    LOCAL = "local"                  # BLOCK = 64 in the enclosing function, then BLOCK passed
    GLOBAL = "global"                # BLOCK = 64 at module level, then BLOCK passed
    COMPUTED = "computed"            # any other expression: not a literal
    DEFAULT = "default"              # not passed: the kernel's default
    AUTOTUNE = "autotune"            # set by @triton.autotune configs
    HEURISTICS = "heuristics"        # set by @triton.heuristics


@dataclass(frozen=True)
class LaunchArg:
    """One argument of a launch, bound to the kernel parameter it fills when that is known."""

    source: str                      # the expression as written
    span: Span
    position: int | None = None      # index among positional args; None for a keyword
    keyword: str | None = None
    param: str | None = None         # the kernel parameter it binds to
    literal: Literal = None          # its value when it is (or names) a literal
    is_literal: bool = False
    origin: ValueOrigin = ValueOrigin.COMPUTED
    variable: str | None = None      # the local/global name it reads, when it is a bare name
    variable_line: int | None = None  # the line assigning that name its literal
    assigned: str | None = None      # what that name is assigned, when assigned once (any value)


@dataclass(frozen=True)
class ConstexprKnob:
    """A constexpr of one launch, with its current value and whether a rewrite can change it."""

    name: str
    value: Literal                   # the literal value now (None if not a literal)
    origin: ValueOrigin
    source: str = ""                 # how it is written at the launch (or the default / config)
    tunable: bool = False            # constexpr_override can set it here
    tiles_grid: bool = False         # the kernel multiplies a program id by it
    block_like: bool = False         # a tile size (KernelInfo.block_constexprs): safe to vary
    grid_follows: bool = False       # the grid is written in terms of it


@dataclass(frozen=True)
class LaunchKnobs:
    """The tunable knobs of one launch site, in typed form, for the search engine."""

    site: int
    kernel: str
    constexprs: tuple[ConstexprKnob, ...]
    num_warps: int | None            # literal value at the launch (None: not given / computed)
    num_stages: int | None
    num_warps_given: bool = False    # num_warps= present at the launch (maybe computed)
    num_stages_given: bool = False
    autotuned: bool = False          # the kernel has @triton.autotune: launch knobs are configs

    def constexpr(self, name: str) -> ConstexprKnob | None:
        for k in self.constexprs:
            if k.name == name:
                return k
        return None

    @property
    def tunable_constexprs(self) -> tuple[ConstexprKnob, ...]:
        return tuple(k for k in self.constexprs if k.tunable)


class GridKind(str, enum.Enum):
    TUPLE = "tuple"                  # (a, b) or a bare expression, inline or through a local
    LAMBDA = "lambda"                # lambda META: ... (inline or through a local)
    FUNCTION = "function"            # a def grid(META) in scope
    OTHER = "other"


@dataclass(frozen=True)
class GridInfo:
    """The grid of a launch: as written, and what it depends on."""

    source: str                      # the subscript expression as written
    kind: GridKind
    resolved: str                    # after following a bare local name to its assignment
    dims: int | None                 # number of grid axes when known
    names: tuple[str, ...]           # every name it reads, following local assignments
    meta_keys: tuple[str, ...]       # META['X'] keys a lambda/function grid reads
    int_literals: tuple[int, ...]    # integer literals in it, following local assignments
    binding: str = "inline"          # a bare name: "local" (the launching function assigns it
                                     # once, before the launch), "global" (only the module
                                     # assigns it, once), "other" (anything else)


@dataclass(frozen=True)
class LaunchSite:
    """One ``kernel[grid](...)`` call; ``index`` counts launch sites of the file in source order.

    A call through a local alias (``fx = kern_a if gemma else kern_b`` then ``fx[grid](...)``)
    is one site per kernel the alias may be bound to, all with the call's span, consecutive
    indices, ``alias`` the local name and ``alias_kernels`` every such kernel (this one among
    them): a change written at that call reaches whichever of them runs."""

    index: int
    kernel: str
    span: Span
    function: str | None             # qualified enclosing function, e.g. "Softmax.forward"
    grid: GridInfo
    args: tuple[LaunchArg, ...]      # positional then keyword, as written
    num_warps: LaunchArg | None = None
    num_stages: LaunchArg | None = None
    other_options: tuple[str, ...] = ()   # other launch keywords such as num_ctas, maxnreg
    has_star_args: bool = False      # *args / **kwargs at the launch: binding incomplete
    knobs: LaunchKnobs | None = None
    alias: str | None = None         # the local name launched through (``fx[grid](...)``)
    alias_kernels: tuple[str, ...] = ()   # every kernel that name may be bound to
    star_kwargs: bool = False        # a ``**kwargs`` splat among them: launch options may hide there

    @property
    def alias_partners(self) -> tuple[str, ...]:
        """The other kernels the same call may launch (empty for a direct launch)."""
        return tuple(k for k in self.alias_kernels if k != self.kernel)

    def arg_for(self, param: str) -> LaunchArg | None:
        for a in self.args:
            if a.param == param:
                return a
        return None


@dataclass(frozen=True)
class SourceAnalysis:
    """Everything the static analysis found in one source file."""

    source_hash: str
    kernels: tuple[KernelInfo, ...]
    launch_sites: tuple[LaunchSite, ...]
    entry_candidates: tuple[str, ...]       # top-level callables that reach a launch
    functions: tuple[str, ...] = ()         # top-level functions
    classes: tuple[str, ...] = ()           # top-level classes
    module_names: tuple[str, ...] = ()      # names bound by top-level imports ("triton", "tl")
    notes: tuple[str, ...] = field(default=())
    # the analyzed text itself, for transforms whose ``applies`` must read a kernel's body
    source: str = field(default="", repr=False, compare=False)

    def kernel(self, name: str) -> KernelInfo:
        for k in self.kernels:
            if k.name == name:
                return k
        raise KeyError(name)

    def has_kernel(self, name: str) -> bool:
        return any(k.name == name for k in self.kernels)

    def sites_of(self, kernel: str) -> tuple[LaunchSite, ...]:
        return tuple(s for s in self.launch_sites if s.kernel == kernel)

    def same_call(self, site: LaunchSite) -> tuple[LaunchSite, ...]:
        """The other sites of the call ``site`` is (an alias call's other kernels)."""
        if not site.alias_partners:
            return ()
        return tuple(s for s in self.launch_sites if s.span == site.span and s.index != site.index)

    def site(self, index: int) -> LaunchSite:
        for s in self.launch_sites:
            if s.index == index:
                return s
        raise KeyError(index)

    @property
    def knobs(self) -> tuple[LaunchKnobs, ...]:
        return tuple(s.knobs for s in self.launch_sites if s.knobs is not None)
