"""A cheap static resource estimate of one kernel at one config: shared memory and registers.

No compiling: a small shape inference over the kernel's ``ast`` with the constexpr values of the
config. ``tl.arange``, ``tl.zeros``/``tl.full``, ``x[:, None]``, broadcasting operators,
``tl.load`` (of pointer tiles and block pointers), ``tl.dot``, ``.to()``, ``tl.trans`` and the
elementwise ``tl.*`` functions give tile shapes; then

- shared memory of each ``tl.dot`` in a loop with loads, which Triton pipelines:
  ``num_stages * (M*K*a_bytes + K*N*b_bytes)`` (checked against sm_90 compiles: exact for fp32
  operands); one buffer of the operands is the lower bound (fp16 operands sometimes get one);
- registers per thread: the tiles carried across a loop (dot accumulators, ``acc += ...``) must
  stay live, ``elements * words / (num_warps * 32)``, which is the lower bound; the upper bound
  adds every other tile of the loop body (pointer tiles count 2 words per element).

Each figure is a (low, high) range: element sizes the task does not pin down count as 1 to 4
bytes, and an expression the inference does not follow contributes nothing (so ``low`` stays a
lower bound). ``search.prune`` decides with these ranges.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any

Shape = tuple[int, ...]
Bytes = tuple[int, int]               # (low, high) element size in bytes

UNKNOWN_BYTES: Bytes = (1, 4)
_DTYPE_BYTES = {
    "float64": 8, "fp64": 8, "float32": 4, "fp32": 4, "tf32": 4, "float16": 2, "fp16": 2,
    "bfloat16": 2, "bf16": 2, "int64": 8, "int32": 4, "int16": 2, "int8": 1, "uint8": 1,
    "float8e4nv": 1, "float8e5": 1, "float8_e4m3fn": 1, "float8_e5m2": 1, "bool": 1, "int1": 1,
}
_ELEMENTWISE = {"exp", "exp2", "log", "log2", "sin", "cos", "sqrt", "rsqrt", "abs", "sigmoid",
                "maximum", "minimum", "where", "fma", "erf", "floor", "ceil", "softmax",
                "multiple_of", "max_contiguous", "max_constancy", "cast", "clamp", "fdiv",
                "div_rn", "umulhi", "tanh", "exp2"}
_REDUCE = {"sum", "max", "min", "argmax", "argmin", "reduce", "xor_sum"}


def dtype_bytes(name: str) -> int | None:
    """Element size of a dtype written as 'torch.float16', 'tl.float16', 'fp16' (None: unknown)."""
    short = name.rsplit(".", 1)[-1]
    return _DTYPE_BYTES.get(short)


@dataclass(frozen=True)
class DotTile:
    m: int
    n: int
    k: int
    a_bytes: Bytes
    b_bytes: Bytes
    pipelined: bool                   # in a loop that loads: multi-buffered by num_stages


@dataclass(frozen=True)
class ResourceEstimate:
    """What one config of one kernel needs, as (low, high) ranges."""

    kernel: str
    num_warps: int
    num_stages: int
    shared_bytes: tuple[int, int]
    registers: tuple[int, int]         # 32-bit registers per thread for the tiles alone
    dots: tuple[DotTile, ...] = ()
    unresolved: bool = False           # some tile shape could not be followed
    notes: tuple[str, ...] = field(default=())

    @property
    def threads(self) -> int:
        return self.num_warps * 32


@dataclass
class _Val:
    shape: Shape | None = None         # None: unknown
    nbytes: Bytes = UNKNOWN_BYTES      # element size
    pointer: bool = False              # a tile of pointers (64-bit each)
    block_ptr: bool = False


def _bcast(a: Shape | None, b: Shape | None) -> Shape | None:
    if a is None or b is None:
        return a if b is None and a == () else (b if a == () else None)
    n = max(len(a), len(b))
    a, b = (1,) * (n - len(a)) + a, (1,) * (n - len(b)) + b
    out = []
    for x, y in zip(a, b):
        if x != y and 1 not in (x, y):
            return None
        out.append(max(x, y))
    return tuple(out)


def _elements(shape: Shape | None) -> int:
    n = 1
    for d in shape or ():
        n *= d
    return n if shape else 0


class _Infer:
    def __init__(self, consts: dict[str, Any], ptr_bytes: dict[str, Bytes]):
        self.consts = consts
        self.ptr_bytes = ptr_bytes          # pointer param -> element size range
        self.env: dict[str, _Val] = {}
        self.dots: list[DotTile] = []
        self.carried: dict[str, int] = {}   # loop-carried tile -> words
        self.loop_tiles: dict[str, int] = {}  # other tiles assigned in loops -> words
        self.unresolved = False
        self.loop_depth = 0
        self.loop_loads = False
        self.outer: set[str] = set()         # names bound before the outermost loop

    # ---- expressions
    def integer(self, node: ast.expr) -> int | None:
        if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
            return node.value
        if isinstance(node, ast.Name):
            v = self.consts.get(node.id)
            return v if isinstance(v, int) and not isinstance(v, bool) else None
        if isinstance(node, ast.BinOp):
            a, b = self.integer(node.left), self.integer(node.right)
            if a is None or b is None:
                return None
            ops = {ast.Add: lambda: a + b, ast.Sub: lambda: a - b, ast.Mult: lambda: a * b,
                   ast.FloorDiv: lambda: a // b if b else None}
            f = ops.get(type(node.op))
            return f() if f else None
        return None

    def shape_of(self, node: ast.expr) -> Shape | None:
        if isinstance(node, (ast.Tuple, ast.List)):
            dims = [self.integer(e) for e in node.elts]
            return None if any(d is None for d in dims) else tuple(dims)  # type: ignore[misc]
        d = self.integer(node)
        return (d,) if d is not None else None

    def dtype_arg(self, node: ast.expr | None) -> Bytes | None:
        if node is None:
            return None
        text = ast.unparse(node)
        b = dtype_bytes(text)
        return (b, b) if b else None

    def value(self, node: ast.expr) -> _Val:
        if isinstance(node, ast.Constant):
            return _Val((), (4, 4))
        if isinstance(node, ast.Name):
            if node.id in self.env:
                return self.env[node.id]
            if node.id in self.ptr_bytes:
                return _Val((), self.ptr_bytes[node.id], pointer=True)
            return _Val((), (4, 4))
        if isinstance(node, ast.BinOp):
            a, b = self.value(node.left), self.value(node.right)
            ptr = a.pointer or b.pointer
            nbytes = a.nbytes if a.pointer or not b.pointer and a.shape else b.nbytes
            return _Val(_bcast(a.shape, b.shape), nbytes, pointer=ptr)
        if isinstance(node, (ast.Compare, ast.BoolOp)):
            vals = [self.value(n) for n in ([node.left, *node.comparators] if isinstance(node, ast.Compare)
                                            else node.values)]
            shape: Shape | None = ()
            for v in vals:
                shape = _bcast(shape, v.shape)
            return _Val(shape, (1, 1))
        if isinstance(node, ast.UnaryOp):
            return self.value(node.operand)
        if isinstance(node, ast.Subscript):
            return self.subscript(node)
        if isinstance(node, ast.IfExp):
            return self.value(node.body)
        if isinstance(node, ast.Call):
            return self.call(node)
        self.unresolved = True
        return _Val(None)

    def subscript(self, node: ast.Subscript) -> _Val:
        base = self.value(node.value)
        if base.shape is None:
            return _Val(None, base.nbytes, base.pointer)
        items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        dims, out = list(base.shape), []
        for it in items:
            if isinstance(it, ast.Constant) and it.value is None:
                out.append(1)
            elif isinstance(it, ast.Slice) and dims:
                out.append(dims.pop(0))
            else:
                return _Val(None, base.nbytes, base.pointer)
        return _Val(tuple(out + dims), base.nbytes, base.pointer)

    def call(self, node: ast.Call) -> _Val:
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else (func.id if isinstance(func, ast.Name) else "")
        kw = {k.arg: k.value for k in node.keywords if k.arg}
        args = node.args
        method_of = func.value if isinstance(func, ast.Attribute) and not (
            isinstance(func.value, ast.Name) and func.value.id in ("tl", "triton", "libdevice")) else None
        if method_of is not None and name == "to":
            base = self.value(method_of)
            return _Val(base.shape, self.dtype_arg(args[0] if args else kw.get("dtype")) or base.nbytes)
        if name == "arange" and len(args) >= 2:
            lo, hi = self.integer(args[0]), self.integer(args[1])
            return _Val((hi - lo,) if lo is not None and hi is not None else None, (4, 4))
        if name in ("zeros", "full", "empty"):
            shape_node = args[0] if args else kw.get("shape")
            dt = kw.get("dtype") or (args[-1] if len(args) >= 2 else None)
            return _Val(self.shape_of(shape_node) if shape_node is not None else None,
                        self.dtype_arg(dt) or (4, 4))
        if name == "make_block_ptr":
            shape_node = kw.get("block_shape") or (args[4] if len(args) > 4 else None)
            base = self.value(kw.get("base") or args[0]) if (args or "base" in kw) else _Val()
            return _Val(self.shape_of(shape_node) if shape_node is not None else None,
                        base.nbytes, block_ptr=True)
        if name == "advance" and args:
            return self.value(args[0])
        if name == "load":
            ptr = self.value(args[0] if args else kw.get("pointer", ast.Constant(None)))
            if self.loop_depth:
                self.loop_loads = True
            return _Val(ptr.shape, ptr.nbytes)
        if name == "dot" and len(args) >= 2:
            a, b = self.value(args[0]), self.value(args[1])
            if a.shape is None or b.shape is None or len(a.shape) < 2 or len(b.shape) < 2:
                self.unresolved = True
                return _Val(None, (4, 4))
            m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
            self.dots.append(DotTile(m, n, k, a.nbytes, b.nbytes, self.loop_depth > 0))
            return _Val(a.shape[:-2] + (m, n), self.dtype_arg(kw.get("out_dtype")) or (4, 4))
        if name in ("trans", "permute") and args:
            v = self.value(args[0])
            return _Val(tuple(reversed(v.shape)) if v.shape is not None else None, v.nbytes)
        if name in ("reshape", "view") and len(args) >= 2:
            v = self.value(args[0])
            return _Val(self.shape_of(args[1]), v.nbytes)
        if name in _REDUCE and args:
            v = self.value(args[0])
            axis_node = args[1] if len(args) > 1 else kw.get("axis")
            axis = self.integer(axis_node) if axis_node is not None else None
            if v.shape is None or axis is None or not -len(v.shape) <= axis < len(v.shape):
                return _Val((), v.nbytes) if axis_node is None else _Val(None, v.nbytes)
            shape = list(v.shape)
            shape.pop(axis)
            return _Val(tuple(shape), v.nbytes)
        if name in _ELEMENTWISE and args:
            vals = [self.value(a) for a in args]
            shape: Shape | None = ()
            for v in vals:
                shape = _bcast(shape, v.shape)
            return _Val(shape, vals[-1].nbytes if name == "where" else vals[0].nbytes)
        if name in ("program_id", "num_programs", "cdiv", "constexpr", "range", "static_range"):
            return _Val((), (4, 4))
        if name == "store" or name.startswith("atomic_") or name in ("static_assert", "device_print",
                                                                     "debug_barrier", "device_assert"):
            for a in args:
                self.value(a)
            return _Val(None if name.startswith("atomic_") else ())
        self.unresolved = True
        return _Val(None)

    # ---- statements
    @staticmethod
    def words(v: _Val) -> int:
        """32-bit registers the tile takes over all threads (pointers: 64-bit each)."""
        if v.shape is None or v.block_ptr:
            return 0
        return -(-_elements(v.shape) * (8 if v.pointer else v.nbytes[0]) // 4)

    def assign(self, target: ast.expr, v: _Val, aug: bool = False) -> None:
        if not isinstance(target, ast.Name):
            return
        if aug and target.id in self.env:
            v = _Val(self.env[target.id].shape or v.shape, self.env[target.id].nbytes,
                     self.env[target.id].pointer, self.env[target.id].block_ptr)
        if self.loop_depth and v.shape and _elements(v.shape) > 1:
            if target.id in self.outer:            # assigned before the loop: carried across it
                into = self.loop_tiles if v.pointer or v.block_ptr else self.carried
                into[target.id] = max(into.get(target.id, 0), self.words(v))
            else:
                self.loop_tiles[target.id] = max(self.loop_tiles.get(target.id, 0), self.words(v))
        self.env[target.id] = v

    def body(self, stmts: list[ast.stmt]) -> None:
        for s in stmts:
            if isinstance(s, ast.Assign):
                v = self.value(s.value)
                for t in s.targets:
                    self.assign(t, v)
            elif isinstance(s, ast.AnnAssign) and s.value is not None:
                self.assign(s.target, self.value(s.value))
            elif isinstance(s, ast.AugAssign):
                self.assign(s.target, self.value(s.value), aug=True)
            elif isinstance(s, (ast.For, ast.While)):
                if self.loop_depth == 0:
                    self.outer = set(self.env)
                self.loop_depth += 1
                self.body(s.body)
                self.loop_depth -= 1
                self.body(s.orelse)
            elif isinstance(s, ast.If):
                self.body(s.body)
                self.body(s.orelse)
            elif isinstance(s, ast.Expr):
                self.value(s.value)
            elif isinstance(s, ast.With):
                self.body(s.body)


def _find_kernel(tree: ast.Module, name: str) -> ast.FunctionDef | None:
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node
    return None


def estimate(source: str | ast.Module, kernel: str, constexprs: dict[str, Any], num_warps: int = 4,
             num_stages: int = 3, ptr_bytes: dict[str, Bytes] | None = None,
             default_bytes: Bytes = UNKNOWN_BYTES) -> ResourceEstimate | None:
    """The estimate for ``kernel`` of ``source`` at one config (None: no such kernel).

    ``ptr_bytes`` gives the element size range of pointer parameters; others get
    ``default_bytes``. Every non-constexpr parameter is treated as a possible pointer.
    """
    tree = ast.parse(source) if isinstance(source, str) else source
    fn = _find_kernel(tree, kernel)
    if fn is None:
        return None
    consts: dict[str, Any] = {}
    params = fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs
    defaults = [None] * (len(fn.args.posonlyargs + fn.args.args) - len(fn.args.defaults)) + list(fn.args.defaults)
    ptrs: dict[str, Bytes] = {}
    for p, d in zip(fn.args.posonlyargs + fn.args.args, defaults):
        if p.annotation is not None and "constexpr" in ast.unparse(p.annotation):
            if isinstance(d, ast.Constant):
                consts[p.arg] = d.value
        else:
            ptrs[p.arg] = (ptr_bytes or {}).get(p.arg, default_bytes)
    for p in params:
        if p.arg in constexprs and constexprs[p.arg] is not None:
            consts[p.arg] = constexprs[p.arg]
            ptrs.pop(p.arg, None)
    inf = _Infer(consts, ptrs)
    inf.body(fn.body)
    warps = max(1, int(num_warps))
    stages = max(1, int(num_stages))
    threads = warps * 32
    low_sh = high_sh = 0
    for d in inf.dots:
        one_low = d.m * d.k * d.a_bytes[0] + d.k * d.n * d.b_bytes[0]
        one_high = d.m * d.k * d.a_bytes[1] + d.k * d.n * d.b_bytes[1]
        low_sh = max(low_sh, one_low)
        high_sh += one_high * (stages if d.pipelined and inf.loop_loads else 1)
    carried = sum(inf.carried.values())
    others = sum(w for n, w in inf.loop_tiles.items() if n not in inf.carried)
    low_regs = -(-carried // threads)
    high_regs = -(-(carried + others) // threads)
    notes = []
    if inf.unresolved:
        notes.append("some tile shapes were not followed: the figures may be low")
    return ResourceEstimate(kernel, warps, stages, (low_sh, max(low_sh, high_sh)),
                            (low_regs, max(low_regs, high_regs)), tuple(inf.dots),
                            inf.unresolved, tuple(notes))
