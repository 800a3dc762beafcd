"""Fix a tile size that the launching function takes from its caller, by rebinding the parameter.

Many wrappers pass a block size straight through from their own signature::

    def attn(q, k, v, o, BLOCK_M, BLOCK_N, num_warps, num_stages):
        grid = (triton.cdiv(q.shape[2], BLOCK_M), q.shape[0] * q.shape[1], 1)
        _fwd_kernel[grid](q, k, v, o, ..., BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, ...)

The analysis reads such a knob as computed (its value is the caller's), so ``constexpr_override``
has no literal to change. For a kernel that masks its tails the caller's tile size is only a
performance hint, so this transform pins it: ``BLOCK_M = 128  # tritonforge: ...`` as the first
statement of the function (after its docstring), which the grid and every other use then follow.
One pin serves every launch of that function fed by the parameter; applying again rewrites the
pin's value instead of adding a second line. The verifier still judges whether the result is the
same: only tile sizes (``KernelInfo.block_constexprs``) are offered.

Refused: a literal at the launch (``constexpr_override``'s case), a value computed inside the
function (``BLOCK = triton.next_power_of_2(n)``), a parameter the function assigns again, a
constexpr that is not a tile size, and a value the kernel cannot take (``check_block_value``).
"""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass, field
from typing import Any

import libcst as cst

from ..analyze import LaunchSite, SourceAnalysis, ValueOrigin
from ..errors import TransformError
from ..model import content_hash
from ._cst import find_function, int_node, replace, site_selection
from ._grid import function_view
from .base import Applicability, Transform, first_no, short
from .constexpr import check_block_value, site_knob

MARKER = "# tritonforge: tile size fixed here"


def pin_comment(param: str) -> str:
    return f"{MARKER} (the caller's {param} is a performance hint)"


# ---------------------------------------------------------------- the launching function, read


@dataclass(frozen=True)
class FunctionFacts:
    """What pinning needs to know of one function: its parameters, the pins it already starts
    with (``PARAM = <int>`` statements right after the docstring), and every other binding."""

    params: frozenset[str]                       # positional(-only) and keyword-only
    pins: tuple[tuple[str, int], ...]           # leading ``PARAM = <int>``, in order
    rebound: tuple[tuple[str, int], ...] = ()   # (name, line) of any other binding of a param
    one_line: bool = False                       # ``def f(...): body`` on the def line

    def pin(self, param: str) -> int | None:
        return next((v for p, v in self.pins if p == param), None)

    def rebinding(self, param: str) -> int | None:
        """The line of the first binding of ``param`` other than its pin, or None."""
        return next((line for p, line in self.rebound if p == param), None)


def _is_docstring(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) \
        and isinstance(stmt.value.value, str)


def _leading_pins(body: list[ast.stmt], params: frozenset[str]) -> list[ast.Assign]:
    pins = []
    for stmt in body[1:] if body and _is_docstring(body[0]) else body:
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
                and isinstance(stmt.targets[0], ast.Name) and stmt.targets[0].id in params
                and isinstance(stmt.value, ast.Constant) and type(stmt.value.value) is int):
            break
        pins.append(stmt)
    return pins


