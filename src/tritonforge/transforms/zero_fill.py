"""Allocate with ``torch.empty`` a buffer the wrapper zero-fills only for a kernel to overwrite.

``out = torch.zeros(...)`` before ``kernel[grid](..., out, ...)`` costs a fill kernel on the GPU
and its launch on the host. Where the kernel writes the buffer and never reads it, the zeros are
dead: ``torch.empty`` gives the same result with neither. The launch matters most: the timed call
(BENCHMARK.md) flushes the L2 before each call, and the host's work up to the first GPU operation
overlaps that flush, while every later launch waits on the host. With the fill gone, the Triton
kernel's launch (about 20 us of host time on the H100 machine, ``scripts/gpu_host_probe.py``) is
the first operation. kldiv_ops' wrapper zero-fills its per-row loss before the kernel stores
every row.

Applied only where, statically:

- the buffer is a local name assigned once, alone, by ``torch.zeros(...)`` or
  ``torch.zeros_like(...)``;
- a launch of a kernel passes it for a pointer parameter the kernel stores through, and the kernel
  neither loads through that parameter nor updates it atomically (an accumulator needs its
  zeros), and has no store or atomic whose base pointer the analysis could not resolve;
- between the assignment and that launch, the function reads the buffer only for its metadata
  (``.stride()``, ``.shape``, ``.numel()`` ...) and does not return;
- the launch runs whenever the assignment did: it sits in the same statement list as the
  assignment or in one that encloses it, inside ``with`` blocks at most.

A kernel that stores only part of the buffer (a masked store, a grid that misses rows) is not
caught here: the verifier poisons every ``empty``-family allocation of a candidate
(``verify.poison``), so an element left unwritten shows as poison in the outputs, or turns what
is computed from it into NaN.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any

from ..analyze import LaunchSite, SourceAnalysis
from .base import Applicability, Transform, alias_refusal, char_index

ZERO_FILLS = {"zeros": "empty", "zeros_like": "empty_like"}
METADATA = frozenset({"stride", "shape", "size", "numel", "dtype", "device", "element_size",
                      "is_contiguous", "dim", "ndim", "is_cuda", "data_ptr"})


@dataclass(frozen=True)
class _Fill:
    """One zero-filled buffer that can be allocated empty: where its ``torch.zeros`` name ends."""

    name: str
    function: str
    line: int            # 1-based line of the ``torch.zeros`` attribute
    end_col: int         # byte offset (UTF-8) where ``zeros``/``zeros_like`` ends on that line
    attr: str


def _parents(tree: ast.AST) -> dict[ast.AST, ast.AST]:
    return {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}


def _functions(tree: ast.AST) -> dict[str, ast.FunctionDef]:
    """Functions by qualified name (``Class.method``), as the analysis names launch sites."""
    out: dict[str, ast.FunctionDef] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out[prefix + child.name] = child
                visit(child, prefix + child.name + ".")
            elif isinstance(child, ast.ClassDef):
                visit(child, prefix + child.name + ".")
            else:
                visit(child, prefix)
    visit(tree, "")
    return out


def _zero_fill_call(value: ast.AST) -> ast.Attribute | None:
    """The ``torch.zeros``/``torch.zeros_like`` attribute of ``value`` if it is such a call."""
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) \
            and value.func.attr in ZERO_FILLS and isinstance(value.func.value, ast.Name) \
            and value.func.value.id == "torch":
        return value.func
    return None


def _statement(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> ast.stmt:
    while not isinstance(node, ast.stmt):
        node = parents[node]
    return node


def _launch_statement(fn: ast.AST, line: int, parents: dict[ast.AST, ast.AST]) -> ast.stmt | None:
    """The statement of ``fn`` holding the ``kernel[grid](...)`` call that starts on ``line``."""
    for node in ast.walk(fn):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Subscript) \
                and node.lineno == line:
            return _statement(node, parents)
    return None


def _list_of(stmt: ast.stmt, parents: dict[ast.AST, ast.AST]) -> tuple[ast.AST, str] | None:
    """The (node, field) whose statement list holds ``stmt``."""
    parent = parents.get(stmt)
    if parent is None:
        return None
    for field in ("body", "orelse", "finalbody", "handlers"):
        if stmt in getattr(parent, field, ()):
            return parent, field
    return None


def _launch_follows(assign: ast.stmt, launch: ast.stmt, fn: ast.AST,
                    parents: dict[ast.AST, ast.AST]) -> bool:
    """``launch`` runs whenever ``assign`` did: climbing from ``launch`` through ``with`` blocks
    only reaches a statement list that holds ``assign`` or one of its enclosing statements,
    after it."""
    enclosing = []          # assign and the statements that enclose it, up to the function
    node: ast.AST = assign
    while node is not fn:
        if isinstance(node, ast.stmt):
            enclosing.append(node)
        node = parents[node]
    node = launch
    while True:
        where = _list_of(node, parents)
        if where is None:
            return False
        holder, field = where
        stmts = getattr(holder, field)
        for e in enclosing:
            if e in stmts:
                return stmts.index(e) < stmts.index(node)
        if not isinstance(holder, (ast.With, ast.AsyncWith)) or field != "body":
            return False
        node = holder


def _reads_before(fn: ast.AST, name: str, after: int, before: int,
                  parents: dict[ast.AST, ast.AST]) -> str | None:
    """Why ``name`` is used between lines ``after`` and ``before`` (exclusive) other than for its
    metadata, or returned from there; None when it is not."""
    for node in ast.walk(fn):
        line = getattr(node, "lineno", 0)
        if not after < line < before:
            continue
        if isinstance(node, ast.Return):
            return f"the function may return before the launch (line {line})"
        if isinstance(node, ast.Name) and node.id == name:
            up = parents.get(node)
            if not (isinstance(up, ast.Attribute) and up.attr in METADATA):
                return f"`{name}` is used before the launch (line {line})"
    return None


def _splat_refusal(site: LaunchSite, name: str) -> str | None:
    """Why a launch with ``*args`` may hide another use of buffer ``name`` (None: it cannot).
    The buffer's own argument comes before every splat (its parameter is known), so the splats
    matter only where they pass the buffer itself: ``*out.stride()`` reads its metadata alone, as
    matrix_transpose's wrapper does (H100 pass, engine 1018ceeea5af: its zero fill was refused
    for the splat). A ``**kwargs`` splat is refused outright: it may name any parameter."""
    if site.star_kwargs:
        return f"site {site.index} passes **kwargs"
    for other in site.args:
        if not other.source.startswith("*"):
            continue
        try:
            expr = ast.parse(other.source.lstrip("*").strip(), mode="eval")
        except SyntaxError:
            return f"site {site.index} passes a *args splat the analysis cannot read"
        parents = _parents(expr)
        for node in ast.walk(expr):
            if isinstance(node, ast.Name) and node.id == name:
                up = parents.get(node)
                if not (isinstance(up, ast.Attribute) and up.attr in METADATA):
                    return f"site {site.index} passes `{name}` in a *args splat"
    return None


def find_fills(source: str, analysis: SourceAnalysis) -> tuple[list[_Fill], list[str]]:
    """The zero-filled buffers that can be allocated empty, and why each other one cannot."""
    tree = ast.parse(source)
    parents = _parents(tree)
    functions = _functions(tree)
    fills: dict[tuple[str, str], _Fill] = {}
    refused: dict[tuple[str, str], str] = {}
    for site in analysis.launch_sites:
        fn = functions.get(site.function or "")
        if fn is None or not analysis.has_kernel(site.kernel):
            continue
        kernel = analysis.kernel(site.kernel)
        for arg in site.args:
            if arg.variable is None or arg.param is None:
                continue
            key = (site.function or "", arg.variable)
            if key in refused:
                continue
            assigns = [n for n in ast.walk(fn) if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign))
                       and any(isinstance(t, ast.Name) and t.id == arg.variable
                               for t in (n.targets if isinstance(n, ast.Assign) else [n.target]))]
            if len(assigns) != 1 or not isinstance(assigns[0], ast.Assign) \
                    or len(assigns[0].targets) != 1 or _zero_fill_call(assigns[0].value) is None:
                # (``out = buf = torch.zeros(...)``: ``buf`` is the same buffer under a name
                # the checks below would not follow)
                continue            # not a zero-filled local: nothing to say about it
            why = alias_refusal(site, "allocating its buffer empty")
            if why is None and site.has_star_args:
                why = _splat_refusal(site, arg.variable)
            if why is None and (arg.param in kernel.loaded_params
                                  or arg.param in kernel.atomic_params):
                why = f"{site.kernel} reads {arg.param} (loads or atomics): it may need the zeros"
            elif why is None and arg.param not in kernel.stored_params:
                why = f"{site.kernel} never stores through {arg.param}"
            elif why is None and kernel.unresolved_accesses:
                why = f"{site.kernel} has stores whose target the analysis could not resolve"
            launch = _launch_statement(fn, site.span.line, parents) if why is None else None
            if why is None and (launch is None
                                or not _launch_follows(assigns[0], launch, fn, parents)):
                why = (f"the launch at line {site.span.line} may not run after `{arg.variable}` "
                       "is zero-filled")
            if why is None:
                why = _reads_before(fn, arg.variable, assigns[0].lineno, launch.lineno, parents)
            if why is not None:
                refused[key] = f"`{arg.variable}` in {site.function}: {why}"
                fills.pop(key, None)
                continue
            attr = _zero_fill_call(assigns[0].value)
            fills.setdefault(key, _Fill(arg.variable, site.function or "", attr.end_lineno,
                                        attr.end_col_offset, attr.attr))
    return list(fills.values()), list(refused.values())


class DropZeroFill(Transform):
    name = "drop_zero_fill"
    summary = "torch.zeros -> torch.empty for buffers a kernel writes before anything reads them"
    param_names = ()
    example_params: dict[str, Any] = {}
    no_example_reason = "no zero-filled buffer that a kernel only writes"

    def _applies(self, analysis: SourceAnalysis, **_: Any) -> Applicability:
        if not analysis.source:
            return Applicability.no("the analysis carries no source text")
        fills, refused = find_fills(analysis.source, analysis)
        if not fills:
            return Applicability.no("; ".join(refused[:3]) if refused else
                                    "no torch.zeros buffer passed to a kernel launch")
        return Applicability.yes([f"`{f.name}` in {f.function}" for f in fills])

    def _apply(self, source: str, analysis: SourceAnalysis, **_: Any) -> str:
        fills, _refused = find_fills(source, analysis)
        lines, text = source.splitlines(keepends=True), source
        # from the last one back: an edit moves only what follows it
        for f in sorted(fills, key=lambda f: (f.line, f.end_col), reverse=True):
            end = char_index(lines, f.line, f.end_col)
            text = text[:end - len(f.attr)] + ZERO_FILLS[f.attr] + text[end:]
        return text


__all__ = ["DropZeroFill", "find_fills"]
