"""One size of a performance script's inputs, without drawing the others (worker side).

A TritonBench-G performance script draws every input size at once (``get_input_tensors``), and a
case runs one of them. The verifier asks each performance case on three seeds besides the case's
own (its bare first calls, the re-check, the probe: ``verify.differential``), and each seed was a
build of every size: on two H200s (engine c9c7cb3af1db, 2026-11-28) fast_ce_loss's first calls on
its smallest case waited 21 s and its re-check of perf-13 25 s, drawing and storing 16.8 GB of
logits for fourteen sizes each time, where its timing of perf-13 took 2.6 s.

``plan_sizes`` runs the script once with its host random draws (``torch.rand``, ``randn``,
``randint``, ``randperm`` with plain arguments) made on the ``meta`` device: shapes without data,
at no cost; an output buffer made like a draw (``torch.empty_like(q)``, ``zeros_like``...) is
deferred with it, as are ``torch.empty`` buffers, made zero-filled (uninitialised memory would
differ between two builds of one seed). ``SizePlan.materialize(index, seed)`` then draws, for
real, only the tensors of that size, each with the call the script made, from a seed of its own
(``sized_seed``): a deterministic function of the case's seed and size, as every build must be
(the original and the candidate see the same inputs), with the values of another seed, as any
seed's.

It refuses (``Unsized``), and the caller builds every size as before, where a size's inputs are
not the draws themselves: a tensor computed from a draw (``torch.rand(n) * 2``, a view of one),
a draw changed in place (``.mul_(2)``: its version counter moved), a draw the script reads
(``.tolist()``, ``.item()``: a meta tensor has no values, so it raises), a draw with other
arguments (a device, a generator, ``out``), a value that is not a plain tree of tensors, a drawn
tensor kept outside ``input_tensors`` (an attribute ``call_op`` would use), or over
``PLAN_HELD_BYTES`` of tensors built without a draw (they are built for every size).
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator

import torch

from ..verify.tree import iter_tensors, map_tensors
from .inputs import seed_everything

_FACTORIES = ("rand", "randn", "randint", "randperm")
# made like a draw (an output buffer shaped as an input): deferred with it; ``empty_like`` is
# made as ``zeros_like`` (uninitialised memory would differ between builds of one seed)
_LIKE = ("empty_like", "zeros_like", "ones_like", "full_like", "rand_like", "randn_like",
         "randint_like")
_LIKE_KEYWORDS = frozenset({"dtype", "requires_grad", "memory_format", "fill_value", "low",
                            "high"})
# uninitialised host tensors (an output buffer): deferred and made zero-filled, for the same
# reason as empty_like
_EMPTY = ("empty", "empty_strided")
# the keywords a deferred draw may carry (as ``drawn_inputs``); any other means it is not deferred
_PLAIN_KEYWORDS = frozenset({"size", "dtype", "device", "requires_grad", "low", "high", "n",
                             "stride"})
_SCALARS = (int, float, bool, str, type(None), torch.dtype, torch.device)
# the bytes of the tensors a script builds without drawing them (zeros, ones, an arange) that a
# plan may hold for all its sizes; more, and the script is built whole (shared on disk)
PLAN_HELD_BYTES = 1 << 30


class Unsized(Exception):
    """The script's inputs of one size cannot be drawn apart from the others'."""


@dataclass(frozen=True)
class _Draw:
    order: int
    name: str
    args: tuple
    kwargs: dict
    version: int          # the meta tensor's version counter when drawn: an in-place op bumps it


def sized_seed(seed: int, index: int) -> int:
    """The seed a size's draws are made from: distinct for every (seed, size)."""
    return (seed * 1_000_003 + 7_919 * (index + 1)) % (2 ** 31 - 1)


def _on_host(device: Any) -> bool:
    return device is None or torch.device(device).type == "cpu"


