"""Turn a model's reply into a candidate source, or a reason why it cannot be one.

The output contract (``prompts/output_contract.j2``) asks for the complete file in exactly one
fenced ```python block. A reply is rejected, with a reason that goes back to the model on the next
turn, when it has no block or several, the block is not closed (the reply was cut off), the code
is not Python, no ``@triton.jit`` kernel is left, an entry function was removed or renamed or lost
parameters, or the code is the same as what the model was given.

Nothing here imports or runs the code: ``ast`` only. The static policy and the worker come after.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Sequence

from ..errors import SourceFileError
from ..tasks.source import summarize_source

MAX_SOURCE_CHARS = 200_000
_FENCE = re.compile(r"^\s*(?P<fence>`{3,}|~{3,})\s*(?P<lang>[\w+.-]*)\s*$")
_THINK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_PYTHON_TAGS = {"python", "py", "python3"}


@dataclass(frozen=True)
class ParsedReply:
    """``ok`` with the extracted ``source``, or not ok with ``reason`` (one or two sentences)."""

    ok: bool
    source: str = ""
    reason: str = ""
    explanation: str = ""     # the model's prose outside the block, shortened: a description


@dataclass(frozen=True)
class FencedBlock:
    lang: str
    body: str
    closed: bool


def fenced_blocks(text: str) -> tuple[list[FencedBlock], str]:
    """Fenced blocks of ``text`` (``lang`` lower-cased, "" when untagged) and the prose outside."""
    blocks: list[FencedBlock] = []
    prose: list[str] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            prose.append(lines[i])
            i += 1
            continue
        fence, lang = m.group("fence"), m.group("lang").lower()
        body: list[str] = []
        i += 1
        closed = False
        while i < len(lines):
            close = _FENCE.match(lines[i])
            if close and not close.group("lang") and close.group("fence")[0] == fence[0] \
                    and len(close.group("fence")) >= len(fence):
                closed = True
                i += 1
                break
            body.append(lines[i])
            i += 1
        blocks.append(FencedBlock(lang, "\n".join(body) + "\n", closed))
    return blocks, "\n".join(prose)


def _explanation(prose: str, limit: int = 240) -> str:
    words = " ".join(prose.split())
    return words if len(words) <= limit else words[: limit - 3].rstrip() + "..."


def _params(fn: ast.FunctionDef) -> tuple[list[str], int]:
    """Parameter names of ``fn`` (positional then keyword-only) and how many lack a default."""
    a = fn.args
    positional = [p.arg for p in a.posonlyargs + a.args]
    required = len(positional) - len(a.defaults)
    required += sum(1 for d in a.kw_defaults if d is None)
    return positional + [p.arg for p in a.kwonlyargs], required


def _top_level_functions(tree: ast.Module) -> dict[str, ast.FunctionDef]:
    return {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}


def _entry_problems(tree: ast.Module, entries: Sequence[str],
                    original: ast.Module | None) -> list[str]:
    top = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    for node in tree.body:   # `entry = other_function` keeps an entry alive too
        if isinstance(node, ast.Assign):
            top |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    problems = [f"entry function {e!r} is missing (removed or renamed); keep it, with the "
                f"same name and parameters" for e in entries if e not in top]
    if original is None:
        return problems
    new_fns, old_fns = _top_level_functions(tree), _top_level_functions(original)
    for e in entries:
        if e not in new_fns or e not in old_fns:
            continue
        old_names, _ = _params(old_fns[e])
        new_names, new_required = _params(new_fns[e])
        if new_names[: len(old_names)] != old_names or new_required > len(old_names):
            problems.append(f"entry function {e!r} changed its parameters from "
                            f"({', '.join(old_names)}) to ({', '.join(new_names)}); callers pass "
                            f"the original ones, so keep them (new ones need defaults)")
    return problems


def extract_source(reply_text: str, *, required_entries: Sequence[str] = (),
                   original_source: str | None = None) -> ParsedReply:
    """The complete kernel file in ``reply_text``, checked statically, or the reason it is not.

    ``required_entries`` must stay top-level functions (or classes) of the new file; when
    ``original_source`` is given, entry parameters must be kept and an unchanged file (same AST,
    formatting and comments aside) is rejected.
    """
    blocks, prose = fenced_blocks(_THINK.sub("", reply_text))
    explanation = _explanation(prose)

    def reject(reason: str) -> ParsedReply:
        return ParsedReply(False, reason=reason, explanation=explanation)

    python = [b for b in blocks if b.lang in _PYTHON_TAGS]
    if not python:
        untagged = [b for b in blocks if not b.lang]
        if len(blocks) == 1 and len(untagged) == 1:
            python = untagged            # a lone block without a tag: take it (local models)
        elif blocks:
            tags = ", ".join(sorted({b.lang or "(none)" for b in blocks}))
            return reject(f"no ```python block: found fenced blocks tagged {tags}. Put the "
                          "complete file in one block that starts with ```python")
        else:
            return reject("no fenced code block: put the complete file in one block that "
                          "starts with ```python and ends with ```")
    if len(python) > 1:
        return reject(f"{len(python)} ```python blocks: the reply must hold exactly one, with "
                      "the complete file (no fragments, no separate examples)")
    block = python[0]
    if not block.closed:
        return reject("the ```python block is not closed with ``` (was the reply cut off at the "
                      "token limit?); send the complete file, shorter if need be")
    source = block.body
    if not source.strip():
        return reject("the ```python block is empty")
    if len(source) > MAX_SOURCE_CHARS:
        return reject(f"the file has {len(source)} characters, more than {MAX_SOURCE_CHARS}")
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        line = ""
        if exc.lineno and 0 < exc.lineno <= len(source.splitlines()):
            line = ": " + source.splitlines()[exc.lineno - 1].strip()[:120]
        return reject(f"not valid Python: SyntaxError: {exc.msg} at line {exc.lineno}{line}")
    try:
        summarize_source(source, filename="<reply>")
    except SourceFileError:
        return reject("no @triton.jit kernel is left in the file; keep the Triton kernels "
                      "(the task is to make them faster, not to replace them)")
    original_tree = None
    if original_source is not None:
        try:
            original_tree = ast.parse(original_source)
        except SyntaxError:
            original_tree = None
    problems = _entry_problems(tree, required_entries, original_tree)
    if problems:
        return reject("; ".join(problems))
    if original_tree is not None and ast.dump(tree) == ast.dump(original_tree):
        return reject("the code is identical to the file you were given (comments and "
                      "formatting aside); change the code")
    return ParsedReply(True, source=source, explanation=explanation)
