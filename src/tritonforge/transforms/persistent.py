"""Persistent grid: launch a few programs per SM and loop over the tiles of a 1-D grid.

    pid = tl.program_id(0)              for pid in range(tl.program_id(0), tf_num_tiles,
    ...body...                    ->                     tl.num_programs(0)):
                                            ...body...
    kernel[(T,)](args)                  kernel[(min(_tf_num_sms() * K, T),)](args, tf_num_tiles=T)

K, the programs per SM, defaults to 32 warps' worth of the launch's programs (32 // num_warps:
8 for 4 warps). One program per SM left a memory-bound row kernel with 4 warps per SM, a sixteenth
of what an H100 SM can keep in flight: dequantize_rowwise's persistent grid ran 371% slower on
its largest case and l2_norm_bwd's lost 235% on its smallest (H100, 2026-11-23).
``programs_per_sm`` sets K. The SM count is read once per device and kept: the per-launch query
cost microseconds, as much as a small kernel's whole run.

It applies only where that is the same computation: the kernel reads its program id once (as
``pid = tl.program_id(0)``, or inline, replaced by the loop variable), never reads
tl.num_programs and takes no locks. The grid has one axis, or more whose others are a literal
1 (``(n, 1, 1)``, kept as written): a tuple or a lambda, inline or through a name the launching
function assigns once before the launch; ``T`` is its first element (_tiles.py says how a lambda's
``META['BLOCK']`` is read, and why one that @triton.autotune chooses is refused).

A return would end the loop, skipping the program's later tiles, so the kernel may return only
through ``if cond: return`` directly in its body (a bare return, no else): the statements after
it move into ``if not (cond):``, which skips just the current tile; a bare return ending the body
is dropped. Other returns are a refusal. A parameter the body reassigns (``X += row * stride``,
20 TritonBench-G kernels) is copied at the top of each tile (``_tf_X = X``) and the body uses
the copy, so no change carries over to the next tile. The reason of a refusal says which
condition failed. Whether it is faster is for the timing to say: it pays off where launch and
tail effects dominate (many small tiles).
"""

from __future__ import annotations

from typing import Any

import libcst as cst

from ..analyze import KernelInfo, SourceAnalysis, analyze_source
from ..errors import TransformError
from ._cst import (
    RenameNames,
    append_arg,
    append_param,
    dotted,
    edit_kernel,
    kw_arg,
    launch_calls,
    replace,
)
from ._tiles import tiles_of
from .base import Applicability, Transform, alias_refusal, candidate_kernels, first_no

TILES = "tf_num_tiles"
LOOP_VAR = "_tf_pid"       # the loop variable when the program id is read inline
SMS_HELPER = "_tf_num_sms"
COPY_PREFIX = "_tf_"       # per-tile copy of a parameter the body reassigns
_HELPER_SRC = f'''

def {SMS_HELPER}(_known={{}}):
    """Streaming multiprocessors of the current GPU, read once per device (persistent grids
    launch a few programs per SM; 4 without a GPU, under the Triton interpreter)."""
    import torch
    if not torch.cuda.is_available():
        return 4
    device = torch.cuda.current_device()
    if device not in _known:
        _known[device] = torch.cuda.get_device_properties(device).multi_processor_count
    return _known[device]
'''


def check_persistent(analysis: SourceAnalysis, k: KernelInfo) -> str | None:
    pid = [v for v in k.pid_vars if v.axis == 0]
    if k.program_id_calls != (0,):
        return f"{k.name} does not read tl.program_id(0) exactly once (program ids read: " \
               f"axes {list(k.program_id_calls)})"
    if pid and pid[0].reassigned:
        return f"{k.name} reassigns {pid[0].name}"
    if LOOP_VAR in k.body_names:
        return f"{k.name} already uses {LOOP_VAR}"
    if k.other_returns:
        return f"{k.name} returns early other than by `if cond: return` directly in its body " \
               f"(a bare return, no else): in a persistent loop that would skip later tiles"
    if k.uses_num_programs:
        return f"{k.name} reads tl.num_programs"
    if {"atomic_cas", "atomic_xchg"} & set(k.atomics):
        return f"{k.name} takes a lock (atomic_cas/xchg)"
    taken = [COPY_PREFIX + p for p in k.reassigned_params if COPY_PREFIX + p in k.body_names]
    if taken:
        return f"{k.name} already uses {taken[0]}"
    if k.has_varargs or TILES in k.param_names:
        return f"{k.name} takes *args/**kwargs or already has {TILES}"
    sites = analysis.sites_of(k.name)
    if not sites:
        return f"{k.name} is not launched in this file"
    first_default = next((p.index for p in k.params if p.default is not None), len(k.params))
    for s in sites:
        shared = alias_refusal(s, "the persistent grid and tile count")
        if shared:
            return shared
        tiles = tiles_of(s, k)
        if tiles.count is None:
            return f"site {s.index}: {tiles.reason}"
        if s.has_star_args:
            return f"site {s.index} passes *args/**kwargs"
        if any(a.position is not None and a.position >= first_default for a in s.args):
            return f"site {s.index} passes parameters with defaults by position"
    if "torch" not in analysis.module_names and SMS_HELPER not in analysis.functions:
        return "the file does not import torch (needed to count SMs)"
    return None


