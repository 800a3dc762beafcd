"""Write ``num_warps=``/``num_stages=`` at one launch call by text positions from ``ast``.

The config search writes launch options into dozens of candidates a round; through libcst
(``launch_params``) each costs a whole-module rewrite, which took 1.6 s per candidate on a large
TritonBench-G file (parallel_attention, 2 shared CPU cores, 2026-11-25) and made proposing one
round take 90 s. This edits only the option's text: an existing keyword's value is replaced, a
missing one is inserted after the last argument. It handles the direct launch the config search
selects (``kernel[grid](...)``, not autotuned, options not from heuristics: its ``site_space``
checks those), ``*args`` splats included (they bind positional parameters only); beside a
``**kwargs`` splat it only replaces an option written at the call, for a missing one may hide in
the splat. Anything else -- an alias call, a call not found -- returns None, and the caller falls
back to ``launch_params``.

``scale_launch_option`` scales an option the wrapper computes (``num_warps=nw``) in place,
``min(32, nw * 2)``, so that it still follows what the wrapper's rule chose per size, where a
literal would pin one value for every size.
"""

from __future__ import annotations

import ast

from ._scale import rescale


def _launches(tree: ast.Module, kernel: str) -> list[ast.Call]:
    """``kernel[...](...)`` calls (also ``mod.kernel[...]``), in source order."""
    calls = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Subscript):
            f = node.func.value
            name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) \
                else None
            if name == kernel:
                calls.append(node)
    return sorted(calls, key=lambda c: (c.lineno, c.col_offset))


def _launch(source: str, kernel: str, ordinal: int) -> tuple[ast.Call, bytes, list[int]] | None:
    """The ``ordinal``-th launch of ``kernel``, the source's UTF-8 bytes and each line's byte
    offset in them (``ast`` columns are byte offsets); None when there is no such launch."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    calls = _launches(tree, kernel)
    if ordinal >= len(calls):
        return None
    data = source.encode("utf-8")
    starts = [0]
    for line in data.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    return calls[ordinal], data, starts


def _offset(starts: list[int], line: int, col: int) -> int:
    return starts[line - 1] + col


def write_launch_options(source: str, kernel: str, ordinal: int,
                         options: dict[str, int]) -> str | None:
    """``source`` with ``options`` (num_warps, num_stages) written at the ``ordinal``-th launch
    of ``kernel`` (source order); None when that launch is not found, or an option missing there
    would have to be added beside a ``**kwargs`` splat."""
    found = _launch(source, kernel, ordinal)
    if found is None:
        return None
    call, data, starts = found
    splat = any(k.arg is None for k in call.keywords)
    edits: list[tuple[int, int, bytes]] = []
    missing = []
    for name, value in options.items():
        kw = next((k for k in call.keywords if k.arg == name), None)
        if kw is None:
            missing.append(f"{name}={int(value)}")
            continue
        v = kw.value
        edits.append((_offset(starts, v.lineno, v.col_offset),
                      _offset(starts, v.end_lineno, v.end_col_offset), str(int(value)).encode()))
    if missing:
        if splat:
            return None
        last = max([*call.args, *call.keywords],
                   key=lambda n: (n.end_lineno, n.end_col_offset), default=None)
        if last is None:
            return None
        at = _offset(starts, last.end_lineno, last.end_col_offset)
        edits.append((at, at, (", " + ", ".join(missing)).encode()))
    for begin, end, text in sorted(edits, reverse=True):
        data = data[:begin] + text + data[end:]
    out = data.decode("utf-8")
    try:
        ast.parse(out)
    except SyntaxError:
        return None
    return out


def scale_launch_option(source: str, kernel: str, ordinal: int, option: str, factor: int,
                        cap: int | None = None) -> str | None:
    """``source`` with the value of ``option`` (num_warps, num_stages) at the ``ordinal``-th
    launch of ``kernel`` scaled by ``factor`` (``transforms._scale``: 2 doubles, -2 halves, at
    most ``cap``), the expression the wrapper computes kept; None when that launch does not
    write the option, or writes it as a literal (the config search writes literals itself)."""
    found = _launch(source, kernel, ordinal)
    if found is None:
        return None
    call, data, starts = found
    kw = next((k for k in call.keywords if k.arg == option), None)
    if kw is None or isinstance(kw.value, ast.Constant):
        return None
    begin = _offset(starts, kw.value.lineno, kw.value.col_offset)
    end = _offset(starts, kw.value.end_lineno, kw.value.end_col_offset)
    text = rescale(data[begin:end].decode("utf-8"), factor, cap).encode("utf-8")
    out = (data[:begin] + text + data[end:]).decode("utf-8")
    try:
        ast.parse(out)
    except SyntaxError:
        return None
    return out


__all__ = ["scale_launch_option", "write_launch_options"]
