"""The number of tiles a launch covers, for persistent_grid: the source of ``T`` in
``kernel[(min(_tf_num_sms(), T), 1, 1)](..., tf_num_tiles=T)``.

``T`` must be exactly the first grid axis of the original launch, evaluated at the launch. Grids
read so far:

* a tuple, inline or through a name assigned once (``grid = (n, 1, 1)``): the first element, or
  ``grid[0]``;
* a lambda, inline or assigned once in the launching function: Triton calls it at the launch with
  the bound arguments, so its first element, with each ``META['KEY']`` replaced by the argument
  the launch passes for KEY (or the kernel's default), is the same number read in the same scope
  at the same moment. A key that ``@triton.autotune`` or ``@triton.heuristics`` sets is refused:
  the count would depend on the config chosen after the launch has passed ``tf_num_tiles``. An
  argument with a call in it is refused too, as it would be evaluated twice.

Axes after the first must be a literal 1 (kept as written); anything else is a refusal whose
reason says which case it is.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

import libcst as cst

from ..analyze import GridKind, KernelInfo, LaunchSite
from ._cst import code

_SIMPLE = (cst.Name, cst.Integer, cst.Float, cst.SimpleString, cst.Attribute, cst.Subscript,
           cst.Call)
_IMPURE = (ast.Call, ast.NamedExpr, ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp,
           ast.GeneratorExp, ast.Await, ast.Yield, ast.YieldFrom)


@dataclass(frozen=True)
class Tiles:
    """``count``: the source of T (None when refused, with ``reason``); ``rest``: the grid's
    other axes, each a literal 1."""

    count: str | None
    rest: tuple[str, ...] = ()
    reason: str = ""

    def grid(self, sms: str) -> str:
        """The persistent launch's grid, ``sms`` being the call counting the SMs."""
        tail = "".join(f", {r}" for r in self.rest) if self.rest else ","
        return f"(min({sms}, {self.count}){tail})"


def _no(reason: str) -> Tiles:
    return Tiles(None, (), reason)


def tiles_of(site: LaunchSite, kernel: KernelInfo) -> Tiles:
    g = site.grid
    src = " ".join(g.source.split())
    if g.kind is GridKind.FUNCTION:
        return _no(f"the grid `{src}` is a function: only tuples and lambdas are read")
    if g.kind not in (GridKind.TUPLE, GridKind.LAMBDA):
        return _no(f"the grid `{src}` is not a 1-D tuple")
    if g.binding == "other":
        return _no(f"the grid `{src}` is not assigned exactly once before the launch")
    if g.kind is GridKind.LAMBDA and g.binding == "global":
        return _no(f"the grid `{src}` is a module-level lambda: its names would be read in "
                   f"another scope")
    try:
        node = cst.parse_expression(f"({g.resolved})")
    except cst.ParserSyntaxError:
        return _no(f"the grid `{src}` could not be read")
    meta = None
    if isinstance(node, cst.Lambda):
        params = node.params
        if len(params.params) != 1 or params.params[0].default is not None \
                or params.posonly_params or params.kwonly_params or params.star_kwarg is not None \
                or not isinstance(params.star_arg, cst.MaybeSentinel):
            return _no(f"the grid lambda `{src}` takes other parameters than META")
        meta, node = params.params[0].name.value, node.body
    if not isinstance(node, (cst.Tuple, cst.List)) or not node.elements \
            or any(isinstance(e, cst.StarredElement) for e in node.elements):
        return _no(f"the grid `{src}` is not a 1-D tuple")
    rest = tuple(code(e.value) for e in node.elements[1:])
    if any(r != "1" for r in rest):
        return _no(f"the grid `{src}` is not a 1-D tuple (axes after the first must be a "
                   f"literal 1)")
    first = node.elements[0].value
    if meta is not None:
        first, why = _substitute_meta(first, meta, site, kernel)
        if first is None:
            return _no(f"the grid lambda `{src}` {why}")
        count = code(first)
    elif g.binding == "inline":
        count = code(first)
    else:
        count = f"{g.source}[0]"
    if "\n" in count:                   # an element spread over lines: one line, comments lost
        count = ast.unparse(ast.parse(count.strip(), mode="eval"))
    return Tiles(count, rest)