class PersistentGrid(Transform):
    name = "persistent_grid"
    summary = "1-D grid over tiles -> a few programs per SM looping over the tiles"
    param_names = ("kernel", "programs_per_sm")

    def _targets(self, analysis: SourceAnalysis, kernel: str | None):
        out, reasons = [], []
        for k in candidate_kernels(analysis, kernel):
            why = check_persistent(analysis, k)
            if why:
                reasons.append(why)
            else:
                out.append(k)
        return out, reasons

    def _applies(self, analysis: SourceAnalysis, kernel: str | None = None,
                 **_: Any) -> Applicability:
        targets, reasons = self._targets(analysis, kernel)
        if not targets:
            return first_no(reasons, "launched kernel")
        return Applicability.yes([k.name for k in targets], "; ".join(reasons))

    def _apply(self, source: str, analysis: SourceAnalysis, kernel: str | None = None,
               programs_per_sm: int | None = None, **_: Any) -> str:
        if programs_per_sm is not None and (isinstance(programs_per_sm, bool)
                                            or not isinstance(programs_per_sm, int)
                                            or programs_per_sm < 1):
            raise TransformError(f"{self.name}: programs_per_sm={programs_per_sm!r} must be a "
                                 "positive integer")
        targets, _ = self._targets(analysis, kernel)
        tl = "tl" if "tl" in analysis.module_names else "triton.language"
        for k in sorted(targets, key=lambda k: -k.span.line):
            pid = next((v for v in k.pid_vars if v.axis == 0), None)

            def loop(fn: cst.FunctionDef, pid=pid) -> cst.FunctionDef:
                body = list(fn.body.body)
                if pid is not None:         # pid = tl.program_id(0): the loop takes its place
                    at = next(i for i, s in enumerate(body)
                              if isinstance(s, cst.SimpleStatementLine) and len(s.body) == 1
                              and isinstance(s.body[0], cst.Assign)
                              and isinstance(s.body[0].targets[0].target, cst.Name)
                              and s.body[0].targets[0].target.value == pid.name)
                    before, inside, var = body[:at], body[at + 1:], pid.name
                    header, leading = body[at].trailing_whitespace, body[at].leading_lines
                else:                       # read inline: the loop variable replaces the call
                    doc = 1 if body and _is_docstring(body[0]) else 0
                    before, var = body[:doc], LOOP_VAR
                    inside = [s.visit(_ProgramIdToName(var)) for s in body[doc:]]
                    header, leading = cst.TrailingWhitespace(), inside[0].leading_lines
                    inside[0] = inside[0].with_changes(leading_lines=())
                # `if c: return` -> `if not (c): <the rest>` (a tile left empty: pass)
                inside = _unguard(inside) or [cst.parse_statement("pass\n")]
                if k.reassigned_params:     # each tile starts from the parameters as passed
                    names = set(k.reassigned_params)
                    inside = [st.visit(_Rename(names)) for st in inside]
                    copies = [cst.parse_statement(f"{COPY_PREFIX}{n} = {n}\n")
                              for n in k.reassigned_params]
                    copies[0] = copies[0].with_changes(leading_lines=inside[0].leading_lines)
                    inside = copies + [inside[0].with_changes(leading_lines=())] + inside[1:]
                head = cst.parse_statement(
                    f"for {var} in range({tl}.program_id(0), {TILES}, "
                    f"{tl}.num_programs(0)):\n    pass\n")
                head = head.with_changes(       # the pid line's comments move to the loop
                    body=head.body.with_changes(body=inside, header=header),
                    leading_lines=leading)
                fn = fn.with_changes(body=fn.body.with_changes(body=before + [head]))
                return append_param(fn, cst.Param(name=cst.Name(TILES)), before_defaults=True)[0]

            source = edit_kernel(source, k, {}, whole=loop)
        return self._launches(source, analysis, targets, programs_per_sm)

    def _launches(self, source: str, analysis: SourceAnalysis, kernels: list[KernelInfo],
                  programs_per_sm: int | None = None) -> str:
        fresh = analyze_source(source)      # the kernels changed above; launches did not move
        module = cst.parse_module(source)
        calls = launch_calls(module, fresh)
        edits: dict[int, Any] = {}
        names = {k.name for k in kernels}
        for s in fresh.launch_sites:
            if s.kernel not in names:
                continue
            call = calls[s.index]
            tiles = tiles_of(s, fresh.kernel(s.kernel))
            if tiles.count is None:         # checked before the kernels changed
                raise TransformError(f"{self.name}: site {s.index}: {tiles.reason}",
                                     hint="report this with the source file")

            per_sm = programs_per_sm or default_programs_per_sm(s.knobs.num_warps if s.knobs else None)
            sms = f"{SMS_HELPER}()" + (f" * {per_sm}" if per_sm > 1 else "")

            def edit(c: cst.Call, tiles=tiles, sms=sms) -> cst.Call:
                sub = c.func
                grid = cst.parse_expression(tiles.grid(sms))
                elem = cst.SubscriptElement(slice=cst.Index(value=grid))
                args = append_arg(list(c.args), kw_arg(TILES, cst.parse_expression(tiles.count)))
                return c.with_changes(func=sub.with_changes(slice=[elem]), args=args)

            edits[id(call)] = edit
        if SMS_HELPER not in fresh.functions:
            edits[id(module)] = _add_helper
        return replace(module, edits).code


