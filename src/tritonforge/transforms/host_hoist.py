"""Create a wrapper's ``namedtuple`` class once, at import, instead of on every call.

``Max_out = namedtuple("max", ["values", "indices"])`` inside a wrapper builds a new class each
call: it compiles a ``__new__`` from a template, 20 us on this project's CI machine and more on
the GPU machine's slower cores. The timed call (BENCHMARK.md) ends when the host returns, so
host work after the launches is inside the measurement whenever it outlasts the kernels:
max_reduction's single-program kernel runs a few microseconds of its 60-120 us small cases.
Under paced timing (``Settings.timing_pace``, the default) a sample is the kernels' GPU time and
host work removed is not seen, so this gains there only with pacing off.
Built once at module level, the class is the same for every call; its instances are the same
tuples with the same field names.

Applied only where, statically: the assignment is a statement directly in a top-level
function's body; it calls ``namedtuple`` bound at module level (``from collections import
namedtuple``, or ``collections.namedtuple`` after ``import collections``) with literal
arguments only (the type name, the field names, literal keywords); and the function assigns the
name nowhere else. The class is bound to a new module-level name (``_tf_<function>_<name>``),
and the statement becomes ``NAME = _tf_<function>_<name>``.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any

from ..analyze import SourceAnalysis
from .base import Applicability, Transform, char_index


@dataclass(frozen=True)
class _Hoist:
    function: str
    name: str
    hoisted: str               # the new module-level name
    def_line: int              # first line of the function (its first decorator)
    value: tuple[int, int, int, int]   # (line, byte col, end line, end byte col) of the call
    call_text: str


def _literal(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, (ast.List, ast.Tuple)):
        return all(_literal(e) for e in node.elts)
    return False


def _namedtuple_spelling(tree: ast.Module) -> set[str]:
    """How the module's top level can call namedtuple: ``namedtuple``, ``collections.namedtuple``."""
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module == "collections":
            names |= {a.asname or a.name for a in node.names if a.name == "namedtuple"}
        elif isinstance(node, ast.Import):
            names |= {f"{a.asname or a.name}.namedtuple" for a in node.names
                      if a.name == "collections"}
    return names


def _called(func: ast.AST) -> str:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        return f"{func.value.id}.{func.attr}"
    return ""


def find_hoists(source: str) -> list[_Hoist]:
    """The namedtuple classes built inside top-level functions that can be built once."""
    tree = ast.parse(source)
    spellings = _namedtuple_spelling(tree)
    out: list[_Hoist] = []
    if not spellings:
        return out
    taken = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} | \
        {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    for fn in tree.body:
        if not isinstance(fn, ast.FunctionDef):
            continue
        shadowed = {a.arg for a in (*fn.args.args, *fn.args.kwonlyargs, *fn.args.posonlyargs)}
        for stmt in fn.body:
            if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
                    and isinstance(stmt.targets[0], ast.Name) and isinstance(stmt.value, ast.Call)):
                continue
            call = stmt.value
            if _called(call.func) not in spellings or _called(call.func).split(".")[0] in shadowed:
                continue
            if not call.args or not all(_literal(a) for a in call.args) or \
                    not all(k.arg is not None and _literal(k.value) for k in call.keywords):
                continue
            name = stmt.targets[0].id
            assigned = [n for n in ast.walk(fn) if isinstance(n, ast.Name) and n.id == name
                        and isinstance(n.ctx, ast.Store)]
            if len(assigned) != 1:
                continue
            hoisted = f"_tf_{fn.name}_{name}"
            if hoisted in taken:
                continue
            first = min([fn.lineno] + [d.lineno for d in fn.decorator_list])
            out.append(_Hoist(fn.name, name, hoisted, first,
                              (call.lineno, call.col_offset, call.end_lineno, call.end_col_offset),
                              ast.get_source_segment(source, call)))
    return out


class HoistNamedtuple(Transform):
    name = "hoist_namedtuple"
    summary = "build a wrapper's namedtuple class once at import, not on every call"
    param_names = ()
    example_params: dict[str, Any] = {}
    no_example_reason = "no namedtuple class built inside a function"

    def _applies(self, analysis: SourceAnalysis, **_: Any) -> Applicability:
        if not analysis.source:
            return Applicability.no("the analysis carries no source text")
        found = find_hoists(analysis.source)
        if not found:
            return Applicability.no("no namedtuple class with literal arguments built inside a "
                                    "top-level function")
        return Applicability.yes([f"`{h.name}` in {h.function}" for h in found])

    def _apply(self, source: str, analysis: SourceAnalysis, **_: Any) -> str:
        text = source
        # one function at a time from the bottom up: each edit lies below every earlier one
        for h in sorted(find_hoists(source), key=lambda h: h.value, reverse=True):
            lines = text.splitlines(keepends=True)
            start = char_index(lines, h.value[0], h.value[1])
            end = char_index(lines, h.value[2], h.value[3])
            at = sum(len(x) for x in lines[:h.def_line - 1])
            text = (text[:at] + f"{h.hoisted} = {h.call_text}  # built once (hoist_namedtuple)\n\n\n"
                    + text[at:start] + h.hoisted + text[end:])
        return text


__all__ = ["HoistNamedtuple", "find_hoists"]