@contextmanager
def _meta_draws(recorded: dict[int, _Draw], keep: list, refused: list[str]) -> Iterator[None]:
    saved = {name: getattr(torch, name) for name in _FACTORIES + _LIKE + _EMPTY}

    def record(name: str, args: tuple, kwargs: dict, tensor: torch.Tensor) -> torch.Tensor:
        recorded[id(tensor)] = _Draw(len(recorded), name, args, dict(kwargs), tensor._version)
        keep.append(tensor)              # alive while the plan is: its id stays its own
        return tensor

    def refuse(why: str) -> Unsized:
        refused.append(why)              # said again after the run: a script may catch it
        return Unsized(why)

    def deferred(name: str, original: Any) -> Any:
        def draw(*args: Any, **kwargs: Any) -> Any:
            if set(kwargs) - _PLAIN_KEYWORDS or not _on_host(kwargs.get("device")):
                if name in _EMPTY:       # made as written, zero-filled (its bytes count:
                    with torch.no_grad():    # PLAN_HELD_BYTES)
                        return original(*args, **kwargs).zero_()
                raise refuse(f"torch.{name} with {sorted(kwargs)} is not deferred")
            return record(name, args, kwargs, original(*args, **{**kwargs, "device": "meta"}))
        return draw

    def like(name: str, original: Any) -> Any:
        def made(src: Any, *args: Any, **kwargs: Any) -> Any:
            if not (isinstance(src, torch.Tensor) and src.is_meta):
                return original(src, *args, **kwargs)         # like a real tensor: real
            if id(src) not in recorded or set(kwargs) - _LIKE_KEYWORDS \
                    or any(isinstance(a, torch.Tensor) for a in args):
                raise refuse(f"torch.{name} of a tensor not drawn, or with {sorted(kwargs)}")
            return record(name, (src,) + args, kwargs, original(src, *args, **kwargs))
        return made

    try:
        for name, fn in saved.items():
            setattr(torch, name, (like if name in _LIKE else deferred)(name, fn))
        yield
    finally:
        for name, fn in saved.items():
            setattr(torch, name, fn)


def _plain(value: Any) -> bool:
    """Whether ``value`` is a tree of tuples, lists and dicts holding tensors and scalars."""
    if isinstance(value, torch.Tensor) or isinstance(value, _SCALARS):
        return True
    if isinstance(value, (tuple, list)):
        return all(_plain(v) for v in value)
    if isinstance(value, dict):
        return all(_plain(v) for v in value.values())
    return False


def _tensors(value: Any) -> Iterator[torch.Tensor]:
    return (t for _, t in iter_tensors(value, ""))


def _metas(value: Any) -> Iterator[torch.Tensor]:
    return (t for t in _tensors(value) if t.is_meta)


