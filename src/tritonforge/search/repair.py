"""Fault-aware repair: send a failed candidate back until it works or the attempts run out.

A candidate that fails to compile, crashes or computes the wrong thing is not dropped at once.
``repair_candidate`` tries, for each attempt, first the *rule repairs* that match the error (cheap,
no model: resource limits are the commonest failure of faster variants and have mechanical
fixes), then each proposer's ``repair()`` in order (the LLM, when configured). Every fix is
evaluated by the caller's ``evaluate`` (the loop's worker in production, a stub in tests); the
next attempt starts from the latest fix and its error, so the feedback accumulates.

Rule repairs edit literals in the source text, located with ``ast`` so that only the literal
changes and the user's formatting stays (the libcst transform library in ``transforms/`` was not
there when this was written; these edits need only positions, which ``ast`` gives):

    shared memory exceeded (OutOfResources)  -> fewer-stages, then smaller-tiles
    too many registers / resources for launch -> fewer-warps, then smaller-tiles
    "arange's range must be a power of 2"    -> pow2-blocks
    tl.dot shapes "must be >= 16" / "K >= 16" -> dot-min-16 (the minimum the error names)
    "num_warps must be a power of 2"          -> pow2-warps

A shared-memory failure where no ``num_stages`` is written at all (Triton's default of 3 stages
multi-buffers the loops) gets ``num_stages=2`` written at the launch sites of the kernels that
loop over loads instead (``search.repair_launch``, through ``transforms.launch_params``).

Literals edited: ``num_stages=`` / ``num_warps=`` keywords (launches, ``triton.Config``),
block sizes (names like BLOCK*, *_BLOCK*, TILE*, BM/BN/BK, and any constexpr the analysis finds
acting as a tile size: stepping a loop or tiling a program id) as keywords, ``triton.Config`` dict entries,
assignments and function defaults.
"""

from __future__ import annotations

import ast
import logging
import re
from dataclasses import dataclass
from typing import Callable, Sequence

from ..analyze import analyze_source
from ..errors import ConfigError, StoreError
from ..model import Candidate, ProposalContext, RepairRequest, Status
from .proposer import Proposer
from .repair_launch import stages_at_launches

log = logging.getLogger(__name__)

Evaluate = Callable[[Candidate], "tuple[Status, str]"]

_SHARED = re.compile(r"out of resource: shared memory|OutOfResources.*shared|shared memory.*"
                     r"(exceed|Required)|Required: \d+, Hardware limit|too much shared data",
                     re.IGNORECASE)
_REGISTERS = re.compile(r"too many resources requested for launch|out of resource: "
                        r"(registers|threads)|LAUNCH_OUT_OF_RESOURCES|too many registers|"
                        r"uses too much register", re.IGNORECASE)
_POW2 = re.compile(r"must be a power of 2|power of two", re.IGNORECASE)
# tl.dot's shape minimum: older Triton "... must be >= 16!"; Triton 3.6 (sm_90 compile, checked
# here): "Input shapes should have M >= 1, N >= 1 and K >= 16" (K >= 32 for 8-bit operands)
_DOT16 = re.compile(r"must be >= 16|Input shapes should have M >= \d+, N >= \d+ and K >= \d+",
                    re.IGNORECASE)
_DOT_K = re.compile(r"and K >= (\d+)")
_WARPS_POW2 = re.compile(r"num_?warps must be a power of (2|two)", re.IGNORECASE)
_NO_RULES = {Status.MISMATCH, Status.CHEAT, Status.POLICY_REJECTED, Status.OK}


# ----------------------------------------------------------------------------- literal edits

@dataclass(frozen=True)
class Literal:
    """An int literal the rules may change: what it sets, where it is, and its container."""

    kind: str            # "num_warps" | "num_stages" | "block"
    name: str
    value: int
    span: tuple[int, int, int, int]    # lineno, col, end_lineno, end_col (UTF-8 byte columns)
    container: int       # id of the enclosing dict / call / function / module


