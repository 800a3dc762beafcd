"""Which sizes of a traced call are shared, and which may change: templates and symbols.

Every tensor dimension and integer argument of a call is an *atom*. Atoms that hold the same
value in every traced call of one structure are one *symbol* (``n_elements == x.shape[0]``: one
size); an atom that equals the product of a contiguous run of another tensor's dimensions in every
call is *derived* (``n_elements == x.numel()``, a row count ``M == B * S``) and follows its factors.
More traced calls make this sharper: two sizes that differ in one call are never merged.

A symbol's kind says whether the generator may change it:
- free: changes freely (odd shapes, performance scaling);
- block_following: a constexpr block size follows it (``BLOCK = next_power_of_2(n)``): free, but
  scaled last, since the block (registers, shared memory) grows with it;
- tied: equals a constexpr of the launches in every call (a head dimension, a fixed block): kept;
- pinned: an index tensor whose data is kept depends on it: kept;
- lone: an integer argument that sizes nothing else (a count, a seed): kept;
- aligned: the original refused every odd value but took the double: scaled by doubling only;
- rejected: the original refused every other value tried: kept.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Iterator

from .model import ArgNode, Symbol, TracedCall, TracedSeq, TracedTensor, TracedValue

Path = tuple            # ("a", 0, 1) positional arg 0, item 1; ("k", "n"); ("r", ...) return value


@dataclass(frozen=True)
class Atom:
    path: Path
    axis: int | None    # None: an integer leaf itself


@dataclass(frozen=True)
class Derived:
    """``atoms`` equal the product of ``factors`` (symbol names)."""

    factors: tuple[str, ...]


@dataclass(frozen=True)
class Template:
    """Calls of one function with one structure, and the symbols their sizes share."""

    id: str
    function: str
    calls: tuple[TracedCall, ...]
    symbols: tuple[Symbol, ...]
    atom_symbol: tuple[tuple[Atom, str], ...]     # base symbols
    atom_derived: tuple[tuple[Atom, Derived], ...]
    names: tuple[tuple[Path, str], ...]           # readable leaf names

    def symbol(self, name: str) -> Symbol:
        for s in self.symbols:
            if s.name == name:
                return s
        raise KeyError(name)

    def leaf_name(self, path: Path) -> str:
        return dict(self.names).get(path, "/".join(str(p) for p in path))


def leaves(call: TracedCall, with_returns: bool = True) -> Iterator[tuple[Path, ArgNode]]:
    def walk(path: Path, node: ArgNode) -> Iterator[tuple[Path, ArgNode]]:
        if isinstance(node, TracedSeq):
            for i, item in enumerate(node.items):
                yield from walk(path + (i,), item)
        else:
            yield path, node

    for i, a in enumerate(call.args):
        yield from walk(("a", i), a)
    for k, v in call.kwargs:
        yield from walk(("k", k), v)
    if with_returns and call.returns is not None:
        yield from walk(("r",), call.returns)


def _structure(call: TracedCall) -> tuple:
    out = []
    for path, node in leaves(call):
        if isinstance(node, TracedTensor):
            out.append((path, "t", node.dtype, len(node.shape)))
        elif isinstance(node, TracedValue):
            out.append((path, node.kind))
    return (call.function, tuple(out))


def _is_int(node: ArgNode) -> bool:
    return isinstance(node, TracedValue) and node.kind == "int"


def _atoms(call: TracedCall) -> dict[Atom, int]:
    out: dict[Atom, int] = {}
    for path, node in leaves(call):
        if isinstance(node, TracedTensor):
            for axis, d in enumerate(node.shape):
                out[Atom(path, axis)] = int(d)
        elif _is_int(node) and path[0] != "r":
            out[Atom(path, None)] = int(node.value)  # type: ignore[arg-type]
    return out


def _next_pow2(n: int) -> int:
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def _leaf_names(call: TracedCall, params: tuple[str, ...]) -> dict[Path, str]:
    names = {}
    for path, _ in leaves(call):
        if path[0] == "a":
            i = path[1]
            head = params[i] if i < len(params) else f"arg{i}"
        elif path[0] == "k":
            head = str(path[1])
        else:
            head = "return"
        names[path] = head + "".join(f"[{p}]" for p in path[2 if path[0] != "r" else 1:])
    return names


def build_templates(calls: tuple[TracedCall, ...], params: dict[str, tuple[str, ...]]) -> list[Template]:
    """Group ``calls`` by structure and name their shared sizes (see the module docstring)."""
    groups: dict[tuple, list[TracedCall]] = {}
    for c in calls:
        groups.setdefault(_structure(c), []).append(c)
    templates = []
    for n, (key, members) in enumerate(groups.items()):
        fn = key[0]
        templates.append(_template(f"{fn}#{n + 1}", fn, tuple(members), params.get(fn, ())))
    return templates


def _template(tid: str, function: str, calls: tuple[TracedCall, ...], params: tuple[str, ...]) -> Template:
    per_call = [_atoms(c) for c in calls]
    atoms = list(per_call[0])
    vectors = {a: tuple(pc.get(a, -1) for pc in per_call) for a in atoms}
    names = _leaf_names(calls[0], params)
    config = _config_names(calls)

    # 1. group atoms by their values across all calls; small constants stay constants, and so do
    #    integer arguments that configure the kernel (BLOCK_SIZE passed through to a constexpr)
    by_vector: dict[tuple, list[Atom]] = {}
    for a in atoms:
        if a.axis is None and _is_config(names.get(a.path, ""), config):
            continue
        if max(vectors[a]) >= 2:
            by_vector.setdefault(vectors[a], []).append(a)

    def atom_name(a: Atom) -> str:
        leaf = names.get(a.path, str(a.path))
        return leaf if a.axis is None else f"{leaf}.{a.axis}"

    def group_name(members: list[Atom]) -> str:
        ints = [m for m in members if m.axis is None]
        return atom_name(ints[0] if ints else members[0])

    groups = sorted(by_vector.items(), key=lambda kv: (max(kv[0]), atom_name(kv[1][0])))
    group_names: dict[tuple, str] = {}
    used: set[str] = set()
    for vec, members in groups:
        name = group_name(members)
        while name in used:
            name += "'"
        used.add(name)
        group_names[vec] = name

    # 2. derived groups: the product of a contiguous run of one tensor's dims, in every call
    #    (only where it is more than a coincidence of round numbers: an integer argument such as
    #    n_elements, or a tensor holding as many elements as the source tensor: a reshape)
    tensors = [(p, n) for p, n in leaves(calls[0]) if isinstance(n, TracedTensor)]
    numels = {p: tuple(_prod(pc.get(Atom(p, ax), 0) for ax in range(len(n.shape))) for pc in per_call)
              for p, n in tensors}
    derived: dict[tuple, Derived] = {}
    base_vectors = set()
    for vec, members in groups:
        found = None
        if sum(1 for v in vec if v >= 2) >= 1:
            member_paths = {m.path for m in members}
            has_int = any(m.axis is None for m in members)
            for path, t in tensors:
                if path in member_paths or len(t.shape) < 2:
                    continue
                if not has_int and not any(numels.get(mp) == numels[path] for mp in member_paths):
                    continue
                for lo in range(len(t.shape)):
                    for hi in range(lo + 2, len(t.shape) + 1):
                        run = [Atom(path, ax) for ax in range(lo, hi)]
                        run_vecs = [vectors.get(r) for r in run]
                        if any(rv is None for rv in run_vecs):
                            continue
                        if sum(1 for rv in run_vecs if max(rv) >= 2) < 2:
                            continue
                        if not all(_prod(rv[i] for rv in run_vecs) == vec[i] for i in range(len(vec))):
                            continue
                        if not all(max(rv) < 2 or rv in base_vectors for rv in run_vecs):
                            continue
                        found = Derived(tuple(group_names[rv] for rv in run_vecs if max(rv) >= 2))
                        break
                    if found:
                        break
                if found:
                    break
        if found:
            derived[vec] = found
        else:
            base_vectors.add(vec)

    # 3. kinds of the base symbols, from the launches' constexprs
    constexpr_runs = [_single_constexprs(c) for c in calls]
    runtime_args = [_runtime_ints(c) for c in calls]
    has_tensor_input = any(isinstance(n, TracedTensor) and p[0] != "r" for p, n in leaves(calls[0]))
    symbols = []
    atom_symbol: list[tuple[Atom, str]] = []
    atom_derived: list[tuple[Atom, Derived]] = []
    for vec, members in groups:
        name = group_names[vec]
        places = tuple(atom_name(m) for m in members)
        if vec in derived:
            atom_derived += [(m, derived[vec]) for m in members]
            continue
        atom_symbol += [(m, name) for m in members]
        rep = vec[0]
        kind, why = _kind(vec, constexpr_runs, runtime_args)
        if kind == "free" and all(m.axis is None for m in members) and has_tensor_input:
            kind, why = "lone", "an integer argument that matches no tensor size: kept as traced"
        elif kind == "free" and all(m.path[0] == "r" for m in members) and has_tensor_input:
            # a size only the return value has: the call computes it from its inputs, a case
            # cannot set it (fp4_to_bf16's output is twice its packed input: scaling "return.0"
            # grew the estimated bytes 4x while the call stayed the same, 256 MB "in 4 us")
            kind, why = "output", "only in the return value: follows from the inputs"
        symbols.append(Symbol(name, rep, kind, why, places))
    return Template(tid, function, calls, tuple(symbols), tuple(atom_symbol), tuple(atom_derived),
                    tuple(names.items()))


_CONFIG_WORDS = ("block", "num_warps", "num_stages", "group_size", "split_k", "num_ctas")


def _config_names(calls: tuple[TracedCall, ...]) -> set[str]:
    """Lower-case names of the constexprs and launch options the calls' kernels received."""
    out = set()
    for c in calls:
        for launch in c.launches:
            out |= {n.lower() for n, _ in launch.constexprs}
            out |= {n.lower() for n, _ in launch.options}
    return out


