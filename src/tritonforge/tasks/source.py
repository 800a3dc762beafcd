"""Read a user's kernel file and check it is something TritonForge can work on.

Checks are static (``ast``), so a bad file is reported before anything is imported: missing or
unreadable files, syntax errors (with the line), files with no ``@triton.jit`` kernel, and entry
functions that do not exist.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

from ..errors import EntryPointError, SourceFileError


@dataclass(frozen=True)
class SourceSummary:
    """What a quick static read of a kernel file finds."""

    kernels: tuple[str, ...]          # functions decorated with triton.jit (possibly under autotune)
    functions: tuple[str, ...]        # other top-level functions (candidate entry points)
    classes: tuple[str, ...]          # top-level classes (autograd Functions, modules)
    test_functions: tuple[str, ...]   # top-level functions named test_*
    has_main_block: bool


def read_source(path: str | Path) -> str:
    p = Path(path)
    if not p.exists():
        raise SourceFileError(f"kernel file {p} does not exist",
                              hint="pass the path of a .py file that holds @triton.jit kernels")
    if p.is_dir():
        raise SourceFileError(f"{p} is a directory, not a kernel file",
                              hint="pass one .py file")
    try:
        return p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SourceFileError(f"cannot read {p}: {exc}") from None


def _decorator_names(node: ast.FunctionDef) -> list[str]:
    names = []
    for dec in node.decorator_list:
        target = dec.func if isinstance(dec, ast.Call) else dec
        names.append(ast.unparse(target))
    return names


def _is_kernel(node: ast.AST) -> bool:
    if not isinstance(node, ast.FunctionDef):
        return False
    return any(n.split(".")[-1] in ("jit", "autotune", "heuristics") for n in _decorator_names(node))


def summarize_source(source: str, filename: str = "<source>") -> SourceSummary:
    """Parse ``source`` and list its kernels and functions; raise SourceFileError if unusable."""
    try:
        tree = ast.parse(source, filename=filename)
    except SyntaxError as exc:
        raise SourceFileError(
            f"syntax error: {exc.msg}",
            location=f"{filename}:{exc.lineno}" + (f":{exc.offset}" if exc.offset else ""),
            hint="fix the Python syntax; TritonForge imports the file as a module",
        ) from None
    kernels, functions, classes, tests = [], [], [], []
    has_main = False
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            if _is_kernel(node):
                kernels.append(node.name)
            else:
                functions.append(node.name)
                if node.name.startswith("test"):
                    tests.append(node.name)
        elif isinstance(node, ast.ClassDef):
            classes.append(node.name)
        elif isinstance(node, ast.If) and "__name__" in ast.unparse(node.test):
            has_main = True
    if not kernels:
        raise SourceFileError(
            "no @triton.jit kernel found",
            location=filename,
            hint="TritonForge optimizes Triton kernels: the file must define at least one "
                 "function decorated with @triton.jit",
        )
    return SourceSummary(tuple(kernels), tuple(functions), tuple(classes), tuple(tests), has_main)


def check_entries(summary: SourceSummary, entries: tuple[str, ...], filename: str) -> None:
    """Raise EntryPointError if an entry is not a top-level function or class of the file."""
    known = set(summary.functions) | set(summary.classes) | set(summary.kernels)
    for entry in entries:
        if entry not in known:
            callables = [f for f in summary.functions if not f.startswith("test")]
            raise EntryPointError(
                f"entry function {entry!r} is not defined at the top level",
                location=filename,
                hint="entry points found: " + (", ".join(callables + list(summary.classes)) or "none"),
            )
