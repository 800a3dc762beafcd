"""The kernel-body half of ``streaming_reduction``: does a kernel hold the single-sum pattern?

``plan_body`` walks the kernel's top-level statements and tracks, for every value that depends
on the offsets ``tl.arange(0, BLOCK_N)``, what it is: offsets (pointers and masks built from
them), or data (loaded through them), with its rank and the axis the row runs along (counted
from the end, which broadcasting keeps). Anything it does not understand in a statement that
touches the row is a refusal with the reason; values that do not touch the row are free.
"""

from __future__ import annotations

from dataclasses import dataclass, replace as dc_replace

import libcst as cst

from ..analyze import KernelInfo
from ._cst import code
from ._stream_cst import (
    ACC,
    PART,
    PREFIX,
    START,
    BodyPlan,
    assign_counts,
    broadcast_elements,
    int_value,
    is_tl,
    is_zero_literal,
    max_rank,
    names_in,
    tl_name,
)
from .base import short

_REDUCTIONS = {"sum", "max", "min", "argmax", "argmin", "reduce", "xor_sum", "cumsum",
               "cumprod", "associative_scan", "dot", "histogram", "sort", "topk"}
_ELEMENTWISE_FREE = {"exp", "exp2", "log", "log2", "sqrt", "rsqrt", "abs", "sin", "cos",
                     "sigmoid", "cast", "fma", "maximum", "minimum", "where", "erf", "floor",
                     "ceil", "multiple_of", "max_contiguous"}


@dataclass(frozen=True)
class Val:
    """What an expression is: free of the row, offsets, or data loaded through them."""

    kind: str                   # "free" | "offs" | "data"
    rank: int | None            # None: unknown
    axis: int | None = None     # the row's axis, from the end (-1: last); offs/data only
    pure: bool = False          # offs: a broadcast view of the arange (its value is the column)
    guard: bool = False         # offs: false wherever the column is >= N
    zero: bool = False          # data: zero wherever the load masks are off


FREE_UNKNOWN = Val("free", None)


class Refuse(Exception):
    """The kernel is outside the pattern; the message says where and why."""


def _combine(a: Val, b: Val, what: cst.CSTNode) -> Val:
    rank = max(a.rank, b.rank) if a.rank is not None and b.rank is not None else None
    axes = {v.axis for v in (a, b) if v.kind != "free"}
    if len(axes) > 1:
        raise Refuse(f"`{short(code(what))}` combines the row along two different axes")
    kinds = {a.kind, b.kind}
    kind = "data" if "data" in kinds else "offs" if "offs" in kinds else "free"
    return Val(kind, rank, axes.pop() if axes else None)