def _bindings(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[tuple[str, int]]:
    """(name, line) of every binding in the function's own scope: assignment and loop/with
    targets, walrus, del, except-as, imports, global/nonlocal, match captures; nested functions
    and classes only by their name and by a ``nonlocal`` naming the parameter."""
    out: list[tuple[str, int]] = []
    stack: list[ast.AST] = list(fn.body)
    while stack:
        node = stack.pop()
        line = getattr(node, "lineno", fn.lineno)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            if not isinstance(node, ast.Lambda):
                out.append((node.name, line))
            out += [(n, getattr(s, "lineno", line)) for s in ast.walk(node)
                    if isinstance(s, ast.Nonlocal) for n in s.names]
            continue
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            out.append((node.id, line))
        elif isinstance(node, ast.ExceptHandler) and node.name:
            out.append((node.name, line))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            out += [((a.asname or a.name).split(".")[0], line) for a in node.names]
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            out += [(n, line) for n in node.names]
        elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
            out.append((node.name, line))
        elif isinstance(node, ast.MatchMapping) and node.rest:
            out.append((node.rest, line))
        stack.extend(ast.iter_child_nodes(node))
    return out


@functools.lru_cache(maxsize=64)
def function_facts(source: str, qualname: str) -> FunctionFacts | None:
    """The facts of function ``qualname`` (e.g. ``"Cls.method"``) of ``source``; None if absent."""
    fn = function_view(source, qualname).node
    if fn is None:
        return None
    a = fn.args
    params = frozenset(x.arg for x in a.posonlyargs + a.args + a.kwonlyargs)
    pins = _leading_pins(fn.body, params)
    rebound = [(name, line) for name, line in _bindings(fn) if name in params]
    for p in pins:      # a pin binds its parameter once: not a rebinding
        rebound.remove((p.targets[0].id, p.lineno))
    first = fn.body[0]
    head = source.splitlines()[first.lineno - 1].encode()[:first.col_offset]
    return FunctionFacts(params, tuple((p.targets[0].id, p.value.value) for p in pins),
                         tuple(sorted(rebound, key=lambda r: r[1])), bool(head.strip()))


# ---------------------------------------------------------------- what to pin, or why not


@dataclass(frozen=True)
class PinPlan:
    """One pin to write: parameter ``param`` of ``function`` rebound to the new value. It serves
    ``sites``, every launch of that function that takes the parameter as a tile size."""

    function: str
    param: str
    sites: tuple[int, ...]
    old: int | None = None           # the value of the pin the function already starts with
    names: tuple[str, ...] = field(default=())   # the constexprs it feeds

    def target(self) -> str:
        launches = ("launch " if len(self.sites) == 1 else "launches ") + \
            ", ".join(str(i) for i in self.sites)
        was = f", pinned to {self.old} before" if self.old is not None else ""
        return f"{self.param} in {self.function} ({launches}{was})"


def _grid_refusal(site: LaunchSite, name: str, param: str) -> str | None:
    knob = site.knobs.constexpr(name) if site.knobs else None
    if knob is not None and knob.tiles_grid and not knob.grid_follows:
        return f"site {site.index} ({site.kernel}) multiplies a program id by {name} but the " \
               f"grid `{short(site.grid.resolved)}` does not read {param}: pinning it would skip " \
               "or repeat tiles"
    return None


def plan_site(analysis: SourceAnalysis, site: LaunchSite, name: str, value: object,
              facts: FunctionFacts | None) -> PinPlan | str:
    """How to pin constexpr ``name`` of ``site`` to ``value``, or why it cannot be done.
    ``facts`` is the launching function's (None: not read, when the source is not at hand)."""
    kernel = analysis.kernel(site.kernel)
    where = f"site {site.index} ({site.kernel})"
    knob = site_knob(analysis, site, name)
    if isinstance(knob, str):
        return knob
    if knob.origin is not ValueOrigin.COMPUTED:
        if knob.tunable:
            return f"{where}: {name} is the literal `{short(knob.source)}` here, not a " \
                   "parameter: constexpr_override changes it"
        return f"{where}: {name} is not passed at the launch and has no literal default"
    param = knob.source
    if not param.isidentifier():
        return f"{where}: {name} is computed at the launch (`{short(param)}`), not passed " \
               "from a parameter"
    if site.function is None:
        return f"{where}: the launch is at module level, so {param} is no function's parameter"
    for other in analysis.same_call(site):      # an alias call: the pin reaches each kernel
        theirs = other.knobs.constexpr(name) if other.knobs else None
        if theirs is None or theirs.origin is not ValueOrigin.COMPUTED or theirs.source != param:
            return f"{where}: `{site.alias}` may also be {other.kernel}, which does not take " \
                   f"{param} as its {name}"
    if facts is not None:
        if param not in facts.params:
            arg = site.arg_for(name)
            how = f" (`{param} = {short(arg.assigned, 50)}`)" if arg and arg.assigned else ""
            return f"{where}: {name} is computed in {site.function}{how}, not taken from a " \
                   "parameter of it"
        line = facts.rebinding(param)
        if line is not None:
            return f"{where}: {site.function} assigns its parameter {param} again (line " \
                   f"{line}), so a pin at its top would not hold"
        if facts.one_line:
            return f"{where}: {site.function} has its body on the def line"
    if not knob.block_like:
        return f"{where}: {name} is not a tile size (it neither multiplies a program id nor " \
               "steps a loop), so changing it would change the result"
    bad = _grid_refusal(site, name, param) or check_block_value(kernel, name, value)
    if bad:
        return bad if bad.startswith("site ") else f"{where}: {bad}"
    old = facts.pin(param) if facts is not None else None
    if old == value:
        return f"{where}: {param} is already pinned to {value} in {site.function}"
    return PinPlan(site.function, param, (site.index,), old, (name,))


def _companions(analysis: SourceAnalysis, plan: PinPlan, value: object
                ) -> tuple[tuple[int, ...], tuple[str, ...]] | str:
    """The launches of the plan's function that the pin also reaches (they pass the same
    parameter as a constexpr), and the constexprs it feeds; or why the value does not suit one."""
    sites, names = set(plan.sites), list(plan.names)
    for s in analysis.launch_sites:
        if s.function != plan.function or s.knobs is None:
            continue
        for c in s.knobs.constexprs:
            if c.origin is not ValueOrigin.COMPUTED or c.source != plan.param \
                    or (s.index in plan.sites and c.name in plan.names):
                continue
            where = f"site {s.index} ({s.kernel})"
            if not c.block_like:
                return f"{where} also takes {plan.param} as {c.name}, which is not a tile size"
            bad = _grid_refusal(s, c.name, plan.param) \
                or check_block_value(analysis.kernel(s.kernel), c.name, value)
            if bad:
                return bad if bad.startswith("site ") else f"{where}: {bad}"
            sites.add(s.index)
            names.append(c.name)
    return tuple(sorted(sites)), tuple(dict.fromkeys(names))


def plans(analysis: SourceAnalysis, source: str | None, name: str | None, value: object,
          site: int | None = None, kernel: str | None = None) -> tuple[list[PinPlan], list[str]]:
    """The pins that set constexpr ``name`` to ``value`` (one per function and parameter), and
    the reasons the other selected launches cannot take it. Without ``source`` the launching
    functions are not read (``apply`` reads them)."""
    if not name:
        return [], ["give the constexpr name= and value="]
    found: dict[tuple[str, str], PinPlan] = {}
    reasons: list[str] = []
    for s in site_selection(analysis, site, kernel):
        if name not in analysis.kernel(s.kernel).constexpr_names and site is None \
                and kernel is None:
            continue        # other kernels of the file: not a target, not a reason
        facts = function_facts(source, s.function) if source is not None and s.function else None
        if source is not None and s.function and facts is None:
            reasons.append(f"site {s.index} ({s.kernel}): function {s.function} not found")
            continue
        p = plan_site(analysis, s, name, value, facts)
        if isinstance(p, str):
            reasons.append(p)
            continue
        key = (p.function, p.param)
        if key in found:
            continue        # already reached through the same pin
        more = _companions(analysis, p, value)
        if isinstance(more, str):
            reasons.append(more)
            continue
        found[key] = PinPlan(p.function, p.param, more[0], p.old, more[1])
    return list(found.values()), reasons


# ---------------------------------------------------------------- the rewrite


def _is_cst_docstring(stmt: cst.BaseStatement) -> bool:
    return isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 \
        and isinstance(stmt.body[0], cst.Expr) \
        and isinstance(stmt.body[0].value, (cst.SimpleString, cst.ConcatenatedString))


def _cst_pin(stmt: cst.BaseStatement, params: set[str]) -> str | None:
    """The parameter a ``PARAM = <int>`` line pins, or None (the same test as ``_leading_pins``)."""
    if not (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1):
        return None
    a = stmt.body[0]
    if isinstance(a, cst.Assign) and len(a.targets) == 1 and isinstance(a.targets[0].target,
                                                                        cst.Name) \
            and a.targets[0].target.value in params and isinstance(a.value, cst.Integer):
        return a.targets[0].target.value
    return None


def pin_line(param: str, value: int) -> cst.SimpleStatementLine:
    return cst.SimpleStatementLine(
        body=[cst.Assign(targets=[cst.AssignTarget(cst.Name(param))], value=int_node(value))],
        trailing_whitespace=cst.TrailingWhitespace(
            whitespace=cst.SimpleWhitespace("  "), comment=cst.Comment(pin_comment(param))))


def pin_params(fn: cst.FunctionDef, params: list[str], value: int) -> cst.FunctionDef:
    """``fn`` with each of ``params`` pinned to ``value``: an existing leading pin gets the new
    value (its comment kept), a new one goes after the docstring and the pins already there."""
    if not isinstance(fn.body, cst.IndentedBlock):
        raise TransformError(f"{fn.name.value} has its body on the def line")
    p = fn.params
    names = {x.name.value for x in (*p.posonly_params, *p.params, *p.kwonly_params)}
    body = list(fn.body.body)
    at = 1 if body and _is_cst_docstring(body[0]) else 0
    while at < len(body) and _cst_pin(body[at], names):
        at += 1
    new = []
    for param in params:
        i = next((i for i in range(at) if _cst_pin(body[i], names) == param), None)
        if i is None:
            new.append(pin_line(param, value))
        else:
            line = body[i]
            body[i] = line.with_changes(body=[line.body[0].with_changes(value=int_node(value))])
    body[at:at] = new
    return fn.with_changes(body=fn.body.with_changes(body=body))


class ParamBlockOverride(Transform):
    name = "param_block_override"
    summary = "pin a tile size the launching function takes as a parameter; the grid follows"
    preserves_semantics = False     # right only for kernels that mask their tails: verify
    param_names = ("name", "value", "site", "kernel")
    example_params = {"name": "BLOCK_SIZE", "value": 1024}
    no_example_reason = "no tile size passed from a parameter of the launching function"

    def examples(self, analysis: SourceAnalysis) -> list[dict[str, Any]]:
        """Each tile size a launch takes from a parameter: 64 (or 128) beside other tile sizes,
        1024 (or 4096) alone."""
        out = []
        for s in analysis.launch_sites:
            for knob in s.knobs.constexprs if s.knobs and s.function else ():
                if knob.origin is ValueOrigin.COMPUTED and knob.block_like \
                        and knob.source.isidentifier():
                    tiled = any(k.block_like for k in s.knobs.constexprs if k.name != knob.name)
                    for v in ((64, 128) if tiled else (1024, 4096)):
                        out.append({"name": knob.name, "value": v, "site": s.index})
        return out

    @staticmethod
    def _source(analysis: SourceAnalysis) -> str | None:
        src = analysis.source
        return src if isinstance(src, str) and content_hash(src) == analysis.source_hash else None

    def _applies(self, analysis: SourceAnalysis, name: str | None = None, value: object = None,
                 site: int | None = None, kernel: str | None = None,
                 **_: Any) -> Applicability:
        source = self._source(analysis)
        found, reasons = plans(analysis, source, name, value, site, kernel)
        if not found:
            return first_no(reasons, f"launch of a kernel with constexpr {name!r}")
        note = "; ".join(reasons)
        if source is None:
            note += ("; " if note else "") + "the launching function is checked when applied"
        return Applicability.yes([p.target() for p in found], note)

    def _apply(self, source: str, analysis: SourceAnalysis, name: str | None = None,
               value: object = None, site: int | None = None, kernel: str | None = None,
               **_: Any) -> str:
        found, reasons = plans(analysis, source, name, value, site, kernel)
        if not found:
            raise TransformError(f"{self.name}: "
                                 + first_no(reasons, f"launch with constexpr {name!r}").reason)
        module = cst.parse_module(source)
        by_function: dict[str, list[str]] = {}
        for p in found:
            by_function.setdefault(p.function, []).append(p.param)
        edits: dict[int, Any] = {}
        for function, params in by_function.items():
            fn = find_function(module, function)
            if fn is None:
                raise TransformError(f"{self.name}: function {function} not found")
            edits[id(fn)] = lambda f, ps=params: pin_params(f, ps, value)
        return replace(module, edits).code


__all__ = ["FunctionFacts", "MARKER", "ParamBlockOverride", "PinPlan", "function_facts",
           "pin_params", "plan_site", "plans"]
