"""The original's autotune configs as part of its own run-to-run variation.

An autotuned original computes its result with whichever listed config its autotuner picks in
that process, and configs can round differently: a split-K GEMM that adds fp16 partial tiles
with atomics differs from the one-pass config in the last bits of many elements. A candidate
that fixes one of the original's own configs (``autotune_pin``), or an original whose pick
changed between processes, then "mismatches" by rounding alone: int4_matmul's pinned and
pipelined candidates were refused this way on the H100 (2026-11-24) once verification workers
picked configs cheaply (``runtime.quick_autotune``), where the original had picked the one-pass
config and the candidates ran split-K.

``config_variants`` yields the original re-run under a few other configs of its own autotune
list (one autotuner at a time, its cache put back afterwards); the verifier counts their
differences from the reference run as the original's own variation, exactly like a re-run that
differs (``verify.differential._within_self_variation``). A config whose result is far from the
reference (norm error over ``GROSS_NORM``, e.g. one the original's own bounds checks do not
cover) is not counted: such a difference is a broken config, not rounding, and must never let a
wrong candidate through.
"""

from __future__ import annotations

import types
from contextlib import contextmanager
from typing import Any, Iterator

# triton is imported inside functions: it reads TRITON_INTERPRET when imported, and driver and test
# processes import this module before they set it (tests/transforms/conftest.py).

GROSS_NORM = 0.05         # a config differing more than this (relative norm) is not rounding
GROSS_SHARE = 0.01        # an exact-dtype output (integers, bools: no norm) differing in more than
                          # this share of its elements is not a config's rounding either
CONFIGS_PER_TUNER = 4     # other configs tried per autotuner, chosen to cover its settings


def autotuners(module: types.ModuleType) -> list[Any]:
    """The ``triton.autotune`` objects defined at the top level of ``module`` (under
    ``@triton.heuristics`` too), each once; ``runtime.quick_autotune`` finds them here too."""
    try:
        from triton.runtime.autotuner import Autotuner
    except ImportError:      # pragma: no cover - triton is always there in a worker
        return []
    found: list[Any] = []
    for obj in vars(module).values():
        for _ in range(4):
            if isinstance(obj, Autotuner):
                if not any(obj is f for f in found):
                    found.append(obj)
                break
            obj = getattr(obj, "fn", None)
            if obj is None:
                break
    return found


def may_round_otherwise(*modules: types.ModuleType | None) -> bool:
    """Whether a call of these modules' kernels may round otherwise than in verification: one of
    them autotunes (another process, or another autotune mode, can pick another config). Without
    an autotuner a bare or timed call runs the very configs verification judged, and any
    difference beyond the tolerance is the candidate's."""
    return any(m is not None and autotuners(m) for m in modules)


def _settings(config: Any) -> set[tuple[str, Any]]:
    pairs = set(getattr(config, "kwargs", {}).items())
    return pairs | {("num_warps", getattr(config, "num_warps", None)),
                    ("num_stages", getattr(config, "num_stages", None))}


def _diverse(configs: list[Any], limit: int) -> list[Any]:
    """Up to ``limit`` of ``configs`` that between them set as many distinct values of each
    parameter as possible (greedy: each next one adds the most values not yet seen), so that a
    rare setting such as int4_matmul's SPLIT_K=2 is among them."""
    chosen: list[Any] = []
    seen: set[tuple[str, Any]] = set()
    rest = list(configs)
    while rest and len(chosen) < limit:
        best = max(rest, key=lambda c: len(_settings(c) - seen))
        if chosen and not _settings(best) - seen:
            break
        chosen.append(best)
        seen |= _settings(best)
        rest = [c for c in rest if c is not best]
    return chosen


@contextmanager
def only_config(tuner: Any, config: Any) -> Iterator[None]:
    """``tuner`` runs ``config`` alone (no benchmark: one config is never timed) until exit;
    its config list and its cache of picks are restored afterwards."""
    configs, cache = tuner.configs, dict(getattr(tuner, "cache", {}))
    tuner.configs = [config]
    tuner.cache = {}
    try:
        yield
    finally:
        tuner.configs = configs
        tuner.cache = cache


def config_variants(module: types.ModuleType, per_tuner: int = CONFIGS_PER_TUNER) -> Iterator[str]:
    """Put ``module``'s autotuners, one at a time, on other configs of their own lists; yields a
    description of each (the caller runs the original inside each step)."""
    for tuner in autotuners(module):
        picked = list(getattr(tuner, "cache", {}).values())
        others = [c for c in tuner.configs if not any(c is p for p in picked)]
        for config in _diverse(others, per_tuner):
            with only_config(tuner, config):
                yield f"{getattr(getattr(tuner, 'fn', None), '__name__', 'kernel')}: {config}"


__all__ = ["GROSS_NORM", "autotuners", "config_variants", "only_config"]