@dataclass
class SizePlan:
    """What the script drew, as shapes: its entries (sizes) holding meta tensors, and how each
    meta tensor was drawn."""
    entries: list[Any]
    recorded: dict[int, _Draw]
    keep: list

    def __len__(self) -> int:
        return len(self.entries)

    def materialize(self, index: int, seed: int, device: str | None = None) -> Any:
        """Size ``index``'s inputs, its draws made for real from ``sized_seed(seed, index)``, in
        the order the script made them; ``Unsized`` where one of its tensors was not drawn
        itself. Each draw is the ``torch`` factory the script called, on the host (or where
        ``drawn_inputs.drawn_on`` sends it); with ``device``, on that device, where no draw of
        the size asks for a gradient (a host leaf the script moves is not a device leaf).
        ``on_device(index)`` says which it will be."""
        entry = self.entries[index]
        metas = self._drawn(index)
        to_device = device is not None and self.on_device(index)
        seed_everything(sized_seed(seed, index))
        real: dict[int, torch.Tensor] = {}
        for t in sorted(metas, key=lambda t: self.recorded[id(t)].order):
            self._make(t, real, device if to_device else None)
        return map_tensors(entry, lambda t: real.get(id(t), t))

    def _make(self, t: torch.Tensor, real: dict[int, torch.Tensor], device: str | None
              ) -> torch.Tensor:
        """The real tensor of the recorded meta ``t``, what it was made like made first."""
        if id(t) in real:
            return real[id(t)]
        call = self.recorded[id(t)]
        if call.name in _LIKE:               # on the device of what it is like
            src = self._make(call.args[0], real, device)
            name = "zeros_like" if call.name == "empty_like" else call.name
            made = getattr(torch, name)(src, *call.args[1:], **call.kwargs)
        else:
            kwargs = {**call.kwargs, "device": device} if device is not None else call.kwargs
            made = getattr(torch, call.name)(*call.args, **kwargs)
            if call.name in _EMPTY:
                with torch.no_grad():
                    made.zero_()
        real[id(t)] = made
        return made

    def on_device(self, index: int) -> bool:
        """Whether size ``index`` can be drawn on a device: none of its draws, nor what they are
        made like, asks for a gradient."""
        return not any(self.recorded[id(t)].kwargs.get("requires_grad")
                       for t in self._needed(self._drawn(index)))

    def _needed(self, metas: list[torch.Tensor]) -> list[torch.Tensor]:
        """``metas`` and what each was made like, recursively."""
        out, todo = {}, list(metas)
        while todo:
            t = todo.pop()
            if id(t) not in out:
                out[id(t)] = t
                call = self.recorded[id(t)]
                if call.name in _LIKE:
                    todo.append(call.args[0])
        return list(out.values())

    def _drawn(self, index: int) -> list[torch.Tensor]:
        """Size ``index``'s meta tensors, each once; ``Unsized`` where one was not drawn itself."""
        metas = list({id(t): t for t in _metas(self.entries[index])}.values())
        if any(id(t) not in self.recorded for t in metas):
            raise Unsized(f"size {index}: an input is computed from a draw, not drawn itself")
        if any(t._version != self.recorded[id(t)].version
               or t.requires_grad != bool(self.recorded[id(t)].kwargs.get("requires_grad"))
               for t in metas):
            raise Unsized(f"size {index}: an input is changed in place after its draw")
        return metas


def plan_sizes(instance: Any, seed: int) -> SizePlan:
    """Run ``instance.get_input_tensors()`` with its host draws on the meta device (module
    docstring); ``Unsized`` where its sizes cannot be drawn apart. ``instance.input_tensors`` is
    left empty, as the full build leaves it."""
    recorded: dict[int, _Draw] = {}
    keep: list = []
    refused: list[str] = []
    seed_everything(seed)
    instance.input_tensors = []
    try:
        with _meta_draws(recorded, keep, refused):
            instance.get_input_tensors()
        entries = list(instance.input_tensors)
    except Unsized:
        raise
    except Exception as exc:  # noqa: BLE001 - a script that reads its draws cannot be deferred
        raise Unsized(f"the script failed with its draws deferred: {type(exc).__name__}: "
                      f"{exc}"[:300]) from exc
    finally:
        instance.input_tensors = []
    if refused:
        raise Unsized(refused[0])
    if not recorded:
        raise Unsized("the script draws nothing on the host")
    if not all(_plain(e) for e in entries):
        raise Unsized("an input is not a plain tree of tensors")
    # what is not drawn is built for every size, and the plan holds it: only a little
    held = sum(t.nbytes for t in {id(t): t for e in entries for t in _tensors(e)
                                  if not t.is_meta}.values())
    if held > PLAN_HELD_BYTES:
        raise Unsized(f"the script builds {held / 2**30:.1f} GiB of inputs that are not draws")
    kept = {k: v for k, v in vars(instance).items() if k != "input_tensors"}
    if any(True for _ in _metas(list(kept.values()))) or not all(
            _plain(v) or not _holds_tensor(v) for v in kept.values()):
        raise Unsized("the script keeps a draw outside its inputs")
    plan = SizePlan(entries, recorded, keep)
    for index in range(len(plan)):       # refused as a whole, never one size after another
        plan._drawn(index)
    return plan


def _holds_tensor(value: Any) -> bool:
    """Whether ``value`` is or directly holds a tensor (an attribute a draw may have gone into)."""
    if isinstance(value, torch.Tensor):
        return True
    return any(isinstance(v, torch.Tensor) for v in vars(value).values()) \
        if hasattr(value, "__dict__") else False
