"""Walk the values a call returns or receives: nested tuples, lists and dicts holding tensors.

Paths name where a value sits the way a user reads it: ``return``, ``return[1]``,
``return['y']``, ``arg[2]``, ``arg[0][1]``.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Iterator

import torch

_BITS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def iter_tensors(value: Any, path: str) -> Iterator[tuple[str, torch.Tensor]]:
    """Every tensor inside ``value`` with its path (depth first, in order)."""
    if isinstance(value, torch.Tensor):
        yield path, value
    elif isinstance(value, (tuple, list)):
        for i, item in enumerate(value):
            yield from iter_tensors(item, f"{path}[{i}]")
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from iter_tensors(item, f"{path}[{key!r}]")


def map_tensors(value: Any, fn: Callable[[torch.Tensor], Any]) -> Any:
    """``value`` with each tensor inside it replaced by ``fn(tensor)``; the containers rebuilt as
    their own types where they can be (namedtuples, tuple and dict subclasses), the rest shared."""
    if isinstance(value, torch.Tensor):
        return fn(value)
    if isinstance(value, list):
        return [map_tensors(v, fn) for v in value]
    if isinstance(value, tuple):
        items = [map_tensors(v, fn) for v in value]
        if hasattr(value, "_fields"):        # namedtuple
            return type(value)(*items)
        if type(value) is tuple:
            return tuple(items)
        try:
            return type(value)(items)
        except TypeError:
            return tuple(items)
    if isinstance(value, dict):
        items = {k: map_tensors(v, fn) for k, v in value.items()}
        if type(value) is dict:
            return items
        try:
            return type(value)(items)
        except TypeError:
            return items
    return value


def _detached_clone(t: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return t.detach().clone(memory_format=torch.preserve_format)


def clone_tree(value: Any) -> Any:
    """A copy of ``value`` whose tensors are detached clones (same strides); the rest is shared.

    On a GPU the clone is ordered on the current stream: it captures what the caller would see.
    """
    return map_tensors(value, _detached_clone)


# On a tensor whose storage ends in a pad another move added (``move_storages(..., mark=True)``:
# ``runtime.invoke.tail_padded``): how many of the storage's bytes are data. A later move takes
# those alone, so a guard around them (``verify.bounds``) starts where the data ends, not past
# the pad, and sees a store one element past the end as it did before the pad.
DATA_BYTES = "_tritonforge_data_bytes"


def move_storages(tensors: Iterable[torch.Tensor], pads: Callable[[int], tuple[int, int]],
                  fill: int, max_bytes: int | None = None, mark: bool = False
                  ) -> list[tuple[torch.Tensor, int, int]]:
    """Move each distinct storage of ``tensors`` into a buffer of ``fill`` bytes, between a pad
    before it and a pad after it (``pads(storage bytes)``, each a multiple of 512: whole elements
    of any dtype); every tensor on that storage is re-pointed at the same bytes in place
    (``Tensor.set_``: views keep their offsets, values and ``requires_grad`` unchanged). A storage
    an earlier marked move padded moves its data bytes only (``DATA_BYTES``); ``mark`` marks
    this move's. Storages over ``max_bytes``, empty, sparse or not strided stay where they are,
    as does one ``set_`` refuses or whose buffer the device has no memory for. Returns (buffer,
    pad before, data bytes) per moved storage."""
    groups: dict[int, dict[int, torch.Tensor]] = {}      # storage -> tensors on it, each once
    for t in tensors:
        if t.numel() == 0 or t.is_sparse or t.layout is not torch.strided:
            continue
        groups.setdefault(t.untyped_storage().data_ptr(), {})[id(t)] = t
    moved = []
    with torch.no_grad():
        for members in groups.values():
            group = list(members.values())
            storage = group[0].untyped_storage()
            marked = [t.__dict__[DATA_BYTES] for t in group if DATA_BYTES in t.__dict__]
            nbytes = min(storage.nbytes(), max(marked)) if marked else storage.nbytes()
            if nbytes == 0 or (max_bytes is not None and nbytes > max_bytes):
                continue
            before, after = pads(nbytes)
            try:
                buf = torch.empty((before + nbytes + after,), dtype=torch.uint8,
                                  device=group[0].device)
            except torch.OutOfMemoryError:   # the move needs both copies at once: it stays
                continue
            buf[:before].fill_(fill)         # the pads alone: the data is copied over next
            buf[before + nbytes:].fill_(fill)
            old = torch.empty(0, dtype=torch.uint8, device=group[0].device).set_(storage)
            buf[before:before + nbytes].copy_(old[:nbytes])
            offsets = [t.storage_offset() for t in group]
            try:
                for t in group:
                    t.set_(buf.untyped_storage(), before // t.element_size() + t.storage_offset(),
                           t.size(), t.stride())
            except RuntimeError:     # refused (a tensor autograd tracks): the storage stays
                for t, offset in zip(group, offsets):
                    if t.untyped_storage().data_ptr() == buf.data_ptr():
                        t.set_(storage, offset, t.size(), t.stride())
                continue
            for t in group:
                if mark:
                    t.__dict__[DATA_BYTES] = nbytes
                else:
                    t.__dict__.pop(DATA_BYTES, None)
            moved.append((buf, before, nbytes))
    return moved


def as_bits(t: torch.Tensor) -> torch.Tensor:
    """``t`` reinterpreted as integers of the same width (NaN payloads compare exactly)."""
    if t.dtype.is_complex:
        t = torch.view_as_real(t)
    if t.dtype == torch.bool:
        return t
    size = t.element_size()
    if t.dtype.is_floating_point or t.dtype not in _BITS.values():
        return t.view(_BITS[size])
    return t


def bitwise_equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Same shape, dtype and bits in every element (NaN equals NaN with the same payload). The
    same object is equal without a pass over it: a run shares each input nobody wrote with its
    pristine copy (``runner._kept``), and those are compared again and again."""
    if a is b:
        return True
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.numel() == 0:
        return True
    return bool(torch.equal(as_bits(a), as_bits(b.to(a.device))))


def same_bits(a: Any, b: Any) -> bool:
    """Two value trees whose tensors sit at the same paths with the same bits (``bitwise_equal``);
    other leaves are not looked at."""
    left, right = list(iter_tensors(a, "v")), list(iter_tensors(b, "v"))
    return len(left) == len(right) and all(
        pa == pb and bitwise_equal(ta, tb) for (pa, ta), (pb, tb) in zip(left, right))


def shares_memory(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether two tensors may overlap in memory (same storage and overlapping byte ranges)."""
    if a.device != b.device or a.numel() == 0 or b.numel() == 0:
        return False
    sa, sb = a.untyped_storage(), b.untyped_storage()
    if sa.data_ptr() != sb.data_ptr():
        return False
    return True


def unravel(flat: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    """The multi-dimensional index of flat (row-major) position ``flat`` in ``shape``."""
    index = []
    for size in reversed(shape):
        index.append(flat % size if size else 0)
        flat = flat // size if size else 0
    return tuple(reversed(index))
