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

import os
import types
import weakref
from contextlib import contextmanager
from typing import Any, Callable, Iterator

from .original_runs import case_key

# triton is imported inside functions: it reads TRITON_INTERPRET when imported, and driver and test
# processes import this module before they set it (tests/transforms/conftest.py).

GROSS_NORM = 0.05         # a config differing more than this (relative norm) is not rounding
GROSS_SHARE = 0.01        # an exact-dtype output (integers, bools: no norm) differing in more than
                          # this share of its elements is not a config's rounding either
CONFIGS_PER_TUNER = 4     # other configs tried per autotuner, chosen to cover its settings


def _chains(module: types.ModuleType) -> Iterator[list[Any]]:
    """Each top-level object of ``module`` with what it wraps (``obj``, ``obj.fn``, ... four deep:
    ``@triton.heuristics`` over ``@triton.autotune`` over ``@triton.jit``)."""
    for obj in vars(module).values():
        chain: list[Any] = []
        while obj is not None and len(chain) < 4:
            chain.append(obj)
            obj = getattr(obj, "fn", None)
        yield chain


def autotuners(module: types.ModuleType) -> list[Any]:
    """The ``triton.autotune`` objects defined at the top level of ``module`` (under
    ``@triton.heuristics`` too), each once; ``runtime.quick_autotune`` finds them here too."""
    try:
        from triton.runtime.autotuner import Autotuner
    except ImportError:      # pragma: no cover - triton is always there in a worker
        return []
    found: list[Any] = []
    for chain in _chains(module):
        tuner = next((o for o in chain if isinstance(o, Autotuner)), None)
        if tuner is not None and not any(tuner is f for f in found):
            found.append(tuner)
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


# num_warps a kernel without an autotuner is also run at (``launch_variants``): a config search
# candidate changes it, and with it how a reduction is split over threads
LAUNCH_WARPS = (1, 2, 4, 8, 16)


def launched_kernels(module: types.ModuleType) -> list[Any]:
    """The ``triton.jit`` kernels defined at the top level of ``module`` with no autotuner above
    them (under ``@triton.heuristics`` too), each once."""
    try:
        from triton.runtime.autotuner import Autotuner
        from triton.runtime.jit import JITFunction
    except ImportError:      # pragma: no cover - triton is always there in a worker
        return []
    found: list[Any] = []
    for chain in _chains(module):
        first = next((o for o in chain if isinstance(o, (Autotuner, JITFunction))), None)
        if isinstance(first, JITFunction) and not any(first is f for f in found):
            found.append(first)
    return found


@contextmanager
def launched_with_warps(kernels: list[Any], num_warps: int) -> Iterator[None]:
    """Every launch of ``kernels`` runs with ``num_warps`` until exit (their ``run`` wrapped on
    the instance; the class's is what runs once it is taken off)."""
    patched = []
    try:
        for kernel in kernels:
            inner = kernel.run

            def run(*args: Any, _inner: Any = inner, **kwargs: Any) -> Any:
                kwargs["num_warps"] = num_warps
                return _inner(*args, **kwargs)
            kernel.run = run
            patched.append(kernel)
        yield
    finally:
        for kernel in patched:
            kernel.__dict__.pop("run", None)


def launch_variants(module: types.ModuleType) -> Iterator[str]:
    """Run ``module``'s kernels that no autotuner picks for (``launched_kernels``) at each of
    ``LAUNCH_WARPS`` in turn; yields a description of each (the caller runs the original inside
    each step). Nothing on the CPU interpreter, where num_warps changes nothing.

    The result of an original at another num_warps is one its own code computes under another
    schedule: a kernel that sums a row in fp16 across threads rounds differently at each, and
    a config candidate's element that lands within the tolerance of one of those results holds a
    value the original itself computes. On four H100s (2026-11-27) lora_expand_gemv's best
    candidate (num_warps only) failed its final check on one element of 256 of a generated
    odd-size case (0.171875 against 0.1875, error norm 8e-4 against a 5e-3 limit)."""
    if os.environ.get("TRITON_INTERPRET") == "1":
        return
    kernels = launched_kernels(module)
    if not kernels:
        return
    for warps in LAUNCH_WARPS:
        with launched_with_warps(kernels, warps):
            yield f"num_warps={warps}"


# per original module: {case key: whether its result at another num_warps leaves the tolerance}
_SENSITIVE: "weakref.WeakKeyDictionary[types.ModuleType, dict[Any, bool]]" = \
    weakref.WeakKeyDictionary()


def mark_schedule_sensitive(module: types.ModuleType, case: Any) -> None:
    """Record that ``module``'s result on ``case`` leaves the tolerance at another num_warps (the
    guarded checks found a candidate's outliers among such results)."""
    _SENSITIVE.setdefault(module, {})[case_key(case)] = True


def schedule_sensitive(module: types.ModuleType, case: Any,
                       call: Callable[[], Any],
                       differs: Callable[[Any, Any], bool]) -> bool:
    """Whether ``module``'s result on ``case`` leaves the tolerance when its kernels run at
    another num_warps (``launch_variants``): ``call()`` runs the original once on the case and
    returns what is compared, ``differs(a, b)`` says whether two such results differ beyond the
    tolerance. Where it does, a bare or timed call of a candidate is judged as one that may round
    otherwise (gross differences only), as for an autotuned original: the guarded checks hold
    each element to a value the original computes. Cached per module and case."""
    known = _SENSITIVE.setdefault(module, {})
    key = case_key(case)
    if key not in known:
        known[key] = False
        try:
            base = call()
            for _described in launch_variants(module):
                if differs(base, call()):
                    known[key] = True
                    break
        except Exception:  # noqa: BLE001 - the original failing at a num_warps: not sensitive
            pass
    return known[key]


__all__ = ["GROSS_NORM", "LAUNCH_WARPS", "autotuners", "config_variants", "launch_variants",
           "launched_kernels", "launched_with_warps", "mark_schedule_sensitive", "only_config",
           "schedule_sensitive"]
