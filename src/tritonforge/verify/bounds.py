"""Whether the ORIGINAL reaches outside the memory of its arguments on a case (worker side).

A kernel that stores through an index it never bounds-checks writes wherever the index points:
TritonBench-G's kcache_copy_triton draws its block table from ``randint(0, 32)`` for a cache of
16 blocks in its performance script, so half of its stores land past the end of the cache, in
whichever allocation the caching allocator placed there -- another argument, or a clone the
verifier keeps. Its results then depend on where memory was handed out, not on the code: on the
H100 (2026-11-27) every config-search candidate of it was refused as ``watched``, its bare and
last timed calls differing from the original's on an input (the key tensor) the original never
meant to write, 0.99 against 0.01. A kernel that loads a whole tile where the tensor is smaller
reads whatever lies beyond it: rms_matmul_rbe's first performance size (K = 8 under a 32-wide
unmasked K tile) gave NaN in some processes and numbers in others, and its accepted candidate
failed the pass's re-verification on fresh seeds there (H100, engine f421d501e87f, 2026-11-27).

``outside`` calls the original three times on (case, seed) with every argument's storage moved
between two guard pads (``Tensor.set_``: the tensors the invocation holds now point into a padded
buffer, values unchanged), the pads filled with zeros, then 0x7F bytes, then zeros: a pad that
changed is a write outside; a result that follows the pads' bytes while the two zero-padded
calls agree bit for bit is a read outside. On a case where the original WRITES outside, the
checks that compare bare or timed calls of two variants side by side
(``ShippedChecks.bare_first``, ``ShippedChecks.probe``, ``timed_calls``, the bare call after
timing) judge nothing, as for an original that races; the guarded checks still judge it. On a case
where it READS outside, its result is not defined by its inputs, and no check judges the case
(``differential._Verifier``); a candidate verified on nothing else is not verified. Only the
original's behaviour turns a check off; nothing a candidate does can.

A pad is as large as its storage (at least ``PAD_MIN``, at most ``PAD_MAX``); an access further
away, or into a buffer the wrapper allocates itself (a test section builds all of its own), is
not seen. Storages over ``MAX_BYTES`` are left where they are, and a case whose inputs hold over
``MAX_PROBED_ELEMENTS`` elements is not probed.
"""

from __future__ import annotations

import types
import weakref
from dataclasses import dataclass
from typing import Any, Callable

import torch

from ..model import Case
from .original_runs import case_key
from .runner import MakeInvocation, _seed
from .tree import bitwise_equal, clone_tree, iter_tensors, move_storages, same_bits

PATTERNS = (0x00, 0x7F, 0x00)   # the pads' bytes, call by call: 0x7F7F... is a NaN in fp16, huge in fp32
PAD_MIN = 1 << 20
PAD_MAX = 256 << 20
MAX_BYTES = 1 << 30
ALIGN = 512
# a performance-script case whose inputs hold more elements than this is not probed: each of the
# three calls builds its inputs afresh (fast_ce_loss's largest: 4.2e9 fp16 elements, 8.4 GB), and
# a kernel that reaches outside its arguments does so at the smaller sizes as well
MAX_PROBED_ELEMENTS = 1 << 28


@dataclass(frozen=True)
class Outside:
    """What the original did outside its arguments' memory on a case; true if anything."""

    writes: bool = False
    reads: bool = False

    def __bool__(self) -> bool:
        return self.writes or self.reads


# per original module: {(case key, device): Outside}, for the worker's life
_KNOWN: "weakref.WeakKeyDictionary[types.ModuleType, dict[tuple, Outside]]" = \
    weakref.WeakKeyDictionary()


def _pad_bytes(nbytes: int) -> int:
    pad = min(max(nbytes, PAD_MIN), PAD_MAX)
    return (pad + ALIGN - 1) // ALIGN * ALIGN


