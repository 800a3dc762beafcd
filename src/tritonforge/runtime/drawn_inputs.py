"""Draw a performance script's random host tensors on the GPU (in the worker process).

A TritonBench-G performance script builds every input size at once, on the host, with
``torch.rand`` and friends, and the verifier asks for a fresh seed three times per candidate (its
bare first calls, the re-check, the probe): each one a full build. In a warm verification on an
H100 host (``scripts/verify_profile.py``, 2026-11-26) ``torch.rand`` took 6.4 of add_value's 8.8 s
and 10.6 of attention_forward_triton's 16.5 s: the candidate's kernels took less than the drawing
of their inputs.

``drawn_on(device)`` makes ``torch.rand``, ``randn``, ``randint``, ``randperm`` and the in-place
``Tensor.uniform_`` / ``normal_`` draw on ``device`` and copy the values back to the host, where
the script asked for them. The script sees what it always saw (host tensors of the shape, dtype
and ``requires_grad`` it asked for, a deterministic function of the seed; see
``inputs.seed_everything``, which seeds the GPU's generator too); only the random values differ
from a host draw, as from any other seed. Calls that name a generator, an ``out`` tensor, a
device other than the host, or anything else unusual go to torch unchanged.

The originals are restored on exit, object for object (the verifier's integrity snapshot compares
torch's attributes by identity). ``invoke`` falls back to a plain host build if a script fails
under the patch.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Callable, Iterator

import torch

_FACTORIES = ("rand", "randn", "randint", "randperm")
_IN_PLACE = ("uniform_", "normal_")
# keywords a drawn call may carry; any other (out, generator, layout, pin_memory, names...) means
# the call goes to torch as written
_PLAIN_KEYWORDS = frozenset({"size", "dtype", "device", "requires_grad", "low", "high", "n"})


def _on_host(device: Any) -> bool:
    return device is None or torch.device(device).type == "cpu"


def _drawn_factory(original: Callable[..., Any], target: str) -> Callable[..., Any]:
    def drawn(*args: Any, **kwargs: Any) -> Any:
        if set(kwargs) - _PLAIN_KEYWORDS or not _on_host(kwargs.get("device")):
            return original(*args, **kwargs)
        requires_grad = bool(kwargs.pop("requires_grad", False))
        kwargs["device"] = target
        value = original(*args, **kwargs).cpu()
        return value.requires_grad_(True) if requires_grad else value

    drawn.__wrapped__ = original  # type: ignore[attr-defined]
    return drawn


def _drawn_in_place(original: Callable[..., Any], target: str) -> Callable[..., Any]:
    def drawn(self: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("generator") is not None or self.device.type != "cpu" \
                or not self.dtype.is_floating_point or self.requires_grad:
            return original(self, *args, **kwargs)
        values = original(torch.empty(self.shape, dtype=self.dtype, device=target), *args, **kwargs)
        with torch.no_grad():
            self.copy_(values.cpu())
        return self

    drawn.__wrapped__ = original  # type: ignore[attr-defined]
    return drawn


@contextmanager
def drawn_on(device: str) -> Iterator[None]:
    """Within the block, host random tensors are drawn on ``device`` (module docstring); with a
    host ``device`` (the CPU interpreter) nothing changes."""
    if _on_host(device):
        yield
        return
    saved_torch = {name: getattr(torch, name) for name in _FACTORIES}
    saved_tensor = {name: getattr(torch.Tensor, name) for name in _IN_PLACE}
    try:
        for name, fn in saved_torch.items():
            setattr(torch, name, _drawn_factory(fn, device))
        for name, fn in saved_tensor.items():
            setattr(torch.Tensor, name, _drawn_in_place(fn, device))
        yield
    finally:
        for name, fn in saved_torch.items():
            setattr(torch, name, fn)
        for name, fn in saved_tensor.items():
            setattr(torch.Tensor, name, fn)
        if torch.device(device).type == "cuda" and torch.cuda.is_available():
            # the drawing's blocks (up to the largest input: GBs for a KV-cache copy) go back
            # to the device, not to this worker's cache beside three others on the same GPU
            torch.cuda.empty_cache()
