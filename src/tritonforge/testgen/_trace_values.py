"""How the tracing process describes values: tensors (shape, dtype, strides, statistics), scalars
and sequences, as plain JSON-ready dicts (decoded by ``testgen.trace``). Runs in the child only."""

from __future__ import annotations

import math
from typing import Any

# torch is imported inside functions: ``_trace_main`` (the tracing process's entry point) imports
# this module before its main installs the CPU shim.

LIMITS = {"values": 4096}     # tensors up to this many elements keep their data (integers, non-finite)


def _dtype_name(dtype: Any) -> str:
    return str(dtype).replace("torch.", "")


def _layout(t: Any) -> str:
    if t.is_contiguous():
        return "contiguous"
    if t.dim() >= 2 and t.transpose(-1, -2).is_contiguous():
        return "transposed"
    return "strided"


def _num(x: float) -> float | None:
    return None if math.isnan(x) or math.isinf(x) else float(x)


def tensor_stats(t: Any) -> dict[str, Any]:
    """Statistics of ``t``'s values (moments over finite values; exact flags when not sampled)."""
    import torch

    n = t.numel()
    out: dict[str, Any] = {"numel": n, "finite": 0}
    if n == 0 or t.is_complex() or t.device.type == "meta":
        return out
    flat = t.detach().reshape(-1)
    sampled = n > 4_000_000
    if sampled:
        flat = flat[:: n // 4_000_000 + 1]
    try:
        f = flat.to(torch.float64).cpu()
    except (RuntimeError, TypeError):
        return out
    finite = torch.isfinite(f)
    ff = f[finite]
    out["finite"] = int(finite.sum()) if not sampled else int(round(finite.float().mean().item() * n))
    if ff.numel():
        mean = ff.mean().item()
        var = ff.var(unbiased=False).item() if ff.numel() > 1 else 0.0
        out.update(min=ff.min().item(), max=ff.max().item(), mean=_num(mean), std=_num(math.sqrt(var)))
        if var > 0 and ff.numel() >= 8:
            out["kurtosis"] = _num(((ff - mean) ** 4).mean().item() / (var * var))
        out["zero_frac"] = (ff == 0).double().mean().item()
        out["integral"] = bool((ff == ff.round()).all())
    is_int = not t.dtype.is_floating_point
    if (is_int or out.get("integral")) and not sampled:
        uniq = torch.unique(f)
        out["unique"] = int(uniq.numel())
        out["sorted"] = bool(n > 1 and (f[1:] >= f[:-1]).all())
        out["permutation"] = bool(n > 1 and is_int and uniq.numel() == n and f.min().item() == 0
                                  and f.max().item() == n - 1)
    has_nonfinite = out["finite"] < n
    if n <= LIMITS["values"] and not sampled and (is_int or has_nonfinite):
        vals = f.tolist()
        out["values"] = [int(v) for v in vals] if is_int else vals
    return out


def describe(obj: Any, *, stats: bool, depth: int = 0) -> dict[str, Any]:
    import torch

    if isinstance(obj, torch.Tensor):
        d = {"k": "tensor", "shape": list(obj.shape), "dtype": _dtype_name(obj.dtype),
             "stride": list(obj.stride()), "device": obj.device.type, "layout": _layout(obj),
             "requires_grad": bool(obj.requires_grad)}
        if stats:
            d["stats"] = tensor_stats(obj)
        return d
    if isinstance(obj, bool):
        return {"k": "bool", "v": obj}
    if isinstance(obj, int):
        return {"k": "int", "v": int(obj)}
    if isinstance(obj, float):
        return {"k": "float", "v": obj}
    if isinstance(obj, str):
        return {"k": "str", "v": obj}
    if obj is None:
        return {"k": "none"}
    if isinstance(obj, torch.dtype):
        return {"k": "dtype", "v": _dtype_name(obj)}
    if isinstance(obj, torch.device):
        return {"k": "str", "v": str(obj), "t": "device"}
    if isinstance(obj, (tuple, list)) and depth < 3 and len(obj) <= 64:
        kind = "list" if isinstance(obj, list) else "tuple"
        return {"k": "seq", "type": kind,
                "items": [describe(v, stats=stats, depth=depth + 1) for v in obj]}
    if hasattr(obj, "item") and hasattr(obj, "dtype") and getattr(obj, "ndim", 1) == 0:
        try:                               # numpy scalars
            v = obj.item()
            return describe(v, stats=stats, depth=depth)
        except Exception:                  # noqa: BLE001
            pass
    return {"k": "other", "t": type(obj).__name__}


def _tensors(obj: Any, out: list, depth: int = 0) -> list:
    import torch

    if isinstance(obj, torch.Tensor):
        out.append(obj)
    elif isinstance(obj, (tuple, list)) and depth < 3 and len(obj) <= 64:   # as ``describe``
        for v in obj:
            _tensors(v, out, depth + 1)
    return out


def _mark_written(desc: Any, flags: list[bool]) -> None:
    """Set ``written`` on tensor descriptions in the same order ``_tensors`` walked them."""
    if isinstance(desc, dict):
        if desc.get("k") == "tensor":
            desc["written"] = flags.pop(0) if flags else False
        elif desc.get("k") == "seq":
            for item in desc["items"]:
                _mark_written(item, flags)
    elif isinstance(desc, list):
        for item in desc:
            _mark_written(item, flags)


def _same(a: Any, b: Any) -> bool:
    import torch

    if a.shape != b.shape:
        return False
    if a.dtype.is_floating_point or a.is_complex():
        return bool(((a == b) | (torch.isnan(a) & torch.isnan(b))).all())
    return bool(torch.equal(a, b))


def _strip_stats(desc: Any) -> Any:
    if isinstance(desc, dict):
        return {k: _strip_stats(v) for k, v in desc.items() if k != "stats"}
    if isinstance(desc, list):
        return [_strip_stats(v) for v in desc]
    return desc


def _count_tensors(desc: Any) -> int:
    if isinstance(desc, dict):
        if desc.get("k") == "tensor":
            return 1
        if desc.get("k") == "seq":
            return sum(_count_tensors(i) for i in desc["items"])
        return 0
    if isinstance(desc, list):
        return sum(_count_tensors(i) for i in desc)
    return 0