def guard_storages(tensors: dict[str, torch.Tensor], pattern: int = PATTERNS[0]
                   ) -> list[tuple[torch.Tensor, int, int]]:
    """Move each distinct storage of ``tensors`` into a buffer between two pads of ``pattern``
    bytes; every tensor on it is re-pointed at the same bytes (views keep their offsets).
    Returns (buffer, pad, storage bytes) per moved storage."""
    return move_storages(tensors.values(), lambda nbytes: (_pad_bytes(nbytes),) * 2, pattern,
                         max_bytes=MAX_BYTES)


def pads_changed(guarded: list[tuple[torch.Tensor, int, int]], pattern: int = PATTERNS[0]) -> bool:
    return any(bool((buf[:pad] != pattern).any()) or bool((buf[pad + nbytes:] != pattern).any())
               for buf, pad, nbytes in guarded)


def outside(module: types.ModuleType, case: Case, seed: int, make_invocation: MakeInvocation,
            device: str, sync: Callable[[], None] | None) -> Outside:
    """What one bare call of ``module`` (the original) on (case, seed) does outside its
    arguments (see the module docstring); nothing where it has no tensor argument or fails
    (the guarded checks report a failure). Cached per module, case and device."""
    known = _KNOWN.setdefault(module, {})
    key = (case_key(case), device)
    if key not in known:
        elements = getattr(case.recipe, "elements", None)
        known[key] = Outside() if elements is not None and elements > MAX_PROBED_ELEMENTS \
            else _probe(module, case, seed, make_invocation, device, sync)
    return known[key]


def _call(module: types.ModuleType, case: Case, seed: int, make_invocation: MakeInvocation,
          device: str, sync: Callable[[], None] | None, pattern: int
          ) -> tuple[bool, Any] | None:
    """(pads changed, (result, arguments) cloned) of one call on guarded storages; None where
    no storage could be guarded."""
    inv = make_invocation(module, case, seed, device)
    tensors = dict(iter_tensors(inv.arguments, "arg"))
    guarded = guard_storages(tensors, pattern)
    if not guarded:
        return None
    fn: Any = getattr(inv, "timed", None) or inv.call
    _seed(seed)
    result = fn()
    if sync is not None:
        sync()
    return pads_changed(guarded, pattern), (clone_tree(result),
                                            {p: t.detach().clone() for p, t in tensors.items()})


def _agree(a: Any, b: Any) -> bool:
    (ra, args_a), (rb, args_b) = a, b
    return same_bits(ra, rb) and args_a.keys() == args_b.keys() and \
        all(bitwise_equal(args_a[p], args_b[p]) for p in args_a)


def _probe(module: types.ModuleType, case: Case, seed: int, make_invocation: MakeInvocation,
           device: str, sync: Callable[[], None] | None) -> Outside:
    try:
        calls = [_call(module, case, seed, make_invocation, device, sync, p) for p in PATTERNS]
    except Exception:  # noqa: BLE001 - the original failing here is the guarded checks' to report
        return Outside()
    if any(c is None for c in calls):
        return Outside()
    writes = any(changed for changed, _ in calls)
    (_, zeros), (_, other), (_, zeros_again) = calls
    reads = _agree(zeros, zeros_again) and not _agree(zeros, other)
    return Outside(writes, reads)


OUTSIDE_NOTE = "outside its arguments' memory"     # in every note ``outside_note`` writes


def outside_note(case: Case, seed: int, found: Outside) -> str:
    if found.reads:
        return (f"{case.id} seed {seed}: the original reads {OUTSIDE_NOTE} (an unmasked load): "
                f"its result is not defined by its inputs, and the case judges nothing")
    return (f"{case.id} seed {seed}: the original writes {OUTSIDE_NOTE} (an unchecked index): "
            f"its bare and timed calls judge nothing there")


__all__ = ["OUTSIDE_NOTE", "Outside", "guard_storages", "outside", "outside_note", "pads_changed"]
