"""libcst pieces of ``streaming_reduction``: reading names and literals, and the rewrite.

``BodyPlan.rewrite`` turns a matched kernel (``_stream_match``) into the streamed one: the first
chunk is the user's code as written, then ``_tf_acc`` (the sum, widened to fp32 if 16-bit), a
loop over the rest of the row with every row-dependent name renamed (only ``_tf_acc`` is carried
across iterations, so Triton's rule that loop-carried values keep their type is met even when
the loop index is 64-bit), and the statement that used the sum reading ``_tf_acc`` instead.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from ._cst import RenameNames, dotted

START, PART, ACC, PREFIX = "_tf_start", "_tf_part", "_tf_acc", "_tf_"


def is_tl(call: cst.Call, name: str) -> bool:
    return dotted(call.func) in (f"tl.{name}", f"triton.language.{name}")


def tl_name(call: cst.Call) -> str:
    d = dotted(call.func)
    for prefix in ("tl.", "triton.language."):
        if d.startswith(prefix) and "." not in d[len(prefix):]:
            return d[len(prefix):]
    return ""


def int_value(node: cst.BaseExpression | None) -> int | None:
    if isinstance(node, cst.Integer):
        return int(node.value, 0)
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus) and \
            isinstance(node.expression, cst.Integer):
        return -int(node.expression.value, 0)
    return None


def is_zero_literal(node: cst.BaseExpression | None) -> bool:
    if isinstance(node, cst.Integer):
        return int(node.value, 0) == 0
    if isinstance(node, cst.Float):
        return float(node.value) == 0.0
    return False


class _Names(cst.CSTVisitor):
    """Names read in an expression: not attribute names, not keyword names."""

    def __init__(self, skip: cst.CSTNode | None = None):
        super().__init__()
        self.found: list[cst.Name] = []
        self.calls: list[cst.Call] = []
        self.skip = skip

    def on_visit(self, node: cst.CSTNode) -> bool:
        if node is self.skip:
            return False
        if isinstance(node, cst.Name):
            self.found.append(node)
        elif isinstance(node, cst.Call):
            self.calls.append(node)
        elif isinstance(node, cst.Attribute):
            node.value.visit(self)
            return False
        elif isinstance(node, cst.Arg):
            node.value.visit(self)
            return False
        return True


def names_in(node: cst.CSTNode, skip: cst.CSTNode | None = None) -> _Names:
    v = _Names(skip)
    node.visit(v)
    return v


def assign_counts(fn: cst.FunctionDef) -> dict[str, int]:
    """How many times each name is bound in the kernel body (any statement, any depth)."""
    counts: dict[str, int] = {}

    def bind(target: cst.BaseExpression) -> None:
        if isinstance(target, cst.Name):
            counts[target.value] = counts.get(target.value, 0) + 1
        elif isinstance(target, (cst.Tuple, cst.List)):
            for e in target.elements:
                bind(e.value)
        elif isinstance(target, cst.StarredElement):
            bind(target.value)

    class V(cst.CSTVisitor):
        def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
            bind(node.target)

        def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
            bind(node.target)

        def visit_AugAssign(self, node: cst.AugAssign) -> None:
            bind(node.target)

        def visit_For(self, node: cst.For) -> None:
            bind(node.target)

        def visit_AsName(self, node: cst.AsName) -> None:
            bind(node.name)

        def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
            bind(node.target)

    fn.body.visit(V())
    return counts


@dataclass
class BodyPlan:
    """Where the pattern sits in one kernel's parsed text, and how to rewrite it."""

    module: cst.Module              # the kernel's text, parsed
    fn: cst.FunctionDef
    block: str
    n: str
    tl: str
    arange: cst.Call
    arange_bare: bool                # the arange is the whole value of an assignment
    loop_indices: list[int]          # top-level statements repeated per chunk
    sum_index: int
    sum_call: cst.Call
    deps: set[str] = field(default_factory=set)

    def rewrite(self) -> str:
        body = list(self.fn.body.body)
        loop = [_bare(body[i].visit(_ChunkCopy(self))) for i in self.loop_indices]
        chunk_sum = self.sum_call.visit(_ChunkCopy(self))
        loop.append(cst.SimpleStatementLine([cst.AugAssign(
            cst.Name(ACC), cst.AddAssign(), chunk_sum)]))
        head = cst.parse_statement(f"for {START} in range({self.block}, {self.n}, "
                                   f"{self.block}):\n    pass\n")
        head = head.with_changes(body=head.body.with_changes(body=loop))
        stmt = body[self.sum_index]
        first = cst.SimpleStatementLine(
            [cst.Assign([cst.AssignTarget(cst.Name(PART))], self.sum_call)],
            leading_lines=stmt.leading_lines)
        widen = cst.parse_statement(
            f"{ACC} = ({PART}.to({self.tl}.float32) if {PART}.dtype.is_fp16() or "
            f"{PART}.dtype.is_bf16()\n           else {PART})\n")
        use = cst.parse_expression(f"{ACC}.to({PART}.dtype)")
        rest = stmt.visit(_Swap(self.sum_call, use)).with_changes(leading_lines=())
        new_body = body[:self.sum_index] + [first, widen, head, rest] + body[self.sum_index + 1:]
        fn = self.fn.with_changes(body=self.fn.body.with_changes(body=new_body))
        return self.module.with_changes(
            body=[fn if s is self.fn else s for s in self.module.body]).code


def _bare(stmt: cst.SimpleStatementLine) -> cst.SimpleStatementLine:
    """A copy without the user's comments (they stay on the original statement)."""
    return stmt.with_changes(leading_lines=(), trailing_whitespace=cst.TrailingWhitespace())


class _Swap(cst.CSTTransformer):
    def __init__(self, target: cst.CSTNode, new: cst.BaseExpression):
        super().__init__()
        self.target, self.new = target, new

    def on_leave(self, original, updated):  # noqa: D102 (libcst hook)
        return self.new if original is self.target else updated


class _ChunkCopy(RenameNames):
    """A statement of the first chunk, for chunk ``_tf_start``: the arange shifted, and every
    name that depends on it renamed (so nothing is carried across iterations but the sum)."""

    def __init__(self, plan: BodyPlan):
        super().__init__()
        self.plan = plan

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        if original is not self.plan.arange:
            return updated
        shifted = cst.BinaryOperation(cst.Name(START), cst.Add(), updated)
        if self.plan.arange_bare:
            return shifted
        return shifted.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])

    def new_name(self, name: str) -> str | None:
        return PREFIX + name if name in self.plan.deps else None


def max_rank(a: int | None, b: int | None) -> int | None:
    return max(a, b) if a is not None and b is not None else None


def broadcast_elements(node: cst.Subscript) -> list[str] | None:
    """``[None, :]`` -> ["None", ":"]; None for any other index."""
    out = []
    for e in node.slice:
        s = e.slice
        if isinstance(s, cst.Index) and isinstance(s.value, cst.Name) and s.value.value == "None":
            out.append("None")
        elif isinstance(s, cst.Slice) and s.lower is None and s.upper is None and s.step is None:
            out.append(":")
        else:
            return None
    return out


__all__ = ["ACC", "PART", "PREFIX", "START", "BodyPlan", "assign_counts", "broadcast_elements",
           "int_value", "is_tl", "is_zero_literal", "max_rank", "names_in", "tl_name"]
