"""The case spec: a small TOML file that says how to call a kernel file's entry function.

Format (README.md, "Writing a spec", has the user-facing version)::

    entry = "add_wrapper"        # default entry function for every case
    seeds = 3                    # seeds per correctness case (optional)
    reference = "torch_add"      # optional: a function in the kernel file (or "file.py:func")
                                 # computing the expected result in plain PyTorch

    [tolerance.float32]          # optional per-dtype overrides
    atol = 1e-4
    rtol = 1e-4
    rel_norm = 2e-4

    [[case]]
    id = "odd"                   # optional; default "<role>-<n>"
    role = "correctness"         # or "performance" (timed, and checked too)
    args = [{ tensor = [1000], dtype = "float32" }, { tensor = [1000], dtype = "float32" }]
    kwargs = { BLOCK_SIZE = 128 }

A tensor argument is an inline table with ``tensor = [shape...]`` and the optional keys of
``model.TensorSpec`` (dtype, init, low, high, value, scale, offset, layout, requires_grad, and
``values`` for ``init = "values"``: the flattened data). ``{ none = true }`` is Python's None
(TOML has no null). Any other value is passed as it is; a TOML array of values becomes a tuple.
"""

from __future__ import annotations

import difflib
import tomllib
from dataclasses import fields
from pathlib import Path
from typing import Any

from ..errors import SpecError
from ..model import Case, CaseRole, SpecCall, TensorSpec, Tolerance

_TENSOR_KEYS = {f.name for f in fields(TensorSpec)} - {"shape"}
_DTYPES = {"float16", "bfloat16", "float32", "float64", "int8", "int16", "int32", "int64",
           "uint8", "bool", "float8_e4m3fn", "float8_e5m2"}
_INITS = {"randn", "rand", "randint", "zeros", "ones", "full", "arange", "empty", "values"}
_TOP_KEYS = {"entry", "seeds", "reference", "tolerance", "case"}
_CASE_KEYS = {"id", "role", "entry", "args", "kwargs", "seeds"}


def _check_keys(table: dict, known: set[str], where: str, origin: str) -> None:
    """Refuse a key the spec does not know, naming the likeliest intended one: a typo
    (``sedes = 3``, ``argz = [...]``) would otherwise be silently ignored and the default used."""
    for key in table:
        if key in known:
            continue
        close = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.5)
        fix = f"did you mean {close[0]!r}?" if close else "known keys: " + ", ".join(sorted(known))
        raise SpecError(f"{where}unknown key {key!r}", location=origin, hint=fix)


class SpecDocument:
    """A parsed spec: entry, seeds, optional reference, tolerance overrides and cases."""

    def __init__(self, entry: str, cases: tuple[Case, ...], seeds: int,
                 reference: str | None, tolerances: tuple[tuple[str, Tolerance], ...]):
        self.entry = entry
        self.cases = cases
        self.seeds = seeds
        self.reference = reference
        self.tolerances = tolerances


def _parse_arg(value: Any, where: str) -> Any:
    if isinstance(value, dict) and set(value) == {"none"} and value["none"] is True:
        return None
    if isinstance(value, dict):
        if "tensor" not in value:
            raise SpecError(f"{where}: a table argument must have a 'tensor' key (its shape)",
                            hint='write { tensor = [1024], dtype = "float32" }')
        unknown = set(value) - _TENSOR_KEYS - {"tensor"}
        if unknown:
            close = difflib.get_close_matches(sorted(unknown)[0], sorted(_TENSOR_KEYS | {"tensor"}),
                                              n=1, cutoff=0.5)
            raise SpecError(f"{where}: unknown tensor keys {sorted(unknown)}",
                            hint=(f"did you mean {close[0]!r}? " if close else "")
                            + "known keys: tensor, " + ", ".join(sorted(_TENSOR_KEYS)))
        shape = value["tensor"]
        if not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape):
            raise SpecError(f"{where}: tensor shape must be a list of non-negative integers, "
                            f"not {shape!r}")
        kw = {k: v for k, v in value.items() if k != "tensor"}
        if kw.get("dtype", "float32") not in _DTYPES:
            raise SpecError(f"{where}: unknown dtype {kw['dtype']!r}",
                            hint="one of " + ", ".join(sorted(_DTYPES)))
        if kw.get("init", "randn") not in _INITS:
            raise SpecError(f"{where}: unknown init {kw['init']!r}",
                            hint="one of " + ", ".join(sorted(_INITS)))
        if kw.get("init") == "values" or "values" in kw:
            kw["values"] = _parse_values(kw.get("values"), shape, where)
        return TensorSpec(shape=tuple(shape), **kw)
    if isinstance(value, list):
        return tuple(_parse_arg(v, f"{where}[{i}]") for i, v in enumerate(value))
    return value


def _parse_values(values: Any, shape: list[int], where: str) -> tuple:
    numel = 1
    for d in shape:
        numel *= d
    if not isinstance(values, list) or not all(isinstance(v, (int, float, bool)) for v in values):
        raise SpecError(f"{where}: init = \"values\" needs values = [numbers...], the flattened data",
                        hint=f"give {numel} numbers, or use another init")
    if len(values) != numel:
        raise SpecError(f"{where}: values holds {len(values)} numbers but the shape {shape} has "
                        f"{numel} elements", hint="give one number per element, row-major")
    return tuple(values)