def _is_config(leaf: str, config: set[str]) -> bool:
    name = leaf.split("[")[0].lower()
    return name in config or any(w in name for w in _CONFIG_WORDS)


def _prod(values) -> int:
    out = 1
    for v in values:
        out *= v
    return out


def _single_constexprs(call: TracedCall) -> dict[tuple[str, str], int]:
    """(kernel, name) -> value for integer constexprs that took one value during the call.

    A constexpr with several values in one call is an autotuner trying configs: no evidence.
    """
    seen: dict[tuple[str, str], set] = {}
    for launch in call.launches:
        for name, value in launch.constexprs:
            if isinstance(value, int) and not isinstance(value, bool) and value >= 2:
                seen.setdefault((launch.kernel, name), set()).add(value)
    return {k: next(iter(v)) for k, v in seen.items() if len(v) == 1}


def _runtime_ints(call: TracedCall) -> dict[int, list[str]]:
    out: dict[int, list[str]] = {}
    for launch in call.launches:
        for name, node in launch.args:
            if _is_int(node):
                out.setdefault(int(node.value), []).append(f"{launch.kernel}.{name}")  # type: ignore[arg-type]
    return out


def _kind(vec: tuple, constexpr_runs: list[dict], runtime_args: list[dict]) -> tuple[str, str]:
    launched = [i for i, run in enumerate(constexpr_runs) if run]
    distinct = len({vec[i] for i in range(len(vec))})
    if launched:
        keys = set(constexpr_runs[launched[0]])
        for i in launched[1:]:
            keys &= set(constexpr_runs[i])
        for key in sorted(keys):
            equal = all(constexpr_runs[i][key] == vec[i] for i in launched)
            pow2 = all(constexpr_runs[i][key] == _next_pow2(vec[i]) for i in launched)
            label = f"{key[0]}.{key[1]}"
            if equal and distinct == 1:
                return "tied", f"equals constexpr {label} = {vec[0]} in every launch: kept"
            if equal or pow2:
                return "block_following", f"constexpr {label} follows it (next power of two)"
    passed = [runtime_args[i].get(vec[i], []) for i in range(len(vec))]
    if passed and passed[0]:
        return "free", f"passed to the kernel as {passed[0][0]}"
    return "free", "a tensor size"


