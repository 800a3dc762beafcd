"""Source-to-source transforms of Triton kernel files, by name.

Each transform has ``name``, ``summary``, ``preserves_semantics``, ``applies(analysis, **params)
-> Applicability`` (from the static analysis alone, with the reason when it does not apply) and
``apply(source, analysis=None, **params) -> str`` (libcst rewrites that keep comments and layout;
``TransformError`` with the reason when it cannot).

    launch_params       num_warps / num_stages at launch sites, or on autotune configs
    constexpr_override  a literal block size at a launch; the grid follows
    param_block_override a block size the launching function takes as a parameter, pinned at
                        the top of that function (BLOCK_M = 128); the grid follows
    autotune            @triton.autotune over block sizes and launch options; META grids
    autotune_widen      more configs on an existing @triton.autotune
    autotune_blocks     tile sizes past an autotune's listed range; sizes the key omits
    autotune_pin        @triton.autotune replaced by one config passed at the launches
    loop_pipelining     range(...) loops with loads -> tl.range(..., num_stages=S)
    offset_hints        tl.multiple_of / tl.max_contiguous on pid * BLOCK + arange offsets
    cache_hints         eviction_policy / cache_modifier on loads
    pid_swizzle         grouped program ordering for 2-D tiled kernels
    persistent_grid     1-D grid over tiles -> a few programs per SM looping over tiles
    streaming_reduction whole-row tl.sum (BLOCK = next_power_of_2(N)) -> a loop over N in chunks
    drop_zero_fill      torch.zeros -> torch.empty for a wrapper's buffer a kernel only writes
    hoist_namedtuple    a wrapper's namedtuple class built once at import, not on every call
    heuristic_scale     a tile size or num_warps from @triton.heuristics scaled (x2, /2, ...)
    hoist_invariant_loads loads a loop does not change, moved in front of it (guarded)
    static_unroll       short loops with constant bounds -> tl.static_range

This package needs libcst (an optional dependency: ``pip install tritonforge[transforms]``); the
GPU image lacks it, so only the driver side imports this package.
"""

from __future__ import annotations

from ..errors import EnvironmentProblem, TransformError

try:
    import libcst  # noqa: F401
except ImportError:   # pragma: no cover - exercised on the GPU image only
    raise EnvironmentProblem(
        "tritonforge.transforms needs libcst, which is not installed",
        hint="pip install 'tritonforge[transforms]' (or: pip install libcst)") from None

from .autotune import AutotuneInjection
from .autotune_blocks import AutotuneBlocks
from .autotune_pin import AutotunePin
from .autotune_widen import AutotuneWiden
from .base import Applicability, Transform
from .body import CacheHints, LoopPipelining, OffsetHints
from .configs import ConfigSpec
from .constexpr import ConstexprOverride
from .heuristic_scale import HeuristicScale
from .host_hoist import HoistNamedtuple
from .launch_params import LaunchParams
from .loops import HoistInvariantLoads, StaticUnroll
from .param_block import ParamBlockOverride
from .persistent import PersistentGrid
from .rows import RowsPerProgram
from .streaming import StreamingReduction
from .swizzle import PidSwizzle
from .zero_fill import DropZeroFill

REGISTRY: dict[str, Transform] = {t.name: t for t in (
    LaunchParams(),
    ConstexprOverride(),
    ParamBlockOverride(),
    AutotuneInjection(),
    AutotuneWiden(),
    AutotuneBlocks(),
    AutotunePin(),
    LoopPipelining(),
    OffsetHints(),
    CacheHints(),
    PidSwizzle(),
    PersistentGrid(),
    RowsPerProgram(),
    StreamingReduction(),
    DropZeroFill(),
    HoistNamedtuple(),
    HeuristicScale(),
    HoistInvariantLoads(),
    StaticUnroll(),
)}


def get(name: str) -> Transform:
    """The transform registered under ``name``; TransformError naming the known ones if none."""
    try:
        return REGISTRY[name]
    except KeyError:
        raise TransformError(f"unknown transform {name!r}",
                             hint="known transforms: " + ", ".join(REGISTRY)) from None


__all__ = [
    "Applicability",
    "ConfigSpec",
    "REGISTRY",
    "Transform",
    "TransformError",
    "get",
]