def parse_spec(text: str, origin: str = "<spec>") -> SpecDocument:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(f"not valid TOML: {exc}", location=origin) from None
    _check_keys(data, _TOP_KEYS, "", origin)
    entry = data.get("entry")
    raw_cases = data.get("case", [])
    if not isinstance(raw_cases, list) or not raw_cases:
        raise SpecError("the spec has no cases", location=origin,
                        hint="add at least one [[case]] table with args = [...]")
    seeds = int(data.get("seeds", 3))
    if seeds < 1:
        raise SpecError(f"seeds must be at least 1, not {seeds}", location=origin)
    cases: list[Case] = []
    counters = {"correctness": 0, "performance": 0}
    seen: set[str] = set()
    for n, raw in enumerate(raw_cases):
        where = f"{origin}: case {n + 1}"
        if isinstance(raw, dict):
            _check_keys(raw, _CASE_KEYS, f"case {n + 1}: ", origin)
        role_name = raw.get("role", "correctness")
        if role_name not in counters:
            raise SpecError(f"{where}: role must be 'correctness' or 'performance', "
                            f"not {role_name!r}")
        case_entry = raw.get("entry", entry)
        if not case_entry:
            raise SpecError(f"{where}: no entry function", hint='set entry = "func" at the top')
        counters[role_name] += 1
        case_id = str(raw.get("id", f"{role_name[:4]}-{counters[role_name]}"))
        if case_id in seen:
            raise SpecError(f"{where}: duplicate case id {case_id!r}")
        seen.add(case_id)
        args = tuple(_parse_arg(a, f"{where} arg {i}") for i, a in enumerate(raw.get("args", [])))
        kwargs = tuple((k, _parse_arg(v, f"{where} kwarg {k}"))
                       for k, v in sorted(raw.get("kwargs", {}).items()))
        role = CaseRole(role_name)
        case_seeds = tuple(range(seeds)) if role is CaseRole.CORRECTNESS else (0,)
        label = ", ".join(a.describe() if isinstance(a, TensorSpec) else repr(a) for a in args)
        cases.append(Case(id=case_id, role=role, recipe=SpecCall(case_entry, args, kwargs),
                          seeds=tuple(raw.get("seeds", case_seeds)), label=label))
    tolerances = []
    for dtype, tol in sorted(data.get("tolerance", {}).items()):
        _check_keys({dtype: None}, _DTYPES, "tolerance: ", origin)
        if isinstance(tol, dict):
            _check_keys(tol, {"atol", "rtol", "rel_norm"}, f"tolerance.{dtype}: ", origin)
        try:
            tolerances.append((dtype, Tolerance(float(tol["atol"]), float(tol["rtol"]),
                                                float(tol["rel_norm"]))))
        except (KeyError, TypeError, ValueError):
            raise SpecError(f"tolerance.{dtype} needs numbers atol, rtol and rel_norm",
                            location=origin) from None
    return SpecDocument(entry or cases[0].recipe.entry, tuple(cases), seeds,
                        data.get("reference"), tuple(tolerances))


def load_spec(path: str | Path) -> SpecDocument:
    p = Path(path)
    if not p.exists():
        raise SpecError(f"spec file {p} does not exist",
                        hint="write one (README: 'Writing a spec') or run `tritonforge testgen`")
    return parse_spec(p.read_text(encoding="utf-8"), origin=str(p))


# ---------------------------------------------------------------- writing (for testgen)

def _toml_value(value: Any) -> str:
    if isinstance(value, TensorSpec):
        parts = [f"tensor = [{', '.join(str(d) for d in value.shape)}]"]
        default = TensorSpec(shape=())
        for name in sorted(_TENSOR_KEYS):
            v = getattr(value, name)
            if v != getattr(default, name):
                parts.append(f"{name} = {_toml_value(v)}")
        return "{ " + ", ".join(parts) + " }"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, (tuple, list)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if value is None:
        return "{ none = true }"
    raise SpecError(f"cannot write {type(value).__name__} value {value!r} in a spec")


def write_spec(entry: str, cases: tuple[Case, ...], seeds: int = 3,
               comments: tuple[str, ...] = (),
               case_comments: tuple[tuple[str, tuple[str, ...]], ...] = ()) -> str:
    """Render SpecCall cases as a spec file that ``parse_spec`` reads back to the same cases.

    ``case_comments`` maps a case id to comment lines written above its table (testgen says
    there where each case comes from).
    """
    notes = dict(case_comments)
    out = [f"# {c}" if c else "#" for c in comments]
    out += [f'entry = "{entry}"', f"seeds = {seeds}", ""]
    for case in cases:
        if not isinstance(case.recipe, SpecCall):
            raise SpecError(f"case {case.id} is not a spec call and cannot be written as a spec")
        out += [f"# {line}" for line in notes.get(case.id, ())]
        out.append("[[case]]")
        out.append(f'id = "{case.id}"')
        out.append(f'role = "{case.role.value}"')
        if case.recipe.entry != entry:
            out.append(f'entry = "{case.recipe.entry}"')
        out.append(f"args = {_toml_value(case.recipe.args)}")
        if case.recipe.kwargs:
            out.append("kwargs = { " + ", ".join(f"{k} = {_toml_value(v)}"
                                                  for k, v in case.recipe.kwargs) + " }")
        out.append("")
    return "\n".join(out)
