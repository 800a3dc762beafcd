"""Learn how to re-draw a traced tensor: a ``TensorSpec`` whose values keep the math meaningful.

The traced statistics decide the init:
- constant tensors stay constant (zeros, ones, full);
- an output buffer the call overwrote: zeros if it started as zeros (the kernel may accumulate
  into it), else ``empty`` when it held garbage (the worker poisons it);
- floats that were never negative stay non-negative (``rand`` in the traced range: no log or sqrt
  of negatives appears that the original test avoided); flat distributions (kurtosis < 2.2)
  become ``rand`` in their range; the rest ``randn`` with the traced mean and spread;
- floats holding whole numbers (masks, counts) become ``randint`` in their range;
- integer tensors keep their range (``randint`` in [min, max+1)): indices stay in range;
  permutations and sorted index tensors keep their structure (``values``: the traced data, for
  small tensors; ``arange`` for an identity permutation), since a re-draw would break them;
  offsets (sorted, starting at 0, like ``cu_seqlens``) are rebuilt for new sizes by the caller.

``values`` needs the worker to understand ``init = "values"`` (``runtime.inputs.make_tensor``);
``values_supported()`` asks it once, and without it such tensors fall back to ``arange`` (still
valid: sorted, in range) or to an unsorted ``randint`` in the traced range, with a note.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from ..model import TensorSpec
from .model import TracedTensor

DTYPES = {"float16", "bfloat16", "float32", "float64", "int8", "int16", "int32", "int64",
          "uint8", "bool", "float8_e4m3fn", "float8_e5m2"}
INT_DTYPES = {"int8", "int16", "int32", "int64", "uint8"}


@dataclass(frozen=True)
class Learned:
    """A re-draw recipe for one traced tensor, and what the generator must respect."""

    spec: TensorSpec
    note: str
    keeps_values: bool = False       # the traced data itself: its shape must not change
    index_high: int | None = None    # integer data in [low, high): high may follow a size symbol
    offsets_total: int | None = None # offsets 0 = o[0] <= ... <= o[-1] = total: rebuilt per size


@lru_cache(maxsize=1)
def values_supported() -> bool:
    """Whether the worker's input builder knows ``init = "values"`` (checked once, in-process)."""
    try:
        import torch   # in the try: a worker without torch or without init="values" gives False

        from ..runtime.inputs import make_tensor

        t = make_tensor(TensorSpec((3,), dtype="int64", init="values", values=(0, 2, 5)),
                        torch.Generator().manual_seed(0), "cpu")
        return t.tolist() == [0, 2, 5]
    except Exception:  # noqa: BLE001 - unknown init, missing field: not supported
        return False


def offsets_values(n: int, total: int) -> tuple[int, ...]:
    """``n`` sorted offsets from 0 to ``total``, evenly spaced (segments of equal length)."""
    if n <= 1:
        return (0,) * n
    return tuple(round(i * total / (n - 1)) for i in range(n))


def offsets_spec(base: TensorSpec, total: int) -> tuple[TensorSpec, str]:
    """An offsets tensor of ``base.shape`` ending at ``total``: literal data, or ``arange``."""
    n = base.shape[0] if base.shape else 1
    if values_supported():
        return (TensorSpec(**{**_fields(base), "init": "values", "values": offsets_values(n, total)}),
                f"offsets 0..{total} in {max(n - 1, 0)} equal segments")
    if n - 1 > total:
        raise ValueError(f"{n} offsets cannot end at {total} when drawn as arange "
                         "(the worker cannot take literal data)")
    return (TensorSpec(**{**_fields(base), "init": "arange"}),
            "offsets drawn as arange (segments of length 1): the worker cannot take literal data")


def _fields(spec: TensorSpec) -> dict:
    return {k: getattr(spec, k) for k in ("shape", "dtype", "layout", "requires_grad")}


def round_down(x: float, digits: int = 2) -> float:
    """``x`` rounded toward minus infinity to ``digits`` significant digits (0 stays 0)."""
    if x == 0 or not math.isfinite(x):
        return 0.0 if not math.isfinite(x) else x
    e = math.floor(math.log10(abs(x))) - digits + 1
    step = 10.0 ** e
    return float(f"{math.floor(x / step) * step:.{max(0, -e)}f}") if e < 0 else math.floor(x / step) * step


def round_up(x: float, digits: int = 2) -> float:
    return -round_down(-x, digits)


def _sig(x: float, digits: int = 3) -> float:
    return float(f"{x:.{digits}g}")