class _Matcher:
    def __init__(self, fn: cst.FunctionDef, kernel: KernelInfo, block: str,
                 row_params: tuple[str, ...], tl: str):
        self.fn, self.k, self.block, self.ns, self.tl = fn, kernel, block, row_params, tl
        self.env: dict[str, Val] = {}
        self.deps: set[str] = set()
        self.arange: cst.Call | None = None
        self.n: str | None = None

    # ---------------------------------------------------------------- expressions

    def mentions(self, node: cst.CSTNode, skip: cst.CSTNode | None = None) -> bool:
        v = names_in(node, skip)
        return any(c is self.arange for c in v.calls) or \
            any(n.value in self.deps for n in v.found)

    def free_rank(self, node: cst.BaseExpression) -> int | None:
        if isinstance(node, (cst.Integer, cst.Float)):
            return 0
        if isinstance(node, cst.Name):
            if node.value in self.k.param_names:
                return 0
            v = self.env.get(node.value)
            return v.rank if v else None
        if isinstance(node, cst.BinaryOperation):
            return max_rank(self.free_rank(node.left), self.free_rank(node.right))
        if isinstance(node, cst.Comparison):
            ranks = [self.free_rank(node.left)] + [self.free_rank(c.comparator)
                                                   for c in node.comparisons]
            return None if None in ranks else max(ranks)
        if isinstance(node, cst.UnaryOperation):
            return self.free_rank(node.expression)
        if isinstance(node, cst.Subscript):
            elems = broadcast_elements(node)
            return len(elems) if elems is not None else None
        if isinstance(node, cst.Call):
            name = tl_name(node)
            args = [a.value for a in node.args if a.keyword is None]
            if name in ("program_id", "num_programs"):
                return 0
            if name == "arange":
                return 1
            if name in ("zeros", "full") and args and isinstance(args[0], (cst.List, cst.Tuple)):
                return len(args[0].elements)
            if name == "load" and args:
                return self.free_rank(args[0])
            if name in _ELEMENTWISE_FREE and args:
                ranks = [self.free_rank(a) for a in args]
                return None if None in ranks else max(ranks)
            if isinstance(node.func, cst.Attribute) and node.func.attr.value == "to":
                return self.free_rank(node.func.value)
        return None

    def ev(self, node: cst.BaseExpression) -> Val:
        if not self.mentions(node):
            return Val("free", self.free_rank(node))
        if isinstance(node, cst.Name):
            return self.env[node.value]
        if isinstance(node, cst.Call):
            return self.call(node)
        if isinstance(node, cst.Subscript):
            return self.subscript(node)
        if isinstance(node, cst.BinaryOperation):
            return self.binary(node)
        if isinstance(node, cst.Comparison):
            return self.comparison(node)
        if isinstance(node, cst.UnaryOperation):
            v = self.ev(node.expression)
            if v.kind == "data" and not isinstance(node.operator, (cst.Minus, cst.Plus)):
                raise Refuse(f"`{short(code(node))}` is not an elementwise + - * of the row")
            return dc_replace(v, pure=False, guard=False)
        raise Refuse(f"`{short(code(node))}` uses the row offsets in a form not understood "
                     "(only tl.load, .to, tl.abs, + - * and one tl.sum may)")

    def call(self, node: cst.Call) -> Val:
        if node is self.arange:
            return Val("offs", 1, -1, pure=True)
        name = tl_name(node)
        if name == "load":
            return self.load(node)
        if isinstance(node.func, cst.Attribute) and node.func.attr.value == "to" and \
                self.mentions(node.func.value):
            self.free_args(node)
            v = self.ev(node.func.value)
            return dc_replace(v, pure=False, guard=False)
        if name == "abs" and len(node.args) == 1:
            v = self.ev(node.args[0].value)
            return dc_replace(v, pure=False, guard=False)
        if name in _REDUCTIONS or (isinstance(node.func, cst.Attribute)
                                    and node.func.attr.value in _REDUCTIONS):
            raise Refuse(f"`{short(code(node))}` reduces the row other than through the one "
                         "tl.sum (another reduction)")
        if name == "store" or name.startswith("atomic"):
            raise Refuse(f"`{short(code(node))}` writes through the row offsets (only loads "
                         "may use them)")
        raise Refuse(f"`{short(code(node))}` passes the row to a call other than tl.load, "
                     ".to, tl.abs or one tl.sum")

    def free_args(self, node: cst.Call) -> None:
        for a in node.args:
            if self.mentions(a.value):
                raise Refuse(f"`{short(code(node))}` takes the row as an option")

    def load(self, node: cst.Call) -> Val:
        names = ("pointer", "mask", "other")
        pos = [a for a in node.args if a.keyword is None]
        got = {names[i]: a.value for i, a in enumerate(pos[:3])}
        where = f"`{short(code(node))}`"
        for a in node.args:
            kw = a.keyword.value if a.keyword else None
            if kw is None:
                continue
            if kw in names:
                got[kw] = a.value
            elif kw in ("boundary_check", "padding_option"):
                raise Refuse(f"{where} is a block-pointer load")
            elif self.mentions(a.value):
                raise Refuse(f"{where} takes the row as an option")
        if len(pos) > 3:
            raise Refuse(f"{where} passes more than three arguments by position")
        ptr = self.ev(got["pointer"]) if "pointer" in got else FREE_UNKNOWN
        if ptr.kind == "free":
            raise Refuse(f"{where}: the mask depends on the row offsets but the pointer does not")
        if ptr.kind == "data":
            raise Refuse(f"{where} reads through loaded values (a gather)")
        if "mask" not in got:
            raise Refuse(f"{where} reads the row without a mask")
        mask = self.ev(got["mask"])
        if mask.kind != "offs" or not mask.guard:
            raise Refuse(f"{where}: its mask is not `<offsets> < {' or '.join(self.ns)}` "
                         "(alone or and-ed with others)")
        if not is_zero_literal(got.get("other")):
            raise Refuse(f"{where} has no other=0: masked lanes would not add zero")
        return Val("data", ptr.rank, ptr.axis, zero=True)

    def subscript(self, node: cst.Subscript) -> Val:
        if any(self.mentions(e) for e in node.slice):
            raise Refuse(f"`{short(code(node))}` indexes with the row offsets")
        base = self.ev(node.value)
        elems = broadcast_elements(node)
        if elems is None or base.rank is None or elems.count(":") != base.rank:
            raise Refuse(f"`{short(code(node))}` indexes the row (only [None, :] broadcasting "
                         "of a tensor of known rank is understood)")
        at = base.rank + base.axis
        colons = [i for i, e in enumerate(elems) if e == ":"]
        return dc_replace(base, rank=len(elems), axis=colons[at] - len(elems))

    def binary(self, node: cst.BinaryOperation) -> Val:
        a, b = self.ev(node.left), self.ev(node.right)
        out = _combine(a, b, node)
        if out.kind == "data":
            if "offs" in (a.kind, b.kind):
                raise Refuse(f"`{short(code(node))}` uses the row offsets as values (only "
                             "loads may use them)")
            if isinstance(node.operator, cst.Multiply):
                return dc_replace(out, zero=a.zero or b.zero)
            if isinstance(node.operator, (cst.Add, cst.Subtract)):
                return dc_replace(out, zero=a.zero and b.zero)
            raise Refuse(f"`{short(code(node))}` is not an elementwise + - * of the row")
        guard = isinstance(node.operator, cst.BitAnd) and (a.guard or b.guard)
        return dc_replace(out, guard=guard)

    def comparison(self, node: cst.Comparison) -> Val:
        parts = [self.ev(node.left)] + [self.ev(c.comparator) for c in node.comparisons]
        if any(p.kind == "data" for p in parts):
            raise Refuse(f"`{short(code(node))}` compares loaded values (a data-dependent "
                         "mask)")
        out = parts[0]
        for p in parts[1:]:
            out = _combine(out, p, node)
        guard = False
        if len(node.comparisons) == 1:
            op, right = node.comparisons[0].operator, node.comparisons[0].comparator
            if isinstance(op, cst.LessThan) and parts[0].pure and isinstance(right, cst.Name) \
                    and right.value in self.ns:
                guard, self.n = True, self.n or right.value
            if isinstance(op, cst.GreaterThan) and parts[1].pure and \
                    isinstance(node.left, cst.Name) and node.left.value in self.ns:
                guard, self.n = True, self.n or node.left.value
        return Val("offs", out.rank, out.axis, guard=guard)

    # ---------------------------------------------------------------- statements

    def find_arange(self) -> None:
        v = names_in(self.fn.body)
        uses = [n for n in v.found if n.value == self.block]
        aranges = [c for c in v.calls if is_tl(c, "arange") and len(c.args) == 2
                   and int_value(c.args[0].value) == 0
                   and isinstance(c.args[1].value, cst.Name)
                   and c.args[1].value.value == self.block]
        if len(uses) != 1 or len(aranges) != 1:
            raise Refuse(f"{self.k.name} uses {self.block} {len(uses)} times; the pattern "
                         f"uses it once, in tl.arange(0, {self.block})")
        self.arange = aranges[0]

    def sum_of(self, call: cst.Call) -> Val:
        pos = [a for a in call.args if a.keyword is None]
        kws = {a.keyword.value: a.value for a in call.args if a.keyword is not None}
        if not pos or call.args[0].keyword is not None:
            raise Refuse(f"`{short(code(call))}`: the input is not the first argument")
        for a in call.args[1:]:
            if self.mentions(a.value):
                raise Refuse(f"`{short(code(call))}` takes the row as an option")
        v = self.ev(pos[0].value)
        if v.kind == "offs":
            raise Refuse(f"`{short(code(call))}` sums the row offsets themselves (only loaded "
                         "values may be summed)")
        if not v.zero:
            raise Refuse(f"`{short(code(call))}`: the summand is not zero where the mask is off, "
                         "so padding lanes would count")
        axis_node = pos[1].value if len(pos) > 1 else kws.get("axis")
        axis = int_value(axis_node) if axis_node is not None else None
        if axis_node is not None and not (isinstance(axis_node, cst.Name)
                                          and axis_node.value == "None") and axis is None:
            raise Refuse(f"`{short(code(call))}`: the axis is not a literal")
        if axis is None:
            if v.rank != 1:
                raise Refuse(f"`{short(code(call))}` sums every axis of a tensor of rank "
                             f"{v.rank}")
            return v
        if axis >= 0:
            if v.rank is None:
                raise Refuse(f"`{short(code(call))}`: the rank of the summand is unknown")
            axis -= v.rank
        if axis != v.axis:
            rank = v.rank if v.rank is not None else 0
            raise Refuse(f"`{short(code(call))}` sums over axis {axis + rank if rank else axis}"
                         f", but the row of tl.arange(0, {self.block}) runs along axis "
                         f"{v.axis + rank if rank else v.axis}")
        return v

    def plan(self, module: cst.Module) -> BodyPlan:
        self.find_arange()
        body = list(self.fn.body.body)
        loop: list[int] = []
        sum_index, sum_call, bare = None, None, False
        for i, stmt in enumerate(body):
            if not self.mentions(stmt):
                self.note_free(stmt)
                continue
            if not isinstance(stmt, cst.SimpleStatementLine):
                kind = type(stmt).__name__.lower()
                article = "an" if kind[0] in "aeiou" else "a"
                raise Refuse(f"{article} `{kind}` statement uses the row (the pattern is "
                             "straight-line code)")
            if len(stmt.body) != 1:
                raise Refuse(f"`{short(code(stmt))}`: several statements on one line use the row")
            small = stmt.body[0]
            sums = [c for c in names_in(small).calls if is_tl(c, "sum") and self.mentions(c)]
            if len(sums) > 1 or (sums and sum_index is not None):
                raise Refuse(f"`{short(code(small))}` is a second tl.sum over the row (only one "
                             "reduction may use it)")
            if sum_index is not None:
                raise Refuse(f"`{short(code(small))}` uses the row after its tl.sum")
            if sums:
                self.sum_of(sums[0])
                if self.mentions(small, skip=sums[0]):
                    raise Refuse(f"`{short(code(small))}` uses the row outside its tl.sum")
                sum_index, sum_call = i, sums[0]
                continue
            if not isinstance(small, cst.Assign) or len(small.targets) != 1 or \
                    not isinstance(small.targets[0].target, cst.Name):
                raise Refuse(f"`{short(code(small))}` uses the row offsets outside tl.load (a "
                             "store, an assert, or an assignment other than `name = ...`)")
            name = small.targets[0].target.value
            self.env[name] = self.ev(small.value)
            self.deps.add(name)
            bare = bare or small.value is self.arange
            loop.append(i)
        if sum_index is None or sum_call is None:
            raise Refuse(f"no tl.sum in {self.k.name} reduces the row loaded through "
                         f"tl.arange(0, {self.block})")
        if self.n is None:
            raise Refuse("no row load is masked with `<offsets> < N`")
        self.check_names(body, loop, sum_call)
        return BodyPlan(module, self.fn, self.block, self.n, self.tl, self.arange,
                        bare, loop, sum_index, sum_call, set(self.deps))

    def note_free(self, stmt: cst.BaseStatement) -> None:
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if isinstance(small, cst.Assign) and len(small.targets) == 1 and \
                        isinstance(small.targets[0].target, cst.Name):
                    self.env[small.targets[0].target.value] = \
                        Val("free", self.free_rank(small.value))

    def check_names(self, body: list, loop: list[int], sum_call: cst.Call) -> None:
        counts = assign_counts(self.fn)
        params = set(self.k.param_names)
        for name in sorted(self.deps):
            if name in params:
                raise Refuse(f"{self.k.name} assigns its parameter {name} from the row")
            if counts.get(name, 0) != 1:
                raise Refuse(f"{name} (built from the row) is assigned more than once in "
                             f"{self.k.name}")
        read: set[str] = set()
        for node in [body[i] for i in loop] + [sum_call]:
            read |= {n.value for n in names_in(node).found}
        for name in sorted(read - self.deps):
            limit = 0 if name in params else 1
            if counts.get(name, 0) > limit:
                raise Refuse(f"{name} is assigned {'in' if limit == 0 else 'more than once in'}"
                             f" {self.k.name}: the chunk loop would read another value")
        if counts.get(self.n or "", 0):
            raise Refuse(f"{self.k.name} assigns the row length {self.n}")
        taken = set(counts) | params
        new = {START, PART, ACC} | {PREFIX + d for d in self.deps}
        if taken & new:
            raise Refuse(f"{self.k.name} already uses {sorted(taken & new)[0]}")


def plan_body(module: cst.Module, fn: cst.FunctionDef, kernel: KernelInfo, block: str,
              row_params: tuple[str, ...], tl: str) -> BodyPlan | str:
    """The rewrite plan for ``fn`` (parsed within ``module``), or why it is not the pattern."""
    try:
        return _Matcher(fn, kernel, block, row_params, tl).plan(module)
    except Refuse as exc:
        return f"{kernel.name}: {exc}"


__all__ = ["Refuse", "Val", "plan_body"]
