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
tensor's elements), so that no two steps leave the inputs as they were. The timer steps every variant
once per turn, before the L2 flush, outside the timed region (``runtime.timing``): the variants of a
case start from copies of the same inputs and take the same steps, so at every turn they compute on
the same values, and the last timed results the timer keeps (``verify.timed_calls``) stay comparable.
Halving keeps a value's sign and finiteness (an infinity stays one, a NaN stays one) and never
overflows; a value halved to zero stays there, so a tensor of a few elements stops changing after a
hundred or so turns in fp32 (a few dozen in fp16): what a memo keyed on such tensors alone could
still exploit, where the probe's changed inputs (``verify.shipped``) catch one that skips the rest.
Integer tensors are not touched: an index moved by one can point out of bounds.
"""

from __future__ import annotations

from typing import Any

import torch

from ..verify.tree import iter_tensors, unravel

_HASH = 2654435761      # a prime: step i lands on element (i * _HASH + _OFFSET) % numel, distinct
_OFFSET = 40503         # for the first numel steps of any tensor whose size it does not divide
MAX_TENSORS = 32        # a call with more floating-point arguments has the first ones varied


def _variable(t: torch.Tensor) -> bool:
    return t.is_floating_point() and t.numel() > 0 and t.dtype not in _NO_ARITHMETIC


_NO_ARITHMETIC = tuple(getattr(torch, name) for name in
                       ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz")
                       if hasattr(torch, name))


class VariedInputs:
    """The floating-point tensors of one invocation's arguments, and the steps taken on them."""

    def __init__(self, arguments: Any):
        seen: set[int] = set()
        self.tensors: list[torch.Tensor] = []
        for _, t in iter_tensors(arguments, "arg"):
            if _variable(t) and id(t) not in seen and len(self.tensors) < MAX_TENSORS:
                seen.add(id(t))
                self.tensors.append(t)
        self.steps = 0

    def step(self) -> None:
        """Halve one element of each tensor (outside any timed region: it launches a kernel per
        tensor). A tensor that refuses the write (an inference tensor, a read-only view) is varied
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
                at = unravel((i * _HASH + _OFFSET) % t.numel(), tuple(t.shape))
                try:
                    t.data[at].mul_(0.5)
                except Exception:  # noqa: BLE001 - an input that refuses it is left as it is
                    self.tensors.remove(t)


__all__ = ["MAX_TENSORS", "VariedInputs"]