WARPS_PER_SM = 32      # the programs a persistent grid keeps per SM: this many warps' worth


def default_programs_per_sm(num_warps: int | None) -> int:
    """Programs per SM for a launch of ``num_warps`` warps (4 when not a literal): half of the
    64 warps an sm_80/sm_90 SM holds, which registers and shared memory usually allow; a program
    that cannot be resident waits for a slot, it is never wrong."""
    warps = num_warps if isinstance(num_warps, int) and num_warps > 0 else 4
    return max(1, WARPS_PER_SM // warps)


def _add_helper(module: cst.Module) -> cst.Module:
    """Insert the SM-count helper after the last top-level import."""
    body = list(module.body)
    last_import = -1
    for i, stmt in enumerate(body):
        if isinstance(stmt, cst.SimpleStatementLine) and any(
                isinstance(s, (cst.Import, cst.ImportFrom)) for s in stmt.body):
            last_import = i
    helper = cst.parse_module(_HELPER_SRC).body
    fn = helper[0].with_changes(leading_lines=[cst.EmptyLine(), cst.EmptyLine()])
    body.insert(last_import + 1, fn)
    return module.with_changes(body=body)


def _is_bare_return(stmt: cst.CSTNode) -> bool:
    small = stmt.body if isinstance(stmt, cst.SimpleStatementLine) else [stmt]
    return len(small) == 1 and isinstance(small[0], cst.Return) and small[0].value is None


def _is_guard(stmt: cst.BaseStatement) -> bool:
    """``if cond: return`` (a bare return, no else), as the analysis counts return_guards."""
    return isinstance(stmt, cst.If) and stmt.orelse is None and len(stmt.body.body) == 1 \
        and _is_bare_return(stmt.body.body[0])


def _unguard(stmts: list[cst.BaseStatement]) -> list[cst.BaseStatement]:
    """Statements after a guard move into ``if not (cond):``: in the persistent loop a return
    would end every later tile of the program; this skips only the current one. A bare return
    ending the statements does nothing and is dropped."""
    if stmts and _is_bare_return(stmts[-1]):
        stmts = stmts[:-1]
    for i, stmt in enumerate(stmts):
        if not _is_guard(stmt):
            continue
        rest = _unguard(stmts[i + 1:])
        if not rest:                        # nothing after it: the guard skips nothing
            return stmts[:i]
        test = stmt.test
        if not test.lpar:
            test = test.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        header = stmt.body.header if isinstance(stmt.body, cst.IndentedBlock) \
            else cst.TrailingWhitespace()
        negated = cst.UnaryOperation(operator=cst.Not(), expression=test)
        return stmts[:i] + [stmt.with_changes(
            test=negated, whitespace_before_test=cst.SimpleWhitespace(" "),
            body=cst.IndentedBlock(body=rest, header=header))]
    return stmts


def _is_docstring(stmt: cst.BaseStatement) -> bool:
    return isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and \
        isinstance(stmt.body[0], cst.Expr) and isinstance(stmt.body[0].value,
                                                          (cst.SimpleString, cst.ConcatenatedString))


class _ProgramIdToName(cst.CSTTransformer):
    def __init__(self, name: str):
        super().__init__()
        self.name = name

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        if dotted(original.func).split(".")[-1] == "program_id":
            return cst.Name(self.name, lpar=updated.lpar, rpar=updated.rpar)
        return updated



class _Rename(RenameNames):
    """Rename the parameters ``names`` to their per-tile copies."""

    def __init__(self, names: set[str]):
        super().__init__()
        self.names = names

    def new_name(self, name: str) -> str | None:
        return COPY_PREFIX + name if name in self.names else None
