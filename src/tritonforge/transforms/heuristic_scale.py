"""Scale a tile size or ``num_warps`` that ``@triton.heuristics`` computes for a kernel.

Kernels written in the FlagGems style choose their launch config in the decorator, not at the
launch::

    @triton.heuristics({"BLOCK": heur_block, "num_warps": heur_num_warps})
    @triton.jit
    def uniform_kernel(out_ptr, N, ..., BLOCK: tl.constexpr): ...

    uniform_kernel[grid_fn](out, N, ...)        # neither value written here

Nothing at the launch can change them (the heuristics overwrite whatever the call passes), so the
config search's launch-site space (``search.config_space.site_space``) has nothing to vary: on
an H100 pass (engine f421d501e87f, 2026-11-26) uniform_sampling and log_softmax got no config
candidate at all, and softmax_flaggems none for its heuristics-sized kernels. This transform
rewrites the dict entry instead, keeping the user's function and scaling what it returns::

    "BLOCK": lambda args, _tf_heur=heur_block: _tf_heur(args) * 2,
    "num_warps": lambda args, _tf_heur=heur_num_warps: max(1, _tf_heur(args) // 2),

so the value still follows the sizes as the user's rule meant it to, one power of two further.
Everything that reads the value downstream (a grid ``lambda meta: ...``, the kernel's
``tl.arange``) sees the scaled one: Triton runs the heuristics before the grid is computed.

``scales`` is a tuple of ``(key, factor)``: a factor above 1 multiplies, one below -1 divides
by its magnitude (``-2``: half). ``num_warps`` stays within 1..32 (Triton's 1024 threads a
program). A key must be ``num_warps`` or a constexpr parameter the kernel uses as a tile size
(a ``tl.arange`` bound or a block-like constexpr): a tile's value can change what the kernel
computes (a row that must fit one tile), so the result is not assumed to be the same
(``preserves_semantics`` is False); the verifier judges every candidate. A wrapper that calls
the heuristic function itself to size its grid is out of step with the kernel after the rewrite;
the verifier rejects that candidate too.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any

from ..analyze import SourceAnalysis
from ..analyze._astutil import dotted
from ._scale import WARPS_MAX, atom, rescale, split_scaled
from .base import Applicability, Transform, char_index


@dataclass(frozen=True)
class HeuristicEntry:
    """One ``"key": value`` of a kernel's ``@triton.heuristics`` dict: where its value is."""

    key: str
    start: tuple[int, int]      # (1-based line, byte column) of the value expression
    end: tuple[int, int]


