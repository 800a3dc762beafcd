"""Whether a candidate's differing elements hold values the original itself produced there.

A racing original (a scatter where several programs write the same destination, as in
TritonBench-G's destindex_copy, whose DestLoc repeats indices) leaves at each contested
element whichever write landed last. Two runs of it differ on a few dozen elements; a candidate
that changes the launch (num_warps, the grid) changes which write tends to win, and then
differs from the reference run on more elements than the original's own runs do: on the H100
(2026-11-24) the verifier refused four such destindex_copy candidates on 120-184 differing elements against a
bound of 134. Counting is the wrong test for a race; the right one is per element: every
element where the candidate differs from the reference run must hold, within tolerance, a value
that one of the original's own runs left at that same element. A value no run of the original
ever produced there is unexplained, however few of them there are.
"""

from __future__ import annotations

from typing import Sequence

import torch

from ..model import Tolerance
from .runner import Run
from .tree import iter_tensors


def tensor_at(run: Run, path: str) -> torch.Tensor | None:
    """The tensor a verifier path (``return[1]``, ``arg[0][4]``) names in ``run`` (None: none)."""
    if path.startswith("return"):
        return dict(iter_tensors(run.result, "return")).get(path)
    return run.args.get(path)


class OwnValues:
    """The tensors the original's own runs left at the outputs in question, and nothing else of
    those runs: a run holds clones of every argument, and a KV-cache copy's can be gigabytes, so
    the up to nine runs a race check makes keep only what the check reads."""

    def __init__(self, paths: Sequence[str]):
        self.paths = tuple(paths)
        self.values: dict[str, list[torch.Tensor]] = {p: [] for p in self.paths}
        self.runs = 0

    def add(self, run: Run) -> None:
        self.runs += 1
        for path in self.paths:
            t = tensor_at(run, path)
            if t is not None:
                self.values[path].append(t)


def _close(a: torch.Tensor, b: torch.Tensor, tol: Tolerance) -> torch.Tensor:
    """Elementwise: ``a`` equals ``b`` within ``tol`` (NaN faces NaN, an Inf the same Inf)."""
    x, y = a.detach().double(), b.detach().double()
    both_nan = torch.isnan(x) & torch.isnan(y)
    finite = torch.isfinite(x) & torch.isfinite(y)
    near = finite & ((x - y).abs() <= tol.atol + tol.rtol * y.abs())
    same_inf = ~finite & ~torch.isnan(x) & ~torch.isnan(y) & (x == y)
    return both_nan | near | same_inf


def unexplained(cand: torch.Tensor, ref: torch.Tensor, others: Sequence[torch.Tensor],
                tol: Tolerance) -> int:
    """How many elements of ``cand`` differ from ``ref`` and from every one of ``others`` (the
    original's other runs) at the same element; -1 when the tensors cannot be compared so
    (shapes or dtypes differ, or not floating point)."""
    if not (cand.is_floating_point() and ref.is_floating_point()) or cand.shape != ref.shape \
            or cand.dtype != ref.dtype or any(o.shape != ref.shape for o in others):
        return -1
    left = ~_close(cand, ref, tol)
    for other in others:
        if not bool(left.any()):
            break
        left &= ~_close(cand, other, tol)
    return int(left.sum().item())


__all__ = ["OwnValues", "tensor_at", "unexplained"]