def is_block_name(name: str) -> bool:
    return name.isupper() and ("BLOCK" in name or name.startswith("TILE")
                               or name in ("BM", "BN", "BK"))


def _int_const(node: ast.AST | None) -> int | None:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    return None


def _kind(name: str, tiles: frozenset[str] = frozenset()) -> str | None:
    if name in ("num_warps", "num_stages"):
        return name
    return "block" if is_block_name(name) or name in tiles else None


def tile_names(source: str) -> frozenset[str]:
    """Constexprs the analysis finds acting as tile sizes in ``source``'s kernels, whatever their
    names (``KernelInfo.block_constexprs``: a loop step, or a program-id multiplier that sizes
    something): ``CHUNK``, ``SPAN``. A ``tl.arange`` bound alone is not one: HEAD_DIM describes
    the problem, and halving it changes the result."""
    try:
        analysis = analyze_source(source)
    except Exception:  # noqa: BLE001 - an unparseable source has no literals to edit anyway
        return frozenset()
    return frozenset(n for k in analysis.kernels for n in k.block_constexprs)


def find_literals(source: str, tiles: frozenset[str] | None = None) -> list[Literal]:
    """Every editable int literal of ``source`` (empty when it does not parse). Block sizes are
    the names that look like one (``is_block_name``) and ``tiles`` (default: ``tile_names``)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    tiles = tile_names(source) if tiles is None else tiles
    found: list[Literal] = []

    def add(name: str, value_node: ast.AST | None, container: ast.AST) -> None:
        kind, value = _kind(name, tiles), _int_const(value_node)
        if kind is None or value is None:
            return
        n = value_node
        found.append(Literal(kind, name, value,
                             (n.lineno, n.col_offset, n.end_lineno, n.end_col_offset),
                             id(container)))

    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            for kw in node.keywords:
                if kw.arg:
                    add(kw.arg, kw.value, node)
        elif isinstance(node, ast.Dict):
            for k, v in zip(node.keys, node.values):
                if isinstance(k, ast.Constant) and isinstance(k.value, str):
                    add(k.value, v, node)
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 \
                and isinstance(node.targets[0], ast.Name):
            add(node.targets[0].id, node.value, tree)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            add(node.target.id, node.value, tree)
        elif isinstance(node, ast.FunctionDef):
            a = node.args
            positional = a.posonlyargs + a.args
            for arg, default in zip(positional[len(positional) - len(a.defaults):], a.defaults):
                add(arg.arg, default, node)
            for arg, default in zip(a.kwonlyargs, a.kw_defaults):
                add(arg.arg, default, node)
    return found


def apply_edits(source: str, edits: Sequence[tuple[Literal, int]]) -> str:
    """Replace each literal's text by its new value; positions are in UTF-8 bytes per line."""
    data = source.encode("utf-8")
    starts = [0]
    for line in data.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    spans = []
    for lit, new in edits:
        ln, col, end_ln, end_col = lit.span
        spans.append((starts[ln - 1] + col, starts[end_ln - 1] + end_col, str(new).encode()))
    for begin, end, text in sorted(spans, reverse=True):
        data = data[:begin] + text + data[end:]
    return data.decode("utf-8")


