"""``analyze_source``: kernels, launch sites and entry candidates of one source file."""

from __future__ import annotations

import ast
import logging
from dataclasses import replace

from ..errors import SourceFileError
from ..model import content_hash
from ._astutil import SourceText
from .kernels import analyze_kernel, is_kernel_def
from .launches import build_scope, find_launches
from .model import KernelInfo, SourceAnalysis

log = logging.getLogger(__name__)


def _kernel_defs(tree: ast.Module) -> list[tuple[ast.FunctionDef, bool]]:
    """Every kernel definition with whether it is nested in a function or class, in source order."""
    out: list[tuple[ast.FunctionDef, bool]] = []

    def visit(node: ast.AST, nested: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if is_kernel_def(child):
                out.append((child, nested))
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                visit(child, True)
            else:
                visit(child, nested)

    visit(tree, False)
    out.sort(key=lambda x: x[0].lineno)
    return out


def _callers_of(calls: dict[str, set[str]], seeds: set[str]) -> set[str]:
    """``seeds`` and every name of ``calls`` (name -> the names it uses) that reaches one of
    them, at any depth."""
    reach = set(seeds)
    changed = True
    while changed:
        changed = False
        for name, used in calls.items():
            if name not in reach and used & reach:
                reach.add(name)
                changed = True
    return reach


def _entry_candidates(tree: ast.Module, launching: set[str], kernels: set[str]) -> tuple[str, ...]:
    """Top-level functions and classes that launch a kernel, directly or through each other."""
    tops = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                      ast.ClassDef)) and n.name not in kernels]
    calls: dict[str, set[str]] = {}
    for node in tops:
        calls[node.name] = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
    reach = _callers_of(calls, {name for name in calls if name in launching})
    return tuple(n.name for n in tops if n.name in reach and not n.name.startswith("test"))


def _dot_through_helpers(kernels: list[KernelInfo], fns: list[ast.AST]) -> list[KernelInfo]:
    """``uses_dot`` also where the ``tl.dot`` is in a ``@triton.jit`` helper the kernel calls,
    at any depth: attention kernels keep their loop in an ``_attn_fwd_inner``. Read from the
    kernel alone, attn_fwd_causal's ``_attn_fwd`` had no dot, and the rules proposed num_warps
    8 -> 1, whose 128-row tile ran one case for 55 s before the record's cap cut it (H100,
    2026-11-26); a kernel with a dot keeps 4 warps or more (``search.rules``)."""
    names = {k.name for k in kernels}
    calls = {fn.name: {n.func.id for n in ast.walk(fn) if isinstance(n, ast.Call)
                       and isinstance(n.func, ast.Name) and n.func.id in names}
             for fn in fns if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))}
    dot = _callers_of(calls, {k.name for k in kernels if k.uses_dot})
    return [replace(k, uses_dot=True) if k.name in dot and not k.uses_dot else k for k in kernels]


def analyze_source(source: str, filename: str = "<source>") -> SourceAnalysis:
    """Statically analyze a kernel file; raise SourceFileError when it is not valid Python.

    A file with no kernel is not an error here (the analysis just lists none): callers that need
    one, like ``tasks.source.summarize_source``, say so themselves.
    """
    try:
        tree = ast.parse(source, filename=filename)
    except SyntaxError as exc:
        raise SourceFileError(
            f"syntax error: {exc.msg}",
            location=f"{filename}:{exc.lineno}" + (f":{exc.offset}" if exc.offset else ""),
            hint="fix the Python syntax; TritonForge imports the file as a module",
        ) from None
    text = SourceText(source)
    module_scope = build_scope(None, tree.body)
    module_assigns = {name: entries[-1][1] for name, entries in module_scope.assigns.items()
                      if entries[-1][1] is not None}
    kernels: list[KernelInfo] = []
    defs = _kernel_defs(tree)
    for fn, nested in defs:
        kernels.append(analyze_kernel(fn, text, module_assigns, nested=nested))
    kernels = _dot_through_helpers(kernels, [fn for fn, _ in defs])
    by_name: dict[str, KernelInfo] = {}
    notes = []
    for k in kernels:
        if k.name in by_name:
            notes.append(f"kernel {k.name!r} is defined more than once; launches bind to the first")
        by_name.setdefault(k.name, k)
    sites = find_launches(tree, text, by_name, module_scope)
    launching = {s.function.split(".")[0] for s in sites if s.function}
    entries = _entry_candidates(tree, launching, set(by_name))
    functions = tuple(n.name for n in tree.body
                      if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                      and n.name not in by_name)
    classes = tuple(n.name for n in tree.body if isinstance(n, ast.ClassDef))
    imported: list[str] = []
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                imported.append(alias.asname or alias.name.split(".")[0])
    if kernels and not sites:
        notes.append("no kernel[grid](...) launch found in this file")
    log.debug("analyzed %s: %d kernels, %d launch sites", filename, len(kernels), len(sites))
    return SourceAnalysis(content_hash(source), tuple(kernels), sites, entries, functions, classes,
                          tuple(dict.fromkeys(imported)), tuple(notes), source)
