"""A tiny stand-in for runtime.invoke: inputs from a SpecCall, deterministic given the seed.

The verifier only needs the Invocation protocol (``call`` and ``arguments``); these tests do not
import runtime/ so that verify/ is tested on its own.
"""

from __future__ import annotations

import types
from dataclasses import dataclass
from typing import Any, Callable

import torch

from conftest import DEVICE
from tritonforge.model import Case, CaseRole, SpecCall, TensorSpec


@dataclass
class Invocation:
    call: Callable[[], Any]
    arguments: list[Any]


def make_tensor(spec: TensorSpec, gen: torch.Generator, device: str) -> torch.Tensor:
    dtype = getattr(torch, spec.dtype)
    shape = spec.shape
    if spec.layout == "transposed":
        shape = (*shape[:-2], shape[-1], shape[-2])
    if spec.init == "randn":
        t = torch.randn(shape, generator=gen) * spec.scale + spec.offset
    elif spec.init == "rand":
        low = 0.0 if spec.low is None else spec.low
        high = 1.0 if spec.high is None else spec.high
        t = torch.rand(shape, generator=gen) * (high - low) + low
    elif spec.init == "zeros":
        t = torch.zeros(shape)
    elif spec.init == "empty":
        t = torch.full(shape, 7.0)          # stale garbage a kernel must overwrite
    else:
        raise ValueError(spec.init)
    t = t.to(dtype).to(device)
    return t.transpose(-1, -2) if spec.layout == "transposed" else t


def build(module: types.ModuleType, case: Case, seed: int, device: str | None = None) -> Invocation:
    device = device or DEVICE
    recipe = case.recipe
    assert isinstance(recipe, SpecCall)
    gen = torch.Generator().manual_seed(seed)
    args = [make_tensor(a, gen, device) if isinstance(a, TensorSpec) else a for a in recipe.args]
    fn = getattr(module, recipe.entry)

    def call() -> Any:
        torch.manual_seed(seed)
        return fn(*args)

    return Invocation(call, args)


def spec_case(case_id: str, entry: str, *args: Any, seeds: tuple[int, ...] = (0, 1)) -> Case:
    return Case(case_id, CaseRole.CORRECTNESS, SpecCall(entry, tuple(args)), seeds)


def T(*shape: int, dtype: str = "float32", **kw: Any) -> TensorSpec:
    return TensorSpec(tuple(shape), dtype, **kw)
