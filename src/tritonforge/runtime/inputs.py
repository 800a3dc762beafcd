"""Turn declarative argument specs into real tensors on the worker's device, deterministically.

The same (spec, seed) always gives the same values, on any variant: that is what lets the verifier
run the original and a candidate on identical inputs, and draw fresh ones with a new seed.
"""

from __future__ import annotations

from typing import Any

import torch

from ..model import TensorSpec

_DTYPES = {
    "float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32,
    "float64": torch.float64, "int8": torch.int8, "int16": torch.int16, "int32": torch.int32,
    "int64": torch.int64, "uint8": torch.uint8, "bool": torch.bool,
    "float8_e4m3fn": getattr(torch, "float8_e4m3fn", torch.float16),
    "float8_e5m2": getattr(torch, "float8_e5m2", torch.float16),
}


def torch_dtype(name: str) -> torch.dtype:
    return _DTYPES[name]


def dtype_name(dtype: torch.dtype) -> str:
    for name, d in _DTYPES.items():
        if d == dtype:
            return name
    return str(dtype).replace("torch.", "")


def make_tensor(spec: TensorSpec, generator: torch.Generator, device: str) -> torch.Tensor:
    """Draw one tensor for ``spec`` on the CPU with ``generator``, then move it to ``device``.

    Drawing on the CPU keeps values identical across devices and torch builds.
    """
    dtype = torch_dtype(spec.dtype)
    shape = tuple(spec.shape)
    if spec.layout == "transposed" and len(shape) >= 2:
        shape = shape[:-2] + (shape[-1], shape[-2])
    is_float = dtype.is_floating_point
    if spec.init == "randn":
        base = torch.randn(shape, generator=generator, dtype=torch.float32)
        base = base * spec.scale + spec.offset
    elif spec.init == "rand":
        lo = 0.0 if spec.low is None else spec.low
        hi = 1.0 if spec.high is None else spec.high
        base = torch.rand(shape, generator=generator, dtype=torch.float32) * (hi - lo) + lo
    elif spec.init == "randint":
        lo = int(spec.low or 0)
        hi = int(spec.high if spec.high is not None else 100)
        base = torch.randint(lo, max(hi, lo + 1), shape, generator=generator, dtype=torch.int64)
    elif spec.init in ("zeros", "empty"):
        base = torch.zeros(shape)
    elif spec.init == "ones":
        base = torch.ones(shape)
    elif spec.init == "full":
        base = torch.full(shape, float(spec.value or 0.0))
    elif spec.init == "arange":
        n = 1
        for d in shape:
            n *= d
        base = torch.arange(n, dtype=torch.float64 if is_float else torch.int64).reshape(shape)
    else:  # validated by the spec parser; a direct caller gets a clear error
        raise ValueError(f"unknown init {spec.init!r}")
    if dtype == torch.bool:
        t = base != 0 if spec.init != "randn" else base > 0
    else:
        t = base.to(dtype)
    if spec.init == "empty" and is_float:
        t.fill_(float("nan"))   # an output buffer: poisoned, so unwritten elements show
    sparsity = getattr(spec, "sparsity", 0.0)
    if sparsity > 0 and t.numel():
        # drawn after the values: the other elements are those of the dense draw
        keep = torch.rand(t.shape, generator=generator) >= sparsity
        t = t * keep.to(t.dtype) if t.dtype != torch.bool else t & keep
    t = t.to(device)
    if spec.layout == "transposed" and len(shape) >= 2:
        t = t.transpose(-1, -2)
    elif spec.layout == "strided" and len(shape) >= 1:
        # the same values in every other element of a buffer twice as long: a view whose last
        # stride is 2 (any rank, 1-D included)
        buf = torch.zeros(shape[:-1] + (2 * shape[-1],), dtype=t.dtype, device=t.device)
        view = buf[..., ::2]
        view.copy_(t)
        t = view
    if spec.requires_grad and is_float:
        t.requires_grad_(True)
    return t


def build_args(values: Any, generator: torch.Generator, device: str) -> Any:
    """Build a (possibly nested) argument structure: TensorSpecs become tensors, rest unchanged."""
    if isinstance(values, TensorSpec):
        return make_tensor(values, generator, device)
    if isinstance(values, tuple):
        return tuple(build_args(v, generator, device) for v in values)
    if isinstance(values, list):
        return [build_args(v, generator, device) for v in values]
    return values


def clone_tree(value: Any) -> Any:
    """Deep copy of tensors inside nested tuples/lists/dicts (non-tensors shared)."""
    if isinstance(value, torch.Tensor):
        c = value.detach().clone()
        if value.requires_grad:
            c.requires_grad_(True)
        return c
    if isinstance(value, tuple):
        return tuple(clone_tree(v) for v in value)
    if isinstance(value, list):
        return [clone_tree(v) for v in value]
    if isinstance(value, dict):
        return {k: clone_tree(v) for k, v in value.items()}
    return value


def seed_everything(seed: int) -> None:
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)
