"""From templates to spec calls: traced calls re-drawn, odd shapes, and a performance size ladder.

``materialize`` turns one traced call plus new values for its symbols into a ``SpecCall``: each
tensor gets its new shape and a re-draw recipe learned from its traced values (``values.learn``),
integer arguments follow their symbols, everything else is passed as traced. Arguments a spec
cannot express (a ``torch.dtype`` that is not the default, a module object) make the call
*unrepresentable*; the reason is reported, the call skipped.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

from ..model import Case, CaseRole, SpecCall, TensorSpec
from .dims import Atom, Template, leaves, size_of, symbol_values
from .model import ArgNode, Parameter, TracedCall, TracedSeq, TracedTensor, TracedValue
from .values import DTYPES, INT_DTYPES, learn, offsets_spec

ITEMSIZE = {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8, "int8": 1, "int16": 2,
            "int32": 4, "int64": 8, "uint8": 1, "bool": 1, "float8_e4m3fn": 1, "float8_e5m2": 1}


class Unrepresentable(Exception):
    """The call has an argument a spec file cannot express."""


@dataclass(frozen=True)
class Built:
    call: SpecCall
    bytes: int
    notes: tuple[str, ...]
    keeps_values: tuple[str, ...]     # leaves whose traced data is kept (shape must not change)


def index_ties(template: Template) -> dict[tuple, str]:
    """Integer tensors whose range [low, high) ends at a size symbol in every traced call.

    Exact when ``max + 1`` equals the symbol; else, for tensors of 8 or more values, the smallest
    symbol above the traced maximum when the maximum reaches 60% of it (random indices rarely hit
    the last one). Their ``high`` follows the symbol when it changes: indices stay in range and
    cover it.
    """
    ties: dict[tuple, str] = {}
    per_call = [symbol_values(template, c) for c in template.calls]
    by_call = [dict(leaves(c, with_returns=False)) for c in template.calls]
    for path, node in leaves(template.calls[0], with_returns=False):
        if not isinstance(node, TracedTensor) or node.dtype not in INT_DTYPES:
            continue
        stats = [leaf.stats if isinstance(leaf := bc.get(path), TracedTensor) else None for bc in by_call]
        if any(st is None or st.max is None or st.min is None or st.min < 0 for st in stats):
            continue
        exact = [sym.name for sym in template.symbols
                 if all(vals.get(sym.name) == int(st.max) + 1 for vals, st in zip(per_call, stats))]
        if exact:
            ties[path] = exact[0]
            continue
        choice = None
        for vals, st in zip(per_call, stats):
            above = sorted((v, n) for n, v in vals.items() if v > st.max)
            pick = above[0][1] if above and st.numel >= 8 and st.max + 1 >= 0.6 * above[0][0] else None
            if pick is None or (choice is not None and pick != choice):
                choice = None
                break
            choice = pick
        if choice is not None:
            ties[path] = choice
    return ties


def materialize(template: Template, call: TracedCall, values: dict[str, int],
                params: tuple[Parameter, ...], *, entry: str | None = None,
                variety: str | None = None) -> Built:
    """A spec call for ``call`` with its base symbols set to ``values`` (others as traced);
    ``variety`` (a key of ``VARIETIES``) re-draws its tensors that way."""
    ties = index_ties(template)
    notes: list[str] = []
    kept: list[str] = []
    total = 0

    def build(path: tuple, node: ArgNode) -> object:
        nonlocal total
        if isinstance(node, TracedTensor):
            if node.dtype not in DTYPES:
                raise Unrepresentable(f"{template.leaf_name(path)} has dtype {node.dtype}")
            shape = tuple(size_of(template, values, call, Atom(path, ax)) for ax in range(len(node.shape)))
            learned = learn(node, shape)
            spec = learned.spec
            if path in ties and learned.index_high is not None and spec.init == "randint":
                traced_high = symbol_values(template, call).get(ties[path], learned.index_high)
                spec = replace(spec, high=values.get(ties[path], traced_high))
            if learned.offsets_total is not None:
                sym = next((n for n, v in symbol_values(template, call).items()
                            if v == learned.offsets_total), None)
                end = values.get(sym, learned.offsets_total) if sym else learned.offsets_total
                try:
                    spec, note = offsets_spec(spec, end)
                except ValueError as exc:
                    raise Unrepresentable(f"{template.leaf_name(path)}: {exc}") from None
                learned = replace(learned, note=note + (f" (total follows {sym})" if sym else ""))
            if variety is not None and not learned.keeps_values:
                spec = vary(spec, variety, written=node.written)
            if learned.keeps_values:
                kept.append(template.leaf_name(path))
            if learned.note:
                notes.append(f"{template.leaf_name(path)}: {learned.note}")
            total += _numel(shape) * ITEMSIZE.get(node.dtype, 4)
            return spec
        if isinstance(node, TracedSeq):
            return tuple(build(path + (i,), item) for i, item in enumerate(node.items))
        assert isinstance(node, TracedValue)
        if node.kind == "int":
            return size_of(template, values, call, Atom(path, None))
        if node.kind in ("float", "bool", "str"):
            return node.value
        if node.kind == "none":
            return None
        raise Unrepresentable(f"{template.leaf_name(path)} is a {node.type_name or node.kind}"
                              + (f" ({node.value})" if node.value is not None else ""))

    defaults = {p.name: p.default for p in params if p.has_default}
    args: list = []
    kwargs = []
    by_name = False        # after a left-out positional default, the rest go by keyword
    for i, a in enumerate(call.args):
        param = params[i] if i < len(params) else None
        if by_name:
            if param is None or param.kind not in ("positional_or_keyword", "keyword_only"):
                raise Unrepresentable(f"argument {i} follows a left-out default and has no name")
            kwargs.append((param.name, build(("a", i), a)))
            continue
        try:
            args.append(build(("a", i), a))
        except Unrepresentable:
            if (param is None or param.name not in defaults or defaults[param.name] != a
                    or param.kind != "positional_or_keyword"):
                raise
            by_name = True                 # equal to its default: leave it out
    for k, v in call.kwargs:
        try:
            kwargs.append((k, build(("k", k), v)))
        except Unrepresentable:
            if k in defaults and defaults[k] == v:
                continue                   # equal to the default: leave it out
            raise
    for path, node in leaves(call):
        if path[0] == "r" and isinstance(node, TracedTensor):
            shape = tuple(size_of(template, values, call, Atom(path, ax)) for ax in range(len(node.shape)))
            total += _numel(shape) * ITEMSIZE.get(node.dtype, 4)
    spec = SpecCall(entry or call.function, tuple(args), tuple(sorted(kwargs)))
    return Built(spec, total, tuple(notes), tuple(kept))


# ----------------------------------------------------------------------------- value and layout variety

# What each variety case checks, in its note. A traced test draws randn of unit scale: a kernel
# that overflows without a max-subtraction, loses small values to an epsilon, skips exact zeros
# or ignores strides passes it, and every re-draw of it.
VARIETIES = {
    "large": "large magnitudes (x1e3; float16 x32): overflow without rescaling (softmax's max)",
    "tiny": "tiny magnitudes (x1e-3): values an epsilon or a flush-to-zero would swallow",
    "sparse": "half the elements exact zeros: code that skips or divides by zeros",
    "strided": "inputs as non-contiguous views (last stride 2): kernels that ignore strides",
}
_LARGE = {"float16": 32.0}
_TINY = 1e-3


def vary(spec: TensorSpec, variety: str, *, written: bool = False) -> TensorSpec:
    """``spec`` re-drawn for ``variety``: value varieties scale or thin float data drawn at
    random (never output buffers, constants or integers); ``strided`` makes every input the
    call does not write a non-contiguous view with the same values."""
    drawn = spec.init in ("randn", "rand") and spec.dtype not in INT_DTYPES | {"bool"}
    if variety in ("large", "tiny") and spec.init == "full" and spec.value \
            and spec.dtype not in INT_DTYPES | {"bool"}:
        # a float tensor traced as one value (all elements equal, or a single one): scaled too
        k = _LARGE.get(spec.dtype, 1e3) if variety == "large" else _TINY
        return replace(spec, value=spec.value * k)
    if variety in ("large", "tiny") and drawn:
        k = _LARGE.get(spec.dtype, 1e3) if variety == "large" else _TINY
        if spec.init == "randn":
            return replace(spec, scale=spec.scale * k, offset=spec.offset * k)
        return replace(spec, low=(spec.low or 0.0) * k, high=(1.0 if spec.high is None else spec.high) * k)
    if variety == "sparse" and drawn:
        return replace(spec, sparsity=0.5)
    if variety == "strided" and not written and spec.shape and spec.init != "empty":
        return replace(spec, layout="strided")
    return spec


def _numel(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def call_bytes(template: Template, call: TracedCall, values: dict[str, int]) -> int:
    """Bytes of the call's tensors at ``values``. A returned tensor with a size of kind
    ``output`` (which only the return value has, so no case sets it) is taken to grow with the
    inputs' bytes: its traced bytes times the inputs' growth."""
    kinds = {s.name: s.kind for s in template.symbols}
    symbol_of = dict(template.atom_symbol)
    total = inputs = inputs_traced = following = 0
    for path, node in leaves(call):
        if not isinstance(node, TracedTensor):
            continue
        item = ITEMSIZE.get(node.dtype, 4)
        atoms = [Atom(path, ax) for ax in range(len(node.shape))]
        if any(kinds.get(symbol_of.get(a, "")) == "output" for a in atoms):
            following += _numel(tuple(node.shape)) * item
            continue
        now = _numel(tuple(size_of(template, values, call, a) for a in atoms)) * item
        total += now
        if path[0] != "r":
            inputs += now
            inputs_traced += _numel(tuple(node.shape)) * item
    if following:
        total += following * inputs // inputs_traced if inputs_traced else following
    return total


def launch_bytes(call: TracedCall) -> int:
    """Bytes of the tensors the call's traced kernel launches were given (as traced)."""
    total = 0

    def add(node: ArgNode) -> None:
        nonlocal total
        if isinstance(node, TracedTensor):
            total += _numel(tuple(node.shape)) * ITEMSIZE.get(node.dtype, 4)
        elif isinstance(node, TracedSeq):
            for item in node.items:
                add(item)

    for launch in call.launches:
        for _, node in launch.args:
            add(node)
    return total


