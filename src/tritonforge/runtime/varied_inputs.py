"""Inputs that change from one timed turn to the next, so no variant is timed on a remembered answer
(worker side).

The timer calls each variant hundreds of times on one case's inputs; the verifier's calls each get
new inputs. A variant that memoizes its result by the inputs' contents (a checksum of every input,
compared with the last call's, kept in Triton kernels and scratch tensors that the freshness and
census checks do not flag) is right on every call the verifier makes and does almost no work under
the timer: a GEMM timed on its checksum and a copy. Its results are correct, so no correctness check
can refuse it; the timer must not let it hit.

``VariedInputs.step()`` halves one element of every floating-point tensor among a variant's
arguments (a different element each step: a multiplicative hash of the step's number over the
tensor's elements), so that no two steps leave the inputs as they were; and it swaps one pair of
neighbouring elements in every ``SPREAD`` of its elements (at an offset the step's number picks),
so that a step changes every row of a matrix wider than ``SPREAD``. One element changed alone
left a variant free to keep its last inputs and result and redo only the part the changed
element reaches (one row of a GEMM's output, after a comparison that reads the inputs once): right
on every call, and far cheaper under the timer than the original. A swap keeps every value one
the tensor held, so nothing decays and no value appears that was not there. The timer steps every variant
once per turn, before the L2 flush, outside the timed region (``runtime.timing``): the variants of a
case start from copies of the same inputs and take the same steps, so at every turn they compute on
the same values, and the last timed results the timer keeps (``verify.timed_calls``) stay comparable.
Halving keeps a value's sign and finiteness (an infinity stays one, a NaN stays one) and never
overflows; a value halved to zero stays there, so a tensor of a few elements stops changing after a
hundred or so turns in fp32 (a few dozen in fp16): what a memo keyed on such tensors alone could
still exploit, where the probe's changed inputs (``verify.shipped``) catch one that skips the rest.

An integer value moved by one can point out of bounds, so integer tensors are varied only where
nothing else is (no floating-point tensor to halve: a memo keyed on integer inputs alone is then
the only memo that could hit), and only by swapping two of their elements within one row of the
last dimension, both non-negative, the larger first: every value stays one the row already held,
so an index that was in bounds stays in bounds (a -1 padding stays where it was), and a
permutation stays a permutation; each swap undoes an inversion, so no state comes back. A tensor
whose every row is sorted (offsets, cumulative lengths: a swap would make a length negative) is
not varied; a row in sorted order has no swap left, so a small tensor stops changing sooner than a
halved one.
"""

from __future__ import annotations

from typing import Any

import torch

from ..verify.tree import iter_tensors, unravel

_HASH = 2654435761      # a prime: step i lands on element (i * _HASH + _OFFSET) % numel, distinct
_OFFSET = 40503         # for the first numel steps of any tensor whose size it does not divide
MAX_TENSORS = 32        # a call with more floating-point arguments has the first ones varied
_WINDOW = 64            # places of a row an integer swap looks at for an inverted pair
_ROWS = 4               # rows it looks at (one gather in all), where the first is sorted there
SPREAD = 31             # a float tensor has one neighbouring pair in this many elements swapped
# (a prime: a view of any other width, transposed or not, gets a swap in each of its rows)


def _variable(t: torch.Tensor) -> bool:
    return t.is_floating_point() and t.numel() > 0 and t.dtype not in _NO_ARITHMETIC


_NO_ARITHMETIC = tuple(getattr(torch, name) for name in
                       ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz")
                       if hasattr(torch, name))


class VariedInputs:
    """The floating-point tensors of one invocation's arguments (where it has none, its integer
    tensors that can be swapped), and the steps taken on them."""

    def __init__(self, arguments: Any):
        self.tensors: list[torch.Tensor] = _distinct(arguments, _variable)
        if not self.tensors:
            self.tensors = _distinct(arguments, _swappable)
        self.steps = 0

    def step(self) -> None:
        """Halve one element of each float tensor and swap its spread pairs, or swap two of an
        integer one (outside any timed region: it launches a few kernels per tensor; an integer
        swap reads its window back). A tensor that refuses the write (an inference tensor, a read-only view) is varied
        no further: the same step fails for every variant's copy, so they stay in step."""
        self._take(self.steps)
        self.steps += 1

    def replay(self) -> None:
        """Take every step taken so far again, in order, on the tensors as they stand now: the
        caller restored them to their values before the first step (``verify.timed_calls``, one
        call of the original on the inputs its last timed call saw, from its pristine
        arguments)."""
        for i in range(self.steps):
            self._take(i)

    def _take(self, i: int) -> None:
        with torch.no_grad():
            for t in list(self.tensors):
                try:
                    if t.is_floating_point():
                        _spread_swap(t, i)
                        t.data[unravel((i * _HASH + _OFFSET) % t.numel(), tuple(t.shape))].mul_(0.5)
                    else:
                        _swap(t, i)
                except Exception:  # noqa: BLE001 - an input that refuses it is left as it is
                    self.tensors.remove(t)


