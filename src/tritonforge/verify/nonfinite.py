"""Whether the original makes NaN/Inf from finite inputs on a case (worker side).

A generated case (``testgen``) is kept only where the original computes something that can judge
a candidate. An original that turns finite inputs into NaN or Inf there (a size its masks do not
cover, reading memory past a tensor's end) leaves values that depend on whatever that memory
held: on an H100 (2026-11-25) chunk_gated_attention's original made NaN/Inf on its odd-size
generated cases, and every candidate failed there on NaN patterns the original could not
reproduce in another process. The verifier notes such a case (``NOTE``); the stability check of
``testgen.validate`` drops it. Elements still holding the poison value (never written by the
original: ``verify.poison``) do not count.
"""

from __future__ import annotations

from typing import Iterable

import torch

from .kinds import NONFINITE_NOTE
from .poison import poison_mask
from .runner import Run
from .tree import iter_tensors

NOTE = NONFINITE_NOTE


def _floats(value: object, path: str) -> list[torch.Tensor]:
    return [t for _, t in iter_tensors(value, path) if t.dtype.is_floating_point and t.numel()]


def nonfinite_from_finite(run: Run, written: Iterable[str]) -> tuple[int, int] | None:
    """(non-finite elements, elements) over ``run``'s result and the arguments it wrote, when
    every floating input was finite before the call and some output element is not; else None."""
    inputs = [t for p, t in run.pristine.items() for t in _floats(t, p)]
    if any(not bool(torch.isfinite(t).all()) for t in inputs):
        return None
    outputs = _floats(run.result, "return") + [t for p in written if p in run.args
                                               for t in _floats(run.args[p], p)]
    bad = total = 0
    for t in outputs:
        mask = ~torch.isfinite(t)
        unwritten = poison_mask(t)
        if unwritten is not None:
            mask &= ~unwritten
        bad += int(mask.sum().item())
        total += t.numel()
    return (bad, total) if bad else None