def _meta_value(key: str, site: LaunchSite, kernel: KernelInfo) -> tuple[str | None, str]:
    """The source of the value Triton hands the grid as ``META[key]`` at this launch."""
    chosen = set(kernel.autotune.tuned_names) if kernel.autotune else set()
    if key in chosen or key in kernel.heuristics:
        how = "@triton.autotune" if key in chosen else "@triton.heuristics"
        return None, (f"reads META['{key}'], which {how} sets: the number of tiles would depend "
                      f"on the config chosen after the launch")
    arg = site.arg_for(key)
    param = kernel.param(key)
    if arg is not None:
        value = arg.source
    elif param is not None and param.default is not None:
        value = param.default
    elif kernel.autotune is not None:
        return None, (f"reads META['{key}'], which the launch does not pass: @triton.autotune "
                      f"may set it, and the number of tiles would depend on the config chosen")
    else:
        return None, f"reads META['{key}'], which the launch does not pass as a kernel parameter"
    if any(isinstance(n, _IMPURE) for n in ast.walk(ast.parse(value.strip(), mode="eval"))):
        return None, (f"reads META['{key}'], passed as `{value}`: a call, which the rewrite "
                      f"would evaluate twice")
    return value, ""


def _substitute_meta(expr: cst.BaseExpression, meta: str, site: LaunchSite,
                     kernel: KernelInfo) -> tuple[cst.BaseExpression | None, str]:
    """``expr`` with every ``meta['KEY']`` replaced by the launch's argument for KEY."""
    finder = _MetaReads(meta)
    expr.visit(finder)
    if finder.other:
        return None, "reads META other than as META['KEY']"
    values: dict[str, cst.BaseExpression] = {}
    for key in dict.fromkeys(finder.keys):
        value, why = _meta_value(key, site, kernel)
        if value is None:
            return None, why
        new = cst.parse_expression(value.strip())
        if not isinstance(new, _SIMPLE):
            new = new.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        values[key] = new
    return expr.visit(_MetaReplace(meta, values)), ""


def _meta_key(node: cst.Subscript, meta: str) -> str | None:
    if isinstance(node.value, cst.Name) and node.value.value == meta and len(node.slice) == 1:
        idx = node.slice[0].slice
        if isinstance(idx, cst.Index) and isinstance(idx.value, cst.SimpleString):
            value = idx.value.evaluated_value
            return value if isinstance(value, str) else None
    return None


class _MetaReads(cst.CSTVisitor):
    def __init__(self, meta: str):
        super().__init__()
        self.meta, self.keys, self.other = meta, [], False

    def visit_Subscript(self, node: cst.Subscript) -> bool:
        key = _meta_key(node, self.meta)
        if key is None:
            return True
        self.keys.append(key)
        return False

    def visit_Name(self, node: cst.Name) -> None:
        if node.value == self.meta:
            self.other = True

    def visit_Attribute(self, node: cst.Attribute) -> bool:     # x.meta is not META
        node.value.visit(self)
        return False

    def visit_Arg(self, node: cst.Arg) -> bool:                 # nor is f(meta=...)
        node.value.visit(self)
        return False


class _MetaReplace(cst.CSTTransformer):
    def __init__(self, meta: str, values: dict[str, cst.BaseExpression]):
        super().__init__()
        self.meta, self.values = meta, values

    def leave_Subscript(self, original: cst.Subscript, updated: cst.Subscript
                        ) -> cst.BaseExpression:
        key = _meta_key(original, self.meta)
        return updated if key is None else self.values[key]