def label(call: SpecCall) -> str:
    parts = []
    for a in call.args:
        parts.append(a.describe() if isinstance(a, TensorSpec) else repr(a))
    parts += [f"{k}={v.describe() if isinstance(v, TensorSpec) else repr(v)}" for k, v in call.kwargs]
    return ", ".join(parts)


# ----------------------------------------------------------------------------- odd shapes

def _is_pow2(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def odd_values(value: int) -> list[tuple[str, int]]:
    """Sizes that break round-number assumptions: not a power of two, a partial last block, one."""
    np2 = 3 * value // 2 + 1
    if _is_pow2(np2):
        np2 += 1
    out = [("np2", np2)]
    if value >= 3:
        out.append(("tail", value - 1))       # a multiple of the block minus one: last block partial
    if value >= 2:
        out.append(("one", 1))
    return out


def shrink_hazard(template: Template, call: TracedCall, symbol: str, new: int) -> str | None:
    """A reason not to shrink ``symbol`` to ``new``: integer data that might index it would overflow."""
    ties = index_ties(template)
    old = symbol_values(template, call).get(symbol, 0)
    if new >= old:
        return None
    for path, node in leaves(call, with_returns=False):
        if not isinstance(node, TracedTensor) or node.dtype not in INT_DTYPES or path in ties:
            continue
        if learn(node).offsets_total is not None:
            continue                      # offsets are rebuilt for the new sizes
        s = node.stats
        if s is not None and s.max is not None and int(s.max) >= new and int(s.max) < old:
            return (f"{template.leaf_name(path)} holds values up to {int(s.max)}, which may index "
                    f"{symbol}: not shrunk to {new}")
    return None


def make_case(case_id: str, role: CaseRole, built: Built, seeds: int, note: str) -> Case:
    case_seeds = tuple(range(seeds)) if role is CaseRole.CORRECTNESS else (0,)
    return Case(case_id, role, built.call, case_seeds, label(built.call)[:200])


# ----------------------------------------------------------------------------- performance ladder

@dataclass(frozen=True)
class Rung:
    values: tuple[tuple[str, int], ...]
    bytes: int
    step: str                              # which symbol was doubled to get here


def perf_ladder(template: Template, call: TracedCall, *, target_bytes: int,
                fixed: dict[str, int] | None = None, extra_steps: int = 4,
                max_bytes: int = 4 << 30, block_cap: int = 16384, max_steps: int = 48,
                slack: float = 0.9, valid: Callable[[dict[str, int]], bool] | None = None) -> list[Rung]:
    """Double the sizes that scale until a call moves ``target_bytes``, then ``extra_steps`` more.

    Free symbols go first (the smallest doubled each step, keeping shapes balanced); symbols a
    block size follows only when no free one is left, and never past ``block_cap``. A symbol
    whose doubling barely grows the bytes (< 1.3x) is not used. ``fixed`` sizes are kept. A rung
    within ``slack`` of the target counts as reaching it ("about 64 MB"). ``valid``: whether a
    spec can express the call at those sizes (offsets whose length and total follow different
    sizes may not be); a doubling it refuses is not taken, so another size grows instead.
    """
    fixed = dict(fixed or {})
    values = {**symbol_values(template, call), **fixed}
    kinds = {s.name: s.kind for s in template.symbols}
    rungs = [Rung(tuple(sorted(values.items())), call_bytes(template, call, values), "traced")]
    beyond = 0
    for _ in range(max_steps):
        current = rungs[-1].bytes
        if current >= slack * target_bytes:
            if beyond >= extra_steps:
                break
            beyond += 1
        options = []
        for tier, wanted in ((0, ("free", "aligned")), (1, ("block_following",))):
            for name, kind in kinds.items():
                if kind not in wanted or name in fixed or values.get(name, 0) < 1:
                    continue
                if tier == 1 and values[name] * 2 > block_cap:
                    continue
                trial = {**values, name: values[name] * 2}
                grown = call_bytes(template, call, trial)
                if grown >= 1.3 * max(current, 1) and grown <= max_bytes:
                    options.append((tier, values[name], name, trial, grown))
            if valid is not None:
                options = [o for o in options if valid(o[3])]
            if options:
                break
        if not options:
            break
        _, _, name, trial, grown = min(options, key=lambda o: (o[0], o[1], o[2]))
        values = trial
        rungs.append(Rung(tuple(sorted(values.items())), grown, name))
    return rungs
