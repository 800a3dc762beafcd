"""What a call returns must be fresh, plain and the call's own work; its module must not count calls.

Three facts about one call, read on the objects the call returned (before any clone), in the
worker process:

- ``returned_aliases``: which returned tensors share memory with which arguments, with tensors the
  variant's module holds (its globals, one level into containers, instances, closures, default
  arguments and function attributes) or with tensors an earlier call returned. A variant that returns one module-level
  buffer per shape has the second call overwrite the first call's result; one that returns an
  input itself (``relu`` of a non-negative input) changes when the caller changes that input.
  Neither differs from the original on the call that is compared; both differ on later use.
- ``subclassed``: returned tensors whose type is not exactly ``torch.Tensor`` (a lazy subclass can
  compute only when the checker reads it, and what is timed is the laziness).
- ``state_fingerprint``: a cheap fingerprint of the module's mutable state. A variant whose state
  changes on every call, even a repeat of sizes it has seen, counts its calls or logs its inputs:
  what a call-count bomb or a cache keyed on input addresses needs. A cache filled once per shape
  (autotune-like) changes only on the first call of a shape and is not held against it.

Each is compared with the ORIGINAL's behaviour by the caller (verify.differential): an in-place
original that returns its argument may be matched by a candidate that does the same.
"""

from __future__ import annotations

import itertools
import logging
import types
from typing import Any, Iterable

import torch

from .tree import iter_tensors, shares_memory

log = logging.getLogger(__name__)

_SCALARS = (int, float, bool, str, bytes, complex, type(None))
_SMALL_TENSOR = 16        # tensors this small count in-place changes (a counter); larger: scratch


def _module_owned(value: Any, module_name: str) -> bool:
    """Objects whose class the variant's own module defines, or plain namespaces."""
    return isinstance(value, types.SimpleNamespace) or \
        getattr(type(value), "__module__", None) == module_name


def _children(value: Any, module_name: str) -> Iterable[Any]:
    """The values one level inside ``value`` that a variant could keep state in."""
    if isinstance(value, (list, tuple, set, frozenset)):
        return itertools.islice(value, 256)
    if isinstance(value, dict):
        return itertools.islice(itertools.chain.from_iterable(value.items()), 512)
    if isinstance(value, types.FunctionType):
        # its attributes too: ``f.calls = f.__dict__.get("calls", 0) + 1`` counts calls where no
        # global changes (a red-team call-count bomb, CPU interpreter, 2026-11-26)
        cells = [c.cell_contents for c in (value.__closure__ or ()) if _filled(c)]
        attrs = [v for k, v in vars(value).items() if not k.startswith("__")]
        return [*(value.__defaults__ or ()), *(value.__kwdefaults__ or {}).values(), *cells,
                *attrs]
    if isinstance(value, type) and value.__module__ == module_name:
        return [v for k, v in vars(value).items() if not k.startswith("__")]
    if _module_owned(value, module_name) and hasattr(value, "__dict__"):
        return list(vars(value).values())
    return ()


def _filled(cell: Any) -> bool:
    try:
        cell.cell_contents
    except ValueError:
        return False
    return True


def module_tensors(module: types.ModuleType) -> list[torch.Tensor]:
    """Tensors the module holds at its top level or one level inside what it holds."""
    name = module.__name__
    found = []
    for value in list(vars(module).values()):
        if isinstance(value, torch.Tensor):
            found.append(value)
            continue
        for child in _children(value, name):
            if isinstance(child, torch.Tensor):
                found.append(child)
    return found


def _atom(value: Any, depth: int = 0) -> Any:
    """A value's identity, or its value for scalars; a container one level down (a counter kept
    as ``n = [0]`` in a closure or a default argument changes inside, not its identity)."""
    if isinstance(value, _SCALARS):
        return ("v", type(value).__name__, value)
    if isinstance(value, torch.Tensor):
        return ("t", id(value), value._version) if value.numel() <= _SMALL_TENSOR else ("o", id(value))
    if depth == 0 and isinstance(value, (list, tuple, set, frozenset, dict)):
        items = itertools.chain.from_iterable(value.items()) if isinstance(value, dict) else value
        return ("c", id(value), len(value),
                tuple(_atom(x, 1) for x in itertools.islice(items, 16)))
    return ("o", id(value))


def state_fingerprint(module: types.ModuleType) -> dict[str, Any]:
    """Per global name of ``module``: its identity or value and those of what it holds (one
    level). Compare two fingerprints with ``changed_names``."""
    name = module.__name__
    out: dict[str, Any] = {}
    for key, value in list(vars(module).items()):
        if key.startswith("__") or isinstance(value, types.ModuleType):
            continue
        children = _children(value, name)
        size = len(value) if isinstance(value, (list, tuple, set, frozenset, dict)) else None
        out[key] = (_atom(value), size, tuple(_atom(c) for c in children))
    return out


def changed_names(before: dict[str, Any], after: dict[str, Any]) -> tuple[str, ...]:
    """Global names added, removed or whose fingerprint changed."""
    return tuple(sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k)))


def returned_aliases(result: Any, arguments: dict[str, torch.Tensor],
                     held: Iterable[torch.Tensor], earlier: Iterable[torch.Tensor]
                     ) -> tuple[tuple[str, str], ...]:
    """(return path, what it shares memory with) pairs: ``arg[i]`` paths, ``module`` (a tensor the
    module holds) or ``earlier call`` (a tensor an earlier call returned)."""
    held, earlier = list(held), list(earlier)
    found: list[tuple[str, str]] = []
    for path, t in iter_tensors(result, "return"):
        for arg_path, a in arguments.items():
            if shares_memory(t, a):
                found.append((path, arg_path))
        if any(shares_memory(t, h) for h in held):
            found.append((path, "module"))
        if any(shares_memory(t, e) for e in earlier):
            found.append((path, "earlier call"))
    return tuple(found)


def subclassed(result: Any) -> tuple[tuple[str, str], ...]:
    """(return path, type name) of returned tensors that are not exactly ``torch.Tensor``."""
    return tuple((path, type(t).__name__) for path, t in iter_tensors(result, "return")
                 if type(t) is not torch.Tensor)


def returned_tensors(result: Any) -> list[torch.Tensor]:
    return [t for _, t in iter_tensors(result, "return")]


__all__ = ["changed_names", "module_tensors", "returned_aliases", "returned_tensors",
           "state_fingerprint", "subclassed"]