def learn(t: TracedTensor, shape: tuple[int, ...] | None = None, *,
          values_limit: int = 4096) -> Learned:
    """A ``TensorSpec`` for ``t`` at ``shape`` (default: the traced shape)."""
    shape = tuple(t.shape if shape is None else shape)
    same_shape = shape == tuple(t.shape)
    layout = "transposed" if t.layout == "transposed" and len(shape) >= 2 else "contiguous"
    base = dict(shape=shape, dtype=t.dtype, layout=layout,
                requires_grad=t.requires_grad and t.dtype not in INT_DTYPES | {"bool"})
    s = t.stats
    if s is None or s.numel == 0:
        init = "randint" if t.dtype in INT_DTYPES else "randn"
        extra = dict(low=0, high=2) if init == "randint" else {}
        return Learned(TensorSpec(init=init, **extra, **base), "no values traced")
    finite = s.finite == s.numel
    if finite and s.min == s.max:
        if s.min == 0:
            return Learned(TensorSpec(init="zeros", **base), "zeros, as traced")
        if s.min == 1:
            return Learned(TensorSpec(init="ones", **base), "ones, as traced")
        return Learned(TensorSpec(init="full", value=float(s.min), **base), f"all {s.min:g}, as traced")
    if t.written and (not finite or abs(s.max or 0) > 1e30 or abs(s.min or 0) > 1e30):
        return Learned(TensorSpec(init="empty", **base), "output buffer (held garbage before the call)")
    if t.dtype == "bool":
        return Learned(TensorSpec(init="randint", low=0, high=2, **base), "random mask")
    if t.dtype in INT_DTYPES:
        return _learn_int(t, shape, same_shape, base, values_limit)
    if not finite:
        if same_shape and s.values is not None and values_supported():
            return Learned(TensorSpec(init="values", values=tuple(s.values), **base),
                           f"traced data kept ({s.numel - s.finite} non-finite values)", keeps_values=True)
        note = f"traced input had {s.numel - s.finite} non-finite values; not reproduced"
    else:
        note = ""
    lo, hi = float(s.min if s.min is not None else 0.0), float(s.max if s.max is not None else 1.0)
    if s.integral and s.unique is not None and s.unique <= 64:
        return Learned(TensorSpec(init="randint", low=int(lo), high=int(hi) + 1, **base),
                       _join(note, f"whole numbers in [{int(lo)}, {int(hi)}]"), index_high=int(hi) + 1)
    if lo >= 0:
        low = round_down(lo)
        if lo > 0 and low <= 0:
            low = lo
        high = round_up(hi)
        return Learned(TensorSpec(init="rand", low=low, high=max(high, low + 1e-3), **base),
                       _join(note, f"non-negative: uniform in [{low:g}, {high:g})"))
    if s.kurtosis is not None and s.kurtosis < 2.2 and s.numel >= 64:
        low, high = round_down(lo), round_up(hi)
        return Learned(TensorSpec(init="rand", low=low, high=high, **base),
                       _join(note, f"flat: uniform in [{low:g}, {high:g})"))
    mean, std = float(s.mean or 0.0), float(s.std or 1.0)
    scale = 1.0 if abs(std - 1.0) < 0.1 else _sig(std)
    # a mean within three standard errors of zero is zero (a sample of randn, not a shift)
    offset = 0.0 if abs(mean) <= 3 * std / math.sqrt(max(s.finite, 1)) else _sig(mean)
    return Learned(TensorSpec(init="randn", scale=scale, offset=offset, **base),
                   _join(note, f"normal, mean {offset:g}, std {scale:g}"))


def _learn_int(t: TracedTensor, shape: tuple[int, ...], same_shape: bool, base: dict,
               values_limit: int) -> Learned:
    s = t.stats
    assert s is not None
    lo, hi = int(s.min or 0), int(s.max or 0)
    small = s.values is not None and s.numel <= values_limit
    can_keep = values_supported()
    if s.permutation and s.values is not None and list(s.values) == list(range(s.numel)):
        return Learned(TensorSpec(init="arange", **base), "arange (identity permutation), as traced")
    if (s.sorted and s.values is not None and len(shape) == 1 and s.numel >= 2
            and s.values[0] == 0 and s.values[-1] > 0):
        total = int(s.values[-1])
        try:
            spec, note = offsets_spec(TensorSpec(**base), total)
        except ValueError as exc:       # not at this shape: the caller rebuilds it for its sizes
            spec, note = TensorSpec(init="arange", **base), f"offsets: {exc}"
        return Learned(spec, note, offsets_total=total)
    if s.permutation:
        if same_shape and small and can_keep:
            return Learned(TensorSpec(init="values", values=tuple(s.values), **base),
                           "a permutation: traced data kept", keeps_values=True)
        return Learned(TensorSpec(init="arange", **base),
                       "a permutation in the trace: drawn as the identity permutation")
    if s.sorted and s.unique is not None and s.unique > 2 and s.numel >= 4:
        if same_shape and small and can_keep:
            return Learned(TensorSpec(init="values", values=tuple(s.values), **base),
                           "sorted (offsets or segment ids): traced data kept", keeps_values=True)
        note = "sorted in the trace: drawn unsorted in the same range"
    else:
        note = ""
    return Learned(TensorSpec(init="randint", low=lo, high=hi + 1, **base),
                   _join(note, f"integers in [{lo}, {hi}]"), index_high=hi + 1)


def _join(*parts: str) -> str:
    return "; ".join(p for p in parts if p)
