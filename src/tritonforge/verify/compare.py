"""Compare a candidate's outputs with the original's, element by element and in norm.

The rule (BENCHMARK.md): every element satisfies |c - o| <= atol + rtol*|o|, AND the relative
error norm ||c - o|| / ||o|| stays under ``rel_norm``; NaN and Inf sit exactly where the original
has them; shapes, dtypes, devices and strides (of dimensions longer than 1) match; integers and
booleans are exact; elements the original leaves unwritten (still poisoned) are not compared,
their value being undefined. The norm test exists because small outputs hide lower precision from an
absolute tolerance: a softmax over 32k columns has outputs near 3e-5, so atol = 1e-4 alone lets a
kernel compute exp in fp16 pass.

The absolute atol holds on generated cases of large magnitudes too, though there an honest change
of summation order can move a cancelling element by more than it (nine of bgmv_shrink_kernel's
split-K and num_warps candidates failed its large-magnitude case on 2 of 80 elements, error norm
0.0005, on an H200): an atol scaled by the outputs' RMS was tried for them and let a GEMM that
accumulates in fp16 pass its generated cases (``tests/tasks/test_generated_gemm.py``).

One ``Mismatch`` is reported per output that differs (plus one for a stride difference), with the
evidence a user or a repair loop needs: how many elements, the worst one, both values, the norms.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Iterable, Mapping

import numpy as np
import torch

from ..config import DEFAULT_TOLERANCES
from ..model import Mismatch, Tolerance
from .kinds import MismatchKind as K
from .poison import poison_mask
from .tree import unravel

ToleranceFor = Callable[[torch.dtype, bool], Tolerance]


def dtype_key(dtype: torch.dtype) -> str:
    """``float32`` for ``torch.float32``; every float8 variant maps to ``float8``."""
    name = str(dtype).removeprefix("torch.")
    return "float8" if name.startswith("float8") else name


def tolerance_table(
    overrides: Mapping[str, Tolerance] | Iterable[tuple[str, Tolerance]] = (),
) -> ToleranceFor:
    """A ``tolerance_for(dtype, uses_dot)`` from DEFAULT_TOLERANCES updated by ``overrides``.

    Keys are dtype names (``float16``) or ``<dtype>-dot`` for kernels whose original uses tl.dot
    (fp32 dot runs in tf32 by default). With ``uses_dot`` the ``-dot`` entry wins where there is
    one; dtypes with no entry (complex64, float64 without override) fall back on float32's.
    """
    table = dict(DEFAULT_TOLERANCES)
    table.update(dict(overrides))

    def tolerance_for(dtype: torch.dtype, uses_dot: bool) -> Tolerance:
        key = dtype_key(dtype)
        if key.startswith("complex"):
            key = "float64" if key == "complex128" else "float32"
        if uses_dot and f"{key}-dot" in table:
            return table[f"{key}-dot"]
        return table.get(key, table["float32"])

    return tolerance_for


def compare_outputs(
    reference: Any,
    candidate: Any,
    *,
    case_id: str,
    seed: int,
    tolerance_for: ToleranceFor,
    path: str = "return",
    uses_dot: bool = False,
    check_poison: bool = True,
) -> list[Mismatch]:
    """Every way ``candidate`` differs from ``reference`` (nested tuples/lists/dicts of tensors,
    Python scalars, None, torch.Size, strings, bools); an empty list when it matches."""
    out: list[Mismatch] = []
    _compare(reference, candidate, path, out, _Ctx(case_id, seed, tolerance_for, uses_dot,
                                                   check_poison))
    return out


class _Ctx:
    def __init__(self, case_id: str, seed: int, tolerance_for: ToleranceFor, uses_dot: bool,
                 check_poison: bool) -> None:
        self.case_id, self.seed = case_id, seed
        self.tolerance_for, self.uses_dot, self.check_poison = tolerance_for, uses_dot, check_poison

    def mismatch(self, path: str, kind: K, message: str, **evidence: Any) -> Mismatch:
        return Mismatch(case_id=self.case_id, seed=self.seed, output=path, kind=kind.value,
                        message=message, **evidence)


def _type_name(value: Any) -> str:
    return type(value).__name__


def _same_named_tuple(ref: Any, cand: Any) -> bool:
    """Both are the "same" namedtuple class defined in two imports of the user's module: the
    original and the candidate each import their own copy, so a file that returns
    ``namedtuple("max", ["values", "indices"])`` gives two distinct classes of one name and fields
    (max_reduction, H100: every candidate was "a max, not a max"). Their items are compared."""
    return (isinstance(ref, tuple) and isinstance(cand, tuple)
            and type(ref).__qualname__ == type(cand).__qualname__
            and getattr(ref, "_fields", None) is not None
            and getattr(ref, "_fields", None) == getattr(cand, "_fields", None))


def _compare(ref: Any, cand: Any, path: str, out: list[Mismatch], ctx: _Ctx) -> None:
    if isinstance(ref, np.ndarray) and isinstance(cand, np.ndarray):
        ref, cand = torch.from_numpy(ref), torch.from_numpy(cand)
    if isinstance(ref, torch.Tensor) or isinstance(cand, torch.Tensor):
        if not (isinstance(ref, torch.Tensor) and isinstance(cand, torch.Tensor)):
            out.append(ctx.mismatch(path, K.TYPE, f"the original gives a {_type_name(ref)}, "
                                                  f"the candidate a {_type_name(cand)}"))
            return
        out.extend(_compare_tensors(ref, cand, path, ctx))
        return
    if type(ref) is not type(cand) and not _same_named_tuple(ref, cand):
        out.append(ctx.mismatch(path, K.TYPE, f"the original gives a {_type_name(ref)}, "
                                              f"the candidate a {_type_name(cand)}"))
        return
    if isinstance(ref, torch.Size) or ref is None or isinstance(ref, (bool, int, str, bytes)):
        if ref != cand:
            out.append(ctx.mismatch(path, K.VALUE, f"candidate {cand!r} vs original {ref!r}",
                                    n_bad=1, n_total=1))
        return
    if isinstance(ref, float):
        _compare_float(ref, cand, path, out, ctx)
        return
    if isinstance(ref, (tuple, list)):
        for i in range(max(len(ref), len(cand))):
            if i >= len(ref) or i >= len(cand):
                who = "candidate" if i >= len(ref) else "original"
                out.append(ctx.mismatch(f"{path}[{i}]", K.MISSING,
                                        f"only the {who} has item {i} (original has {len(ref)} "
                                        f"items, candidate {len(cand)})"))
                continue
            _compare(ref[i], cand[i], f"{path}[{i}]", out, ctx)
        return
    if isinstance(ref, dict):
        for key in list(ref) + [k for k in cand if k not in ref]:
            if key not in ref or key not in cand:
                who = "candidate" if key not in ref else "original"
                out.append(ctx.mismatch(f"{path}[{key!r}]", K.MISSING, f"only the {who} has key "
                                                                       f"{key!r}"))
                continue
            _compare(ref[key], cand[key], f"{path}[{key!r}]", out, ctx)
        return
    try:
        equal = bool(ref == cand)
    except Exception:        # objects without a usable ==: nothing more can be said
        return
    if not equal:
        out.append(ctx.mismatch(path, K.VALUE, f"candidate {cand!r} vs original {ref!r}",
                                n_bad=1, n_total=1))


def _compare_float(ref: float, cand: float, path: str, out: list[Mismatch], ctx: _Ctx) -> None:
    tol = ctx.tolerance_for(torch.float32, ctx.uses_dot)
    if math.isnan(ref) or math.isnan(cand) or math.isinf(ref) or math.isinf(cand):
        same = (math.isnan(ref) and math.isnan(cand)) or ref == cand
        if not same:
            out.append(ctx.mismatch(path, K.NAN, f"candidate {cand!r} vs original {ref!r}",
                                    n_bad=1, n_total=1, candidate_value=cand,
                                    reference_value=ref))
        return
    err = abs(cand - ref)
    if err > tol.atol + tol.rtol * abs(ref):
        out.append(ctx.mismatch(path, K.VALUE, f"candidate {cand!r} vs original {ref!r} "
                                               f"(|c-o| {err:.3g})", n_bad=1, n_total=1,
                                candidate_value=cand, reference_value=ref, max_abs_err=err))


def _first(mask: torch.Tensor) -> tuple[int, ...]:
    return unravel(int(torch.argmax(mask.reshape(-1).to(torch.uint8)).item()), tuple(mask.shape))


def _item(t: torch.Tensor, index: tuple[int, ...]) -> float:
    value = t[index].item()
    return float(value.real if isinstance(value, complex) else value)


def _compare_tensors(ref: torch.Tensor, cand: torch.Tensor, path: str, ctx: _Ctx) -> list[Mismatch]:
    if ref.shape != cand.shape:
        return [ctx.mismatch(path, K.SHAPE, f"shape {tuple(cand.shape)} vs original "
                                            f"{tuple(ref.shape)}")]
    if ref.dtype != cand.dtype:
        return [ctx.mismatch(path, K.DTYPE, f"dtype {cand.dtype} vs original {ref.dtype}")]
    if ref.device != cand.device:
        return [ctx.mismatch(path, K.DEVICE, f"device {cand.device} vs original {ref.device}")]
    found: list[Mismatch] = []
    long_dims = [d for d in range(ref.dim()) if ref.shape[d] > 1]
    if any(ref.stride(d) != cand.stride(d) for d in long_dims):
        found.append(ctx.mismatch(path, K.STRIDE, f"strides {cand.stride()} vs original "
                                                  f"{ref.stride()} (same shape {tuple(ref.shape)})"))
    if ref.numel() == 0:
        return found
    ref, cand = ref.detach(), cand.detach()
    unwritten = None
    if ctx.check_poison:
        mc, mr = poison_mask(cand), poison_mask(ref)
        if mc is not None and mr is not None:
            unwritten = mc & ~mr
            if bool(mr.any()):
                # the original leaves these unwritten: their value is undefined, anything goes
                ref = torch.where(mr, torch.zeros_like(ref), ref)
                cand = torch.where(mr, torch.zeros_like(cand), cand)
    if ref.dtype.is_complex:
        ref, cand = torch.view_as_real(ref), torch.view_as_real(cand)
        if unwritten is not None:
            unwritten = unwritten.unsqueeze(-1).expand(ref.shape)
    n = ref.numel()
    if unwritten is not None and bool(unwritten.any()):
        count = int(unwritten.sum().item())
        at = _first(unwritten)
        found.append(ctx.mismatch(
            path, K.UNWRITTEN,
            f"{count} of {n} elements still hold the poison value where the original wrote a "
            f"value (first at {at}: original {_item(ref, at):.6g}): never written, or copied from "
            f"memory that never was", n_bad=count, n_total=n, worst_index=at,
            candidate_value=_item(cand, at), reference_value=_item(ref, at)))
        return found
    if not ref.dtype.is_floating_point:
        bad = ref != cand
        if bool(bad.any()):
            count = int(bad.sum().item())
            at = _first(bad)
            found.append(ctx.mismatch(
                path, K.VALUE, f"{count} of {n} elements differ (exact dtype {ref.dtype}; first "
                               f"at {at}: candidate {_item(cand, at):.6g} vs original "
                               f"{_item(ref, at):.6g})", n_bad=count, n_total=n, worst_index=at,
                candidate_value=_item(cand, at), reference_value=_item(ref, at)))
        return found
    found.extend(_compare_floats(ref, cand, path, ctx))
    return found


def _compare_floats(ref: torch.Tensor, cand: torch.Tensor, path: str, ctx: _Ctx) -> list[Mismatch]:
    tol = ctx.tolerance_for(ref.dtype, ctx.uses_dot)
    r, c = ref.double(), cand.double()
    n = r.numel()
    r_nan, c_nan = torch.isnan(r), torch.isnan(c)
    finite = torch.isfinite(r) & torch.isfinite(c)
    # NaN must face NaN; an Inf must face the same Inf; a finite value must face a finite one.
    nonfinite_bad = (r_nan != c_nan) | (~finite & ~r_nan & ~c_nan & (r != c))
    err = torch.where(finite, (c - r).abs(), torch.zeros_like(r))
    bound = tol.atol + tol.rtol * torch.where(finite, r.abs(), torch.zeros_like(r))
    value_bad = finite & (err > bound)
    max_abs = float(err.max().item())
    ref_norm = float(torch.linalg.vector_norm(torch.where(finite, r, torch.zeros_like(r))).item())
    diff_norm = float(torch.linalg.vector_norm(err).item())
    rel_norm = diff_norm / ref_norm if ref_norm > 0 else (0.0 if diff_norm == 0 else math.inf)
    evidence = dict(n_total=n, max_abs_err=max_abs, rel_norm_err=rel_norm)
    norms = f"max |c-o| {max_abs:.3g}, ||c-o||/||o|| {rel_norm:.3g} (limit {tol.rel_norm:g})"

    if bool(nonfinite_bad.any()):
        count = int(nonfinite_bad.sum().item())
        at = _first(nonfinite_bad)
        return [ctx.mismatch(
            path, K.NAN, f"{count} of {n} elements are NaN/Inf where the original's are not, or "
                         f"the reverse (first at {at}: candidate {_item(cand, at):.6g} vs original "
                         f"{_item(ref, at):.6g}; a NaN where the original has a number often means "
                         f"it read memory it never wrote); {norms}",
            n_bad=count, worst_index=at, candidate_value=_item(cand, at),
            reference_value=_item(ref, at), **evidence)]
    if bool(value_bad.any()):
        count = int(value_bad.sum().item())
        ratio = torch.where(value_bad, err / bound, torch.zeros_like(err))
        at = unravel(int(torch.argmax(ratio.reshape(-1)).item()), tuple(r.shape))
        return [ctx.mismatch(
            path, K.VALUE, f"{count} of {n} elements outside |c-o| <= {tol.atol:g} + "
                           f"{tol.rtol:g}*|o| (worst at {at}: candidate {_item(cand, at):.6g} vs "
                           f"original {_item(ref, at):.6g}); {norms}",
            n_bad=count, worst_index=at, candidate_value=_item(cand, at),
            reference_value=_item(ref, at), **evidence)]
    if ref_norm > 0 and rel_norm > tol.rel_norm:
        at = unravel(int(torch.argmax(err.reshape(-1)).item()), tuple(r.shape))
        return [ctx.mismatch(
            path, K.NORM, f"every element is within |c-o| <= {tol.atol:g} + {tol.rtol:g}*|o|, "
                          f"but the error norm is not: {norms}; lower precision or values "
                          f"flushed to zero hide under the absolute tolerance (largest error at "
                          f"{at}: candidate {_item(cand, at):.6g} vs original {_item(ref, at):.6g})",
            n_bad=0, worst_index=at, candidate_value=_item(cand, at),
            reference_value=_item(ref, at), **evidence)]
    return []
