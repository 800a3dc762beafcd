"""Size dispatch: two verified versions of one file, each used where it is faster, chosen by a
plain Python test on a size at the launch.

The search often finds a config that is faster overall but slower on one size (H100, 2026-11-23:
mean_reduction BLOCK_N 8 -> 256 4.5x on the search's cases, one 6 us case 14% slower in the final
sweep; cosine_compute num_warps 4 -> 16 2.9x, one case 5.5% slower). ``@triton.autotune`` over both
configs lets each size take its faster one, but its per-call dispatch on the host costs more than a
launch-bound kernel runs (measured: +244% on a small case of mean_reduction, +291% on one of
fp4_to_bf16). A Python ``if`` costs well under a microsecond and reads like what a person writes:

    _tf_candidate_config = x.numel() >= 65536     # first in the function
    ...
    if _tf_candidate_config:
        mean_kernel[grid](x, out, N, BLOCK_N=256, num_warps=8)
    else:
        mean_kernel[grid](x, out, N, BLOCK_N=8)

How it is built, all from the source and measurements the loop already has:
1. ``statement_changes``: the two sources must have the same skeleton (functions, decorators,
   control flow); they may differ only in simple statement lines of host (non-``@triton.jit``)
   functions, all in one function. Each differing line is a launch, a block-size assignment, ...
2. ``probe_source``: the original, with a first line in that function that writes its
   parameters' sizes to a file. Run once per performance case (untimed),
   it tells each case's sizes at the launch.
3. ``choose_rule``: from the final check's per-case speedups, the parameter, threshold and
   direction under which the candidate runs only where it is not slower (a decision stump).
4. ``dispatch_source``: the original with each differing line replaced by the if/else above.
The dispatched file is then a candidate like any other: the final check verifies and times it
against the original on every case before it is kept.

A candidate that changes a kernel's body (loop pipelining: int4_matmul, H100, 2026-11-23, 1.04x
overall and one case 15% slower) first goes through ``twin_kernels``: the changed kernel is kept
beside the original under another name (``matmul_kernel__tf_candidate``), so the two files differ
only in which kernel the host launches, and the steps above apply as they are.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import libcst as cst

from ..transforms._cst import RenameNames

HELPERS = '''

def _tf_size(value):
    """TritonForge size dispatch: how big a launch argument is (a tensor's elements, an int)."""
    numel = getattr(value, "numel", None)
    if callable(numel):
        return int(numel())
    if isinstance(value, bool):
        return 0
    if isinstance(value, int):
        return value
    if isinstance(value, (tuple, list)):
        return sum(_tf_size(v) for v in value)
    return 0
'''

PROBE_HELPER = '''

def _tf_kind(value):
    if callable(getattr(value, "numel", None)):
        return "tensor"
    return "int" if isinstance(value, int) and not isinstance(value, bool) else "other"


def _tf_probe(path, function, sizes, kinds):
    import json as _json
    with open(path, "a") as _f:
        _f.write(_json.dumps({"function": function, "sizes": sizes, "kinds": kinds}) + "\\n")
'''


class NotDispatchable(ValueError):
    """The two sources cannot be joined by a size test (the reason says why)."""


@dataclass(frozen=True)
class StatementChange:
    """One simple statement line that differs, by its order among the file's statement lines."""

    index: int
    function: str
    params: tuple[str, ...]
    original: str
    candidate: str
    function_index: int = 0     # the enclosing def's order among the file's defs (names repeat)


@dataclass(frozen=True)
class Rule:
    """Run the candidate's lines when ``_tf_size(param) >= threshold`` (``large``) or below it."""

    param: str
    threshold: int
    large: bool
    gain: float                 # geomean speedup over all cases under the rule
    candidate_cases: tuple[str, ...]

    def describe(self) -> str:
        op = ">=" if self.large else "<"
        return f"the candidate's config where the size of {self.param} {op} {self.threshold}"


# ---------------------------------------------------------------------------------- the diff
def _is_jit(fn: cst.FunctionDef) -> bool:
    for d in fn.decorators:
        code = cst.Module([]).code_for_node(d.decorator)
        if "jit" in code or "autotune" in code or "heuristics" in code:
            return True
    return False


class _Lines(cst.CSTVisitor):
    """Every SimpleStatementLine in order, with its enclosing function (None at module level)."""

    def __init__(self) -> None:
        self.stack: list[tuple[cst.FunctionDef, int]] = []
        self.defs = 0
        self.lines: list[tuple[cst.SimpleStatementLine, cst.FunctionDef | None]] = []
        self.def_index: list[int] = []          # per line: its def's order (-1 at module level)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.stack.append((node, self.defs))
        self.defs += 1

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.stack.pop()

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> bool:
        self.lines.append((node, self.stack[-1][0] if self.stack else None))
        self.def_index.append(self.stack[-1][1] if self.stack else -1)
        return False


class _Skeleton(cst.CSTTransformer):
    def leave_SimpleStatementLine(self, original_node, updated_node):
        return cst.SimpleStatementLine([cst.Pass()])


def _params(fn: cst.FunctionDef) -> tuple[str, ...]:
    p = fn.params
    return tuple(x.name.value for x in (*p.posonly_params, *p.params, *p.kwonly_params))


def statement_changes(original: str, candidate: str) -> list[StatementChange]:
    """The differing statement lines of two sources, or ``NotDispatchable`` with the reason."""
    try:
        a, b = cst.parse_module(original), cst.parse_module(candidate)
    except cst.ParserSyntaxError as exc:
        raise NotDispatchable(f"does not parse: {exc}") from None
    if a.visit(_Skeleton()).code != b.visit(_Skeleton()).code:
        raise NotDispatchable("the two differ beyond simple statement lines (a decorator, a "
                              "kernel's control flow, a new function)")
    la, lb = _Lines(), _Lines()
    a.visit(la)
    b.visit(lb)
    changes = []
    for i, ((na, fa), (nb, _)) in enumerate(zip(la.lines, lb.lines)):
        if na.deep_equals(nb):
            continue
        if fa is None:
            raise NotDispatchable("a module-level line differs (no size in scope there)")
        if _is_jit(fa):
            raise NotDispatchable(f"the kernel {fa.name.value} itself differs: a host-side test "
                                  "cannot choose inside it")
        changes.append(StatementChange(i, fa.name.value, _params(fa), a.code_for_node(na).strip(),
                                       b.code_for_node(nb).strip(), la.def_index[i]))
    if not changes:
        raise NotDispatchable("the two are the same")
    if len({c.function_index for c in changes}) > 1:
        raise NotDispatchable("the differing lines sit in more than one function")
    if not changes[0].params:
        raise NotDispatchable(f"{changes[0].function} takes no arguments to test")
    return changes


TWIN_SUFFIX = "__tf_candidate"


def _top_kernels(module: cst.Module) -> dict[str, cst.FunctionDef]:
    return {st.name.value: st for st in module.body if isinstance(st, cst.FunctionDef) and _is_jit(st)}


class _RenameKernels(RenameNames):
    """Rename every reference to ``names`` (their defs included) to ``name + TWIN_SUFFIX``;
    attribute names and keyword names are left alone. Records what makes the rename unsafe: a
    reference from a kernel that is not renamed too, or a parameter or import of such a name."""

    def __init__(self, names: set[str]) -> None:
        super().__init__()
        self.names = names
        self.jit: list[str] = []
        self.unsafe: list[str] = []

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.jit.append(node.name.value if _is_jit(node) else "")

    def leave_FunctionDef(self, original_node, updated_node):
        self.jit.pop()
        return updated_node

    def visit_Param(self, node: cst.Param) -> None:
        if node.name.value in self.names:
            self.unsafe.append(f"a parameter is named {node.name.value}")

    def visit_ImportAlias(self, node: cst.ImportAlias) -> None:
        name = node.asname.name if node.asname else node.name
        if isinstance(name, cst.Name) and name.value in self.names:
            self.unsafe.append(f"{name.value} is also imported")

    def new_name(self, name: str) -> str | None:
        if name not in self.names:
            return None
        inside = next((k for k in reversed(self.jit) if k), "")
        if inside and inside not in self.names:
            self.unsafe.append(f"kernel {inside} calls the changed {name}")
        return name + TWIN_SUFFIX


def _names_in(node: cst.CSTNode) -> set[str]:
    class _Names(cst.CSTVisitor):
        def __init__(self) -> None:
            self.seen: set[str] = set()

        def visit_Name(self, n: cst.Name) -> None:
            self.seen.add(n.value)

    v = _Names()
    node.visit(v)
    return v.seen


def twin_kernels(original: str, candidate: str) -> tuple[str, str]:
    """Two sources that differ only outside kernels, from two that may differ inside them.

    Each top-level kernel whose definition differs, and each kernel that calls one of those, is
    kept twice in both results: the original's under its name, the candidate's renamed with
    ``TWIN_SUFFIX`` right after it; the candidate's host code launches the renamed ones, which call
    each other. Sources whose kernels are the same come back unchanged. ``NotDispatchable`` when
    the rename is not safe (a parameter or import of such a name, the two defining different
    kernels).
    """
    try:
        a, b = cst.parse_module(original), cst.parse_module(candidate)
    except cst.ParserSyntaxError as exc:
        raise NotDispatchable(f"does not parse: {exc}") from None
    ka, kb = _top_kernels(a), _top_kernels(b)
    if set(ka) != set(kb):
        raise NotDispatchable("the two define different kernels")
    changed = {n for n in ka if not ka[n].deep_equals(kb[n])}
    if not changed:
        return original, candidate
    # a kernel that calls a changed one (a @triton.jit helper) is twinned too, to call the twin
    refs = {n: _names_in(kb[n]) for n in kb}
    while True:
        callers = {n for n in kb if n not in changed and refs[n] & changed}
        if not callers:
            break
        changed |= callers
    if any(n + TWIN_SUFFIX in original or n + TWIN_SUFFIX in candidate for n in changed):
        raise NotDispatchable("a name TritonForge's twin kernel would take is already used")
    renamer = _RenameKernels(changed)
    b2 = b.visit(renamer)
    if renamer.unsafe:
        raise NotDispatchable("a changed kernel cannot be kept beside the original: "
                              + renamer.unsafe[0])
    twins = {st.name.value[:-len(TWIN_SUFFIX)]: st for st in b2.body
             if isinstance(st, cst.FunctionDef) and st.name.value.endswith(TWIN_SUFFIX)}
    a_body: list[cst.BaseStatement] = []
    for st in a.body:
        a_body.append(st)
        if isinstance(st, cst.FunctionDef) and st.name.value in changed:
            a_body.append(twins[st.name.value])
    b_body: list[cst.BaseStatement] = []
    for st in b2.body:
        if isinstance(st, cst.FunctionDef) and st.name.value.endswith(TWIN_SUFFIX):
            b_body.append(ka[st.name.value[:-len(TWIN_SUFFIX)]])
        b_body.append(st)
    return a.with_changes(body=a_body).code, b2.with_changes(body=b_body).code


# ---------------------------------------------------------------------------------- rewriting
class _ReplaceLines(cst.CSTTransformer):
    """Replace statement lines by their order, and put ``prologue`` first in ``function``'s body
    (after its docstring): the size test runs once, where the arguments are as the caller gave
    them, so every differing line follows the same answer even if the function reassigns one."""

    def __init__(self, replacements: dict[int, list[cst.BaseStatement]], function_index: int,
                 prologue: cst.SimpleStatementLine) -> None:
        self.replacements, self.function_index, self.prologue = replacements, function_index, prologue
        self.i = -1
        self.defs = 0
        self.order: list[int] = []

    def visit_FunctionDef(self, node) -> None:
        self.order.append(self.defs)
        self.defs += 1

    def visit_SimpleStatementLine(self, node) -> bool:
        return False

    def leave_SimpleStatementLine(self, original_node, updated_node):
        self.i += 1
        new = self.replacements.get(self.i)
        if new is None:
            return updated_node
        return cst.FlattenSentinel(new)

    def leave_FunctionDef(self, original_node, updated_node):
        if self.order.pop() != self.function_index:
            return updated_node
        body = list(updated_node.body.body)
        first = 1 if body and original_node.get_docstring() is not None else 0
        body.insert(first, self.prologue)
        return updated_node.with_changes(body=updated_node.body.with_changes(body=body))


def _rewrite(original: str, changes: list[StatementChange],
             replacements: dict[int, list[cst.BaseStatement]], prologue: str, helpers: str) -> str:
    visitor = _ReplaceLines(replacements, changes[0].function_index, _line(prologue))
    module = cst.parse_module(original).visit(visitor)
    return module.code.rstrip("\n") + "\n" + helpers


def _line(source: str) -> cst.SimpleStatementLine:
    stmt = cst.parse_statement(source)
    assert isinstance(stmt, cst.SimpleStatementLine)
    return stmt


def probe_source(original: str, changes: list[StatementChange], path: str | Path) -> str:
    """The original with a first line in the launching function that appends its parameters'
    sizes to ``path`` (one JSON line per call)."""
    sizes = "{" + ", ".join(f"{p!r}: _tf_size({p})" for p in changes[0].params) + "}"
    kinds = "{" + ", ".join(f"{p!r}: _tf_kind({p})" for p in changes[0].params) + "}"
    prologue = f"_tf_probe({str(path)!r}, {changes[0].function!r}, {sizes}, {kinds})\n"
    return _rewrite(original, changes, {}, prologue, HELPERS + PROBE_HELPER)


def size_expression(param: str, kinds: set[str]) -> str:
    """How the dispatch measures ``param``: ``x.numel()`` when every probed case passed a tensor,
    ``n`` itself when always an int, else the ``_tf_size`` helper (appended to the file)."""
    if kinds == {"tensor"}:
        return f"{param}.numel()"
    if kinds == {"int"}:
        return param
    return f"_tf_size({param})"


def dispatch_source(original: str, candidate: str, changes: list[StatementChange], rule: Rule,
                    size_expr: str | None = None) -> str:
    """The original with each differing line chosen by ``rule`` between its two versions;
    ``size_expr`` measures the rule's parameter (default ``_tf_size(param)``)."""
    size_expr = size_expr or f"_tf_size({rule.param})"
    la, lb = _Lines(), _Lines()
    cst.parse_module(original).visit(la)
    cst.parse_module(candidate).visit(lb)
    op = ">=" if rule.large else "<"
    prologue = (f"_tf_candidate_config = {size_expr} {op} {rule.threshold}  "
                f"# TritonForge size dispatch: {rule.describe()}, the original's elsewhere\n")
    out: dict[int, list[cst.BaseStatement]] = {}
    for c in changes:
        line_a, line_b = la.lines[c.index][0], lb.lines[c.index][0]
        out[c.index] = [cst.If(
            test=cst.Name("_tf_candidate_config"),
            body=cst.IndentedBlock([line_b.with_changes(leading_lines=[])]),
            orelse=cst.Else(cst.IndentedBlock([line_a.with_changes(leading_lines=[])])),
            leading_lines=line_a.leading_lines)]
    return _rewrite(original, changes, out, prologue, HELPERS if "_tf_size(" in size_expr else "")


def probe_kinds(path: str | Path) -> dict[str, set[str]]:
    """What each parameter was in one case's probe file ('tensor', 'int', 'other')."""
    p = Path(path)
    kinds: dict[str, set[str]] = {}
    for raw in (p.read_text().splitlines() if p.exists() else ()):
        try:
            rec = json.loads(raw)
        except ValueError:
            continue
        for name, kind in rec.get("kinds", {}).items():
            kinds.setdefault(name, set()).add(kind)
    return kinds


def read_probe(path: str | Path) -> dict[str, int] | None:
    """One case's sizes per parameter from its probe file: None when the lines never ran, and a
    parameter is left out when it took different sizes within the case (no one test fits it)."""
    p = Path(path)
    if not p.exists():
        return None
    seen: dict[str, set[int]] = {}
    for raw in p.read_text().splitlines():
        try:
            rec = json.loads(raw)
        except ValueError:
            continue
        for name, size in rec.get("sizes", {}).items():
            if isinstance(size, int):
                seen.setdefault(name, set()).add(size)
    if not seen:
        return None
    return {name: next(iter(vals)) for name, vals in seen.items() if len(vals) == 1}


# ---------------------------------------------------------------------------------- the rule
def choose_rule(sizes: dict[str, dict[str, int]], speedups: dict[str, float],
                floor: float = 1.0) -> Rule | None:
    """The size test under which the candidate runs only on cases where it is at least ``floor``
    times as fast as the original, gaining the most (sum of log speedups over the cases it takes).

    ``sizes``: case -> parameter -> size; ``speedups``: case -> original time / candidate time.
    The threshold sits between the two cases it separates (geometric middle), so sizes between
    them go to the side of the nearer case. None when no test takes a case where the candidate
    gains without taking one where it is slower than ``floor``.
    """
    cases = [c for c in speedups if c in sizes]
    if len(cases) < 2:
        return None
    params = set.intersection(*(set(sizes[c]) for c in cases))
    best: Rule | None = None
    for param in sorted(params):
        ordered = sorted(cases, key=lambda c: sizes[c][param])
        values = [sizes[c][param] for c in ordered]
        for k in range(1, len(ordered)):
            if values[k - 1] == values[k]:
                continue
            lo, hi = values[k - 1], values[k]
            threshold = int(math.sqrt(lo * hi)) + 1 if lo > 0 else hi
            threshold = min(max(threshold, lo + 1), hi)
            for large, taken in ((True, ordered[k:]), (False, ordered[:k])):
                if any(speedups[c] < floor for c in taken):
                    continue
                gain = sum(math.log(speedups[c]) for c in taken)
                if gain <= 0:
                    continue
                rule = Rule(param, threshold, large, math.exp(gain / len(cases)), tuple(taken))
                if best is None or rule.gain > best.gain:
                    best = rule
    return best
