"""Poison output buffers so that an element a candidate leaves unwritten cannot pass for a result.

Floating tensors are filled with a quiet NaN that carries a payload of our own (``0x7FF0DEAD`` for
float32): arithmetic on a GPU turns NaNs into the canonical ``0x7FFFFFFF``, so an element that still
holds the exact poison bits was never written (or was copied verbatim from poisoned memory).
Integers get a sentinel such as ``0xDEADBEEF``. Booleans cannot be poisoned meaningfully (every
byte pattern reads as True or False); they are left alone and only compared by value.

Buffers a wrapper allocates itself (``torch.empty(...)`` inside the call) are out of the caller's
reach, so ``poison_allocations()`` poisons every ``empty``-family allocation made while it is
active. It works at the dispatcher level (a ``TorchDispatchMode``), so it sees ``torch.empty``,
``from torch import empty``, ``Tensor.new_empty``, ``torch.ops.aten.empty`` and legacy
constructors alike; allocations Triton makes inside its own launch machinery are skipped.

Poison must not outlive its check. Freed memory keeps its bits, and a later allocation in the same
process (the next candidate's, in a worker that verifies many) can be handed them: a candidate that
reads a fresh ``torch.empty`` sees the verifier's NaN and can latch into honest behaviour before the
bare first calls that exist to catch exactly that (``verify.shipped_checks``). After a run of
earlier checks in one process, ``torch.empty(1)`` on CPU read back NaN 543 times in 2000; a
catalogue cheat of that kind passed a CPU run of the whole test suite once. So every poisoned buffer
is held until nothing else refers to it, then zeroed and let go (``scrub_released``): before each
poisoned allocation and before every bare call.
"""

from __future__ import annotations

import gc
import logging
from contextlib import contextmanager
from typing import Iterator

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from .guards import triton_internal

log = logging.getLogger(__name__)

# dtype -> (integer dtype of the same width to write the bits through, the bit pattern)
_FLOAT_POISON: dict[torch.dtype, tuple[torch.dtype, int]] = {
    torch.float64: (torch.int64, 0x7FF8DEAD0000BEEF),
    torch.float32: (torch.int32, 0x7FF0DEAD),
    torch.float16: (torch.int16, 0x7EAD),
    torch.bfloat16: (torch.int16, 0x7FED),
}

_INT_POISON: dict[torch.dtype, int] = {
    torch.int8: -0x4D,                       # 0xB3
    torch.uint8: 0xB3,
    torch.int16: -0x2153,                    # 0xDEAD
    torch.int32: -0x21524111,                # 0xDEADBEEF
    torch.int64: -0x2152411021524111,        # 0xDEADBEEFDEADBEEF
}

# aten allocation ops whose result is uninitialised memory
_EMPTY_OPS = frozenset({
    "aten.empty", "aten.empty_like", "aten.empty_strided", "aten.new_empty",
    "aten.new_empty_strided", "aten.empty_permuted",
})


# storages this module poisoned, held until nothing else refers to them (then zeroed and let go)
_HELD: list[torch.UntypedStorage] = []
_use_count = getattr(torch._C, "_storage_Use_Count", None)


def _hold(t: torch.Tensor) -> None:
    if _use_count is None:
        return
    try:
        _HELD.append(t.untyped_storage())
    except (RuntimeError, NotImplementedError):   # no storage to hold (a sparse tensor)
        pass


def _capturing() -> bool:
    return torch.cuda.is_available() and torch.cuda.is_current_stream_capturing()


def hold_poisoned(tree_tensors) -> None:
    """Hold, like a buffer poisoned here, every tensor of ``tree_tensors`` that holds the poison
    somewhere: a clone of an output that leaves elements unwritten carries the poison into
    memory of its own, which would otherwise be freed with it."""
    for t in tree_tensors:
        if isinstance(t, torch.Tensor) and t.numel() and can_poison(t):
            mask = poison_mask(t)
            if mask is not None and bool(mask.any()):
                _hold(t)


def scrub_released(collect: bool = False) -> int:
    """Zero every poisoned storage that only this module still holds, and let it go; returns how
    many. Storages someone else still refers to (a buffer a candidate caches) stay held and are
    looked at again next time. ``collect`` runs the garbage collector first, so that buffers kept
    only by dead reference cycles (a dropped candidate module) count as released."""
    if not _HELD or _capturing():
        return 0
    if collect:
        gc.collect()
    kept, scrubbed = [], 0
    with torch.no_grad():
        for storage in _HELD:
            if _use_count(storage._cdata) > 1:
                kept.append(storage)
            else:
                storage.fill_(0)
                scrubbed += 1
    _HELD[:] = kept
    return scrubbed


def can_poison(t: torch.Tensor) -> bool:
    """Whether ``t``'s dtype has a poison value (floats, complex, signed and 8-bit integers)."""
    d = t.dtype
    return d in _FLOAT_POISON or d in _INT_POISON or d.is_complex or d.is_floating_point


def poison_(t: torch.Tensor) -> torch.Tensor:
    """Fill ``t`` in place with its dtype's poison value and return it (booleans: unchanged)."""
    if t.numel() == 0:
        return t
    scrub_released()                   # what earlier poisonings left: held memory stays bounded
    _hold(t)
    d = t.dtype
    with torch.no_grad():
        if d in _FLOAT_POISON:
            int_dtype, bits = _FLOAT_POISON[d]
            t.view(int_dtype).fill_(bits)
        elif d.is_complex:
            poison_(torch.view_as_real(t))
        elif d.is_floating_point:          # float8 and friends: no payload, plain NaN
            t.fill_(float("nan"))
        elif d in _INT_POISON:
            t.fill_(_INT_POISON[d])
    return t


def poison_mask(t: torch.Tensor) -> torch.Tensor | None:
    """Bool mask of the elements of ``t`` that hold exactly the poison value, or None if the dtype
    has none we can recognise (bool, float8: its NaN is also what arithmetic produces)."""
    d = t.dtype
    if d in _FLOAT_POISON:
        int_dtype, bits = _FLOAT_POISON[d]
        return t.view(int_dtype) == bits
    if d.is_complex:
        m = poison_mask(torch.view_as_real(t))
        return None if m is None else m.any(dim=-1)
    if d in _INT_POISON:
        return t == _INT_POISON[d]
    return None


def _op_name(func) -> str:
    return str(getattr(func, "overloadpacket", func))


class _PoisonMode(TorchDispatchMode):
    """Poisons the result of every empty-family allocation made outside Triton's own machinery."""

    def __init__(self) -> None:
        super().__init__()
        self.poisoned = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        empty = _op_name(func) in _EMPTY_OPS
        if empty:
            scrub_released()
        out = func(*args, **(kwargs or {}))
        if empty and isinstance(out, torch.Tensor) and not triton_internal():
            poison_(out)
            self.poisoned += 1
        return out


@contextmanager
def poison_allocations() -> Iterator[_PoisonMode]:
    """Within the block, every ``torch.empty*``/``new_empty*`` result is poisoned.

    Yields the mode; its ``poisoned`` attribute counts the buffers poisoned.
    """
    mode = _PoisonMode()
    with mode:
        yield mode