def heuristic_entries(source: str, kernel: str) -> dict[str, HeuristicEntry]:
    """The entries of every literal ``@triton.heuristics({...})`` dict on the function named
    ``kernel`` (at any nesting level), by key; empty when there is none."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return {}
    out: dict[str, HeuristicEntry] = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef) or node.name != kernel:
            continue
        for dec in node.decorator_list:
            if not isinstance(dec, ast.Call) or dotted(dec.func).split(".")[-1] != "heuristics":
                continue
            values = dec.args[0] if dec.args else next(
                (k.value for k in dec.keywords if k.arg == "values"), None)
            if not isinstance(values, ast.Dict):
                continue
            for k, v in zip(values.keys, values.values):
                if isinstance(k, ast.Constant) and isinstance(k.value, str) and v is not None:
                    out[k.value] = HeuristicEntry(k.value, (v.lineno, v.col_offset),
                                                  (v.end_lineno, v.end_col_offset))
    return out


def scalable_keys(analysis: SourceAnalysis, kernel: str) -> tuple[str, ...]:
    """The heuristics keys of ``kernel`` this transform may scale: tile constexprs (in the
    kernel's own order) and ``num_warps``."""
    if not analysis.has_kernel(kernel):
        return ()
    info = analysis.kernel(kernel)
    heur = set(info.heuristics)
    if not heur or not analysis.source:
        return ()
    tiles = set(info.arange_constexprs) | set(info.block_constexprs)
    entries = heuristic_entries(analysis.source, kernel)
    keys = [p.name for p in info.params if p.name in heur and p.name in tiles and p.name in entries]
    if "num_warps" in heur and "num_warps" in entries:
        keys.append("num_warps")
    return tuple(keys)


CALL = "_tf_heur(args)"


def _unwrapped(value: str, cap: int | None) -> tuple[str, str]:
    """``(the user's expression, the scaled call)`` of a dict value this module wrote, so that a
    second scaling folds into the first instead of wrapping it; ``(value, CALL)`` for any other."""
    try:
        node = ast.parse(value.strip(), mode="eval").body
    except SyntaxError:
        return value, CALL
    if not (isinstance(node, ast.Lambda) and [a.arg for a in node.args.args] == ["args", "_tf_heur"]
            and len(node.args.defaults) == 1):
        return value, CALL
    src = value.strip()
    body = ast.get_source_segment(src, node.body) or ""
    user = ast.get_source_segment(src, node.args.defaults[0]) or ""
    if not body or not user or split_scaled(body, cap)[0] != CALL:
        return value, CALL
    return user, body


def scaled_text(key: str, value: str, factor: int) -> str:
    """The new dict value: ``value`` (the user's expression) called and scaled by ``factor``.
    A value this module scaled before keeps one wrapper, the two factors combined (back to the
    user's expression where they cancel)."""
    cap = WARPS_MAX if key == "num_warps" else None
    user, body = _unwrapped(value, cap)
    body = rescale(body, factor, cap)
    if body == CALL:
        return user
    # a name or a call needs no parentheses; a lambda or a multi-line expression does (a lambda
    # as a default value would swallow the rest)
    if not atom(user):
        user = f"({user})"
    return f"lambda args, _tf_heur={user}: {body}"


def describe(scales: tuple[tuple[str, int], ...]) -> str:
    """``BLOCK x2, num_warps /2``."""
    return ", ".join(f"{k} {'x' if f > 1 else '/'}{abs(f)}" for k, f in scales)


class HeuristicScale(Transform):
    name = "heuristic_scale"
    summary = "scale a tile size or num_warps that @triton.heuristics computes (x2, /2, ...)"
    preserves_semantics = False
    param_names = ("kernel", "scales")
    no_example_reason = "no kernel with a tile size or num_warps set by @triton.heuristics"

    def examples(self, analysis: SourceAnalysis) -> list[dict[str, Any]]:
        out = []
        for k in analysis.kernels:
            keys = scalable_keys(analysis, k.name)
            if keys:
                out.append({"kernel": k.name, "scales": ((keys[0], 2),)})
        return out

    def _applies(self, analysis: SourceAnalysis, kernel: str | None = None,
                 scales: tuple[tuple[str, int], ...] = (), **_: Any) -> Applicability:
        if not kernel or not scales:
            return Applicability.no("needs kernel= and scales=((key, factor), ...)")
        keys = scalable_keys(analysis, kernel)
        if not keys:
            return Applicability.no(f"{kernel}: no tile size or num_warps set by a literal "
                                    "@triton.heuristics dict")
        for key, factor in scales:
            if key not in keys:
                return Applicability.no(f"{kernel}: `{key}` is not a tile size or num_warps its "
                                        f"heuristics set (those are: {', '.join(keys)})")
            if not isinstance(factor, int) or factor in (0, 1, -1):
                return Applicability.no(f"{kernel}: factor {factor!r} for `{key}` is not an "
                                        "integer above 1 or below -1")
        if len({k for k, _ in scales}) != len(scales):
            return Applicability.no(f"{kernel}: a key is scaled twice")
        return Applicability.yes([f"kernel {kernel}: {describe(tuple(scales))}"])

    def _apply(self, source: str, analysis: SourceAnalysis, kernel: str | None = None,
               scales: tuple[tuple[str, int], ...] = (), **_: Any) -> str:
        entries = heuristic_entries(source, kernel or "")
        lines = source.splitlines(keepends=True)
        spans = []
        for key, factor in scales:
            e = entries[key]
            start = char_index(lines, *e.start)
            end = char_index(lines, *e.end)
            spans.append((start, end, key, factor))
        text = source
        for start, end, key, factor in sorted(spans, reverse=True):   # bottom up: offsets hold
            # the user's value is kept as written inside the new lambda (``scaled_text``)
            text = text[:start] + scaled_text(key, text[start:end], factor) + text[end:]
        return text


__all__ = ["HeuristicEntry", "HeuristicScale", "describe", "heuristic_entries", "scalable_keys",
           "scaled_text"]