def _pow2_at_least(n: int) -> int:
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def _fewer_stages(lits: list[Literal]) -> list[tuple[Literal, int]]:
    return [(x, x.value // 2 if x.value >= 4 else x.value - 1)
            for x in lits if x.kind == "num_stages" and x.value > 1]


def _fewer_warps(lits: list[Literal]) -> list[tuple[Literal, int]]:
    return [(x, x.value // 2) for x in lits if x.kind == "num_warps" and x.value > 1]


def _smaller_tiles(lits: list[Literal]) -> list[tuple[Literal, int]]:
    """Halve the largest power-of-two block size (>= 32) of each container."""
    largest: dict[int, int] = {}
    for x in lits:
        if x.kind == "block" and x.value >= 32 and x.value & (x.value - 1) == 0:
            largest[x.container] = max(largest.get(x.container, 0), x.value)
    return [(x, x.value // 2) for x in lits
            if x.kind == "block" and largest.get(x.container) == x.value]


def _pow2_blocks(lits: list[Literal]) -> list[tuple[Literal, int]]:
    return [(x, _pow2_at_least(x.value)) for x in lits
            if x.kind == "block" and x.value > 0 and x.value & (x.value - 1)]


def _dot_minimum(error: str) -> int:
    """The K minimum the error names (32 for 8-bit operands in Triton 3.6), else 16."""
    m = _DOT_K.search(error)
    return max(16, int(m.group(1))) if m else 16


def _dot_min_16(lits: list[Literal], error: str = "") -> list[tuple[Literal, int]]:
    low = _dot_minimum(error)
    return [(x, low) for x in lits if x.kind == "block" and 0 < x.value < low]


def _pow2_warps(lits: list[Literal]) -> list[tuple[Literal, int]]:
    """num_warps rounded down to a power of two (at least 1): Triton's compiler refuses others."""
    return [(x, 1 << (x.value.bit_length() - 1)) for x in lits
            if x.kind == "num_warps" and x.value > 0 and x.value & (x.value - 1)]


@dataclass(frozen=True)
class RuleRepair:
    """A mechanical fix: which errors it answers and which literal edits it makes."""

    name: str
    matches: Callable[[str], bool]
    edits: Callable[..., list[tuple[Literal, int]]]    # (literals[, error text]) -> edits
    description: str
    reads_error: bool = False       # ``edits`` takes the error text as well (a minimum it names)


RULES: tuple[RuleRepair, ...] = (
    RuleRepair("fewer-stages", lambda e: bool(_SHARED.search(e)), _fewer_stages,
               "shared memory exceeded: fewer pipeline stages (num_stages)"),
    RuleRepair("fewer-warps", lambda e: bool(_REGISTERS.search(e)), _fewer_warps,
               "too many registers/resources per block: fewer warps (num_warps)"),
    RuleRepair("smaller-tiles", lambda e: bool(_SHARED.search(e) or _REGISTERS.search(e)),
               _smaller_tiles, "resources exceeded: halve the largest block size"),
    RuleRepair("pow2-blocks", lambda e: bool(_POW2.search(e)), _pow2_blocks,
               "block sizes rounded up to powers of two (tl.arange needs them)"),
    RuleRepair("dot-min-16", lambda e: bool(_DOT16.search(e)), _dot_min_16,
               "block sizes raised to tl.dot's minimum (16, or 32 for 8-bit operands)",
               reads_error=True),
    RuleRepair("pow2-warps", lambda e: bool(_WARPS_POW2.search(e)), _pow2_warps,
               "num_warps rounded down to a power of two"),
)


def rule_repairs(candidate: Candidate, status: Status, error: str) -> list[Candidate]:
    """The rule fixes that match ``error``, in order, each as a new candidate (may be empty)."""
    if status in _NO_RULES:
        return []
    lits = find_literals(candidate.source)
    out = []
    for rule in RULES:
        if not rule.matches(error):
            continue
        edits = rule.edits(lits, error) if rule.reads_error else rule.edits(lits)
        if not edits:
            if rule.name == "fewer-stages":
                # no num_stages written anywhere: Triton's default (3) multi-buffers the loops;
                # write a smaller one at the launches (search.repair_launch)
                fix = stages_at_launches(candidate, 2)
                if fix is not None:
                    out.append(fix)
            continue
        changes = ", ".join(f"{lit.name} {lit.value}->{new}" for lit, new in edits[:6])
        out.append(Candidate(source=apply_edits(candidate.source, edits),
                             origin=f"repair:rules:{rule.name}", parent=candidate.hash,
                             description=f"{rule.description} ({changes})"))
    return out


# ----------------------------------------------------------------------------- the repair loop

@dataclass(frozen=True)
class RepairAttempt:
    """One evaluated fix: who made it, what it was, and how it fared."""

    attempt: int            # 1-based
    origin: str             # "repair:rules:fewer-stages", "repair:llm:<model>", ...
    candidate: str          # hash of the fix
    status: Status
    error: str              # "" when it worked
    description: str = ""


@dataclass(frozen=True)
class RepairOutcome:
    """What repairing one failed candidate came to."""

    original: Candidate
    attempts: tuple[RepairAttempt, ...]
    final: Candidate | None       # the first fix that evaluated OK, or None
    stop_reason: str              # "repaired", "attempts exhausted", "no repair offered"

    @property
    def repaired(self) -> bool:
        return self.final is not None


def _next_fix(current: Candidate, status: Status, error: str, attempt: int,
              proposers: Sequence[Proposer], context: ProposalContext,
              tried: set[str], used_rules: set[str]) -> Candidate | None:
    for fix in rule_repairs(current, status, error):
        rule = fix.origin.rsplit(":", 1)[-1]
        if fix.hash not in tried and rule not in used_rules:
            used_rules.add(rule)   # each rule once: the rest of the attempts go to proposers
            return fix
    request = RepairRequest(context=context, candidate=current, status=status, error=error,
                            attempt=attempt)
    for proposer in proposers:
        try:
            fix = proposer.repair(request)
        except (ConfigError, StoreError):
            raise    # misconfiguration or an unfaithful replay (ReplayMiss): the user must know
        except Exception as exc:   # noqa: BLE001 - a proposer failing must not end the run
            log.warning("proposer %s failed to repair %s: %s",
                        getattr(proposer, "name", proposer), current.hash, exc)
            continue
        if fix is not None and fix.hash not in tried:
            return fix
    return None


def repair_candidate(candidate: Candidate, failure_status: Status, error_text: str,
                     proposers: Sequence[Proposer], context: ProposalContext,
                     max_attempts: int, evaluate: Evaluate) -> RepairOutcome:
    """Try up to ``max_attempts`` fixes of a failed ``candidate``; see the module docstring.

    ``evaluate(candidate) -> (status, error_text)`` runs a fix (compile, run, verify) and says
    how it went; Status.OK ends the loop. Rule repairs come first (each rule at most once per
    call, so that they cannot use up the attempts), then each proposer's ``repair()``; a fix
    identical to one already tried is not evaluated again.
    """
    if not failure_status.is_failure:
        raise ValueError(f"candidate {candidate.hash} did not fail (status {failure_status})")
    attempts: list[RepairAttempt] = []
    tried = {candidate.hash}
    used_rules: set[str] = set()
    current, status, error = candidate, failure_status, error_text
    for n in range(1, max_attempts + 1):
        fix = _next_fix(current, status, error, n, proposers, context, tried, used_rules)
        if fix is None:
            return RepairOutcome(candidate, tuple(attempts), None,
                                 "no repair offered" if not attempts else
                                 f"no further repair offered after {len(attempts)} attempt(s)")
        tried.add(fix.hash)
        fix_status, fix_error = evaluate(fix)
        attempts.append(RepairAttempt(n, fix.origin, fix.hash, fix_status,
                                      "" if fix_status is Status.OK else fix_error,
                                      fix.description))
        log.info("repair %d/%d of %s by %s: %s", n, max_attempts, candidate.hash, fix.origin,
                 fix_status.value)
        if fix_status is Status.OK:
            return RepairOutcome(candidate, tuple(attempts), fix, "repaired")
        if fix_status is Status.SKIPPED:
            # not run (the time is spent): no error to repair from, and no fix would run either
            return RepairOutcome(candidate, tuple(attempts), None,
                                 f"stopped after {len(attempts)} attempt(s): {fix_error}")
        current, status, error = fix, fix_status, fix_error
    return RepairOutcome(candidate, tuple(attempts), None,
                         f"attempts exhausted ({max_attempts})")
