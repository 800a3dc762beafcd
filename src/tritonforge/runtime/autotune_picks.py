"""What ``@triton.autotune`` chose in this process, per kernel and key, as lines of text.

An autotuned kernel picks its config on the first call with each key, in each process, by timing
every config; which config wins can differ between two processes (and, where the key leaves out
a size that varies, with the order the sizes come in). A verdict on a change to such a kernel then
depends on those picks as much as on the change (bmm_chunk_bwd, H100, 2026-11-23: the same four
candidates 1.14x faster in two calls and up to 121% slower on one case in a third;
chunk_cumsum_kernel's original 2.21 ms on its largest case in one process and 1.19 ms in another).
The timing worker writes the picks into the evaluation's notes so that a run store shows them.
"""

from __future__ import annotations

from typing import Any

# triton is imported inside functions: it reads TRITON_INTERPRET when imported, and driver and test
# processes import this module before they set it (tests/transforms/conftest.py).

MAX_PICKS = 64          # lines per variant: one per (kernel, key); the budget counts them
                        # (search.budget.tuned_keys), so a case ladder of 16 sizes over two
                        # autotuned kernels must fit


def _config_text(config: Any) -> str:
    kwargs = ", ".join(f"{k}={v}" for k, v in sorted(getattr(config, "kwargs", {}).items()))
    opts = [f"num_warps={getattr(config, 'num_warps', '?')}",
            f"num_stages={getattr(config, 'num_stages', '?')}"]
    return ", ".join(p for p in (kwargs, *opts) if p)


def autotune_picks(module: Any, variant: str) -> list[str]:
    """``variant: kernel key -> config`` for every autotuned kernel defined at the top level of
    ``module`` that has tuned at least once (at most ``MAX_PICKS`` lines)."""
    try:
        from triton.runtime.autotuner import Autotuner
    except ImportError:     # pragma: no cover - triton is always there in a worker
        return []
    lines = []
    for name, obj in sorted(vars(module).items()):
        for _ in range(4):      # @triton.heuristics above @triton.autotune wraps the autotuner
            if isinstance(obj, Autotuner) or obj is None:
                break
            obj = getattr(obj, "fn", None)
        if not isinstance(obj, Autotuner):
            continue
        for key, config in list(getattr(obj, "cache", {}).items()):
            lines.append(f"autotune pick {variant}: {name} {key!r} -> {_config_text(config)}")
    return lines[:MAX_PICKS]


__all__ = ["autotune_picks"]