def _flat_view(t: torch.Tensor) -> torch.Tensor | None:
    """``t``'s elements as a one-dimensional view of its own storage, in memory order (a
    transposed or permuted view taken back to its layout); None where no such view exists."""
    if t.is_contiguous():
        return t.view(-1)
    order = sorted(range(t.dim()), key=lambda d: t.stride(d), reverse=True)
    permuted = t.permute(order)
    return permuted.view(-1) if permuted.is_contiguous() else None


def _spread_swap(t: torch.Tensor, i: int) -> None:
    """Step ``i``'s swaps on a float tensor: the element at ``k * SPREAD + offset`` (in memory
    order) with the next one, for every ``k``; three launches (a gather's copy, two copies)."""
    flat = _flat_view(t.data)
    if flat is None or flat.numel() < 2 * SPREAD:
        return
    off = (i * _HASH + 3 * _OFFSET) % SPREAD
    pairs = (flat.numel() - 2 - off) // SPREAD + 1
    first = flat[off: off + SPREAD * (pairs - 1) + 1: SPREAD]
    second = flat[off + 1: off + SPREAD * (pairs - 1) + 2: SPREAD]
    kept = first.clone()
    first.copy_(second)
    second.copy_(kept)


def _distinct(arguments: Any, keep) -> list[torch.Tensor]:
    seen: set[int] = set()
    out: list[torch.Tensor] = []
    for _, t in iter_tensors(arguments, "arg"):
        if id(t) not in seen and len(out) < MAX_TENSORS and keep(t):
            seen.add(id(t))
            out.append(t)
    return out


def _row_shape(t: torch.Tensor) -> tuple[int, int]:
    """``t`` seen as rows of its last dimension: (rows, width); a tensor of one column or one
    dimension is one row of all its elements."""
    if t.dim() < 2 or t.shape[-1] < 2:
        return 1, t.numel()
    return t.numel() // t.shape[-1], t.shape[-1]


def _swappable(t: torch.Tensor) -> bool:
    """An integer tensor with a row that is not sorted either way (so not offsets or lengths)."""
    if t.is_floating_point() or t.is_complex() or t.dtype == torch.bool or t.numel() < 2:
        return False
    rows = t.reshape(_row_shape(t))
    rising, falling = rows[:, 1:] >= rows[:, :-1], rows[:, 1:] <= rows[:, :-1]
    sorted_rows = rising.all(dim=1) | falling.all(dim=1)
    return not bool(sorted_rows.all())


def _swap(t: torch.Tensor, i: int) -> None:
    """Step ``i`` on an integer tensor: in a window of ``_WINDOW`` places of a row (at hashed
    places; the next rows' windows too, up to ``_ROWS``, all read in one gather), swap the first
    non-negative element that a smaller non-negative one follows with the nearest smallest such
    one. Swapping an inverted pair leaves the row with fewer inversions, so no step brings back a
    state an earlier one left (a memo of every input seen still misses); nothing where no window
    holds such a pair."""
    n_rows, width = _row_shape(t)
    span = min(width, _WINDOW)
    first_row = (i * _HASH + _OFFSET) % n_rows
    start = (i * _HASH + 2 * _OFFSET) % (width - span + 1)
    rows = [(first_row + k) % n_rows for k in range(min(n_rows, _ROWS))]
    places = [unravel(r * width + start + k, tuple(t.shape)) for r in rows for k in range(span)]
    index = tuple(torch.tensor(axis, device=t.device) for axis in zip(*places))
    values = t.data[index].tolist()
    for row in range(len(rows)):
        pair = _inverted_pair(values[row * span:(row + 1) * span])
        if pair is not None:
            a, b = (row * span + k for k in pair)
            t.data[places[a]] = values[b]
            t.data[places[b]] = values[a]
            return


def _inverted_pair(values: list[int]) -> tuple[int, int] | None:
    """The first non-negative value a smaller non-negative one follows, and the nearest place of
    the smallest such one after it; None in a window sorted where it is non-negative."""
    smallest_after: list[int | None] = [None] * (len(values) + 1)
    for k in range(len(values) - 1, -1, -1):
        best = smallest_after[k + 1]
        smallest_after[k] = k if values[k] >= 0 and (best is None or values[k] <= values[best]) \
            else best
    for k in range(len(values) - 1):
        later = smallest_after[k + 1]
        if values[k] >= 0 and later is not None and values[later] < values[k]:
            return k, later
    return None


__all__ = ["MAX_TENSORS", "SPREAD", "VariedInputs"]