def pin(template: Template, names: set[str], why: str) -> Template:
    """``template`` with the named symbols pinned (an index tensor's data depends on them)."""
    symbols = tuple(replace(s, kind="pinned", why=why) if s.name in names and s.kind != "tied" else s
                    for s in template.symbols)
    return replace(template, symbols=symbols)


def size_of(template: Template, values: dict[str, int], call: TracedCall,
            atom: Atom) -> int:
    """The value of ``atom`` when the base symbols take ``values`` (others: as in ``call``)."""
    base = dict(template.atom_symbol)
    if atom in base:
        name = base[atom]
        if name in values:
            return values[name]
    derived = dict(template.atom_derived)
    if atom in derived:
        if any(f in values for f in derived[atom].factors):
            current = {s.name: s.value for s in template.symbols}
            traced = _atoms(call)
            # a factor keeps its traced value in ``call`` unless it is given
            out = 1
            for f in derived[atom].factors:
                out *= values.get(f, _symbol_value(template, f, traced, current))
            return out
    return _atoms(call).get(atom, 0)


def _symbol_value(template: Template, name: str, traced: dict[Atom, int], current: dict[str, int]) -> int:
    for atom, sym in template.atom_symbol:
        if sym == name and atom in traced:
            return traced[atom]
    return current.get(name, 1)


def symbol_values(template: Template, call: TracedCall) -> dict[str, int]:
    """The base symbols' values in one traced call."""
    traced = _atoms(call)
    out = {}
    for atom, name in template.atom_symbol:
        if name not in out and atom in traced:
            out[name] = traced[atom]
    return out
