"""Static analysis of a Triton kernel file: kernels, launch sites, grids and tunable knobs.

``analyze_source(source)`` parses the file (nothing is imported or run) and returns a frozen
``SourceAnalysis``: one ``KernelInfo`` per ``@triton.jit`` function (parameters and how their
constexprs are marked, autotune configs and key, heuristics, dot/atomics/loops/program ids, loads
and stores and the pointer parameters they go through) and one ``LaunchSite`` per
``kernel[grid](...)`` call (or per kernel a local alias may be: ``fx = a if c else b``;
``fx[grid](...)``) (enclosing function, grid and what it depends on, every argument bound
to its parameter, literal constexpr values and where they come from, num_warps/num_stages), with
``LaunchSite.knobs`` giving the search engine the tunable values in typed form.

Dependencies: the standard library's ``ast`` only. The brief suggested libcst, which the source
transforms use to keep formatting; reading needs no formatting, and ``ast`` is about ten times
faster (0.8 s against 17 s with positions for the 142 TritonBench-G files) and present on the GPU
image, where libcst is not, so runtime/profile code may import this package there. Transforms find
the nodes to rewrite again by kernel name and launch order, so the two parsers never have to agree
on positions.
"""

from .core import analyze_source
from .model import (
    AutotuneConfig,
    AutotuneInfo,
    ConstexprKnob,
    ConstexprStyle,
    GridInfo,
    GridKind,
    KernelInfo,
    LaunchArg,
    LaunchKnobs,
    LaunchSite,
    Literal,
    LoopInfo,
    LoopKind,
    MemAccess,
    Param,
    ProgramIdVar,
    SourceAnalysis,
    Span,
    TiledConstexpr,
    TiledOffset,
    ValueOrigin,
)

__all__ = [
    "AutotuneConfig",
    "AutotuneInfo",
    "ConstexprKnob",
    "ConstexprStyle",
    "GridInfo",
    "GridKind",
    "KernelInfo",
    "LaunchArg",
    "LaunchKnobs",
    "LaunchSite",
    "Literal",
    "LoopInfo",
    "LoopKind",
    "MemAccess",
    "Param",
    "ProgramIdVar",
    "SourceAnalysis",
    "Span",
    "TiledConstexpr",
    "TiledOffset",
    "ValueOrigin",
    "analyze_source",
]
