"""Differential verification: the ORIGINAL is the oracle, the candidate must match it and play fair.

For every (case, seed) both variants run on identical fresh inputs; every returned value and every
tensor argument is compared (``compare.compare_outputs``). Around that, the checks a faster kernel
that computes something else, or measures something else, would otherwise slip through:

- outputs poisoned before the call: pure output arguments (found by running the original once
  with them poisoned: its results do not change) and every ``torch.empty*`` made inside the call;
- an argument the original leaves untouched must stay bit-identical (``input_mutated``);
- every call must launch a Triton kernel where the original's does (``no_launch``), must not use
  torch ops the original never dispatches beyond plumbing (``library_op``), must not create or
  launch on another stream (``side_stream``), and its outputs must not change once it has returned
  and its inputs are overwritten (``race``), judged only on a case where the original's own
  outputs hold still under that same overwrite (seen on an H100: an original that writes outside
  its arguments' memory changed its own outputs so, and candidates that only changed
  num_warps/num_stages were refused as races);
- attributes of torch, triton and time must not be replaced (``patched``);
- a second pass re-runs every case on one fresh, unpredictable seed in reverse order: a candidate
  right on the checked calls but wrong there depends on call order, count or seed (``rerun``); a
  wrong output equal to the previous call's expected output is a cache (``stale_output``);
- returned tensors must be plain ``torch.Tensor`` (``subclass``) and must not share memory with
  inputs, the module's tensors or an earlier call's result (``aliased``), unless the original's
  do; the module's state must not change on a repeated call (``call_state``: verify.freshness);
- the candidate's first call is BARE, before any guard it could notice: wrong there while every
  guarded call matches is ``watched`` (a variant that latches into honesty once it sees a guard);
- a probe (verify.shipped) runs one case through BARE calls, as the timer and the user make them:
  wrong there is ``watched``; results that do not follow inputs changed between calls are
  ``stateful``; ops hidden from the dispatch recorder but seen by the profiler are
  ``library_op``; on a GPU, identical runs that disagree are a ``race``.

The original's launches and ops come back in the Verdict, so a caller can show or cache them.
"""

from __future__ import annotations

import ast
import contextlib

import inspect
import logging
import math
import re
import secrets
import traceback
import types
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

import torch

from ..errors import TritonForgeError
from ..model import Case, Cheat, Failure, Mismatch, Status, Verdict
from .bounds import Outside
from .compare import ToleranceFor, compare_outputs, tolerance_table
from .config_variation import (
    GROSS_NORM, config_variants, launch_variants, mark_schedule_sensitive,
)
from .integrity import IntegritySnapshot, check_integrity, integrity_snapshot, restore_integrity
from .kinds import CheatKind, MismatchKind
from .nonfinite import NOTE as NONFINITE_NOTE
from .nonfinite import nonfinite_from_finite
from .original_runs import OriginalRuns
from .race_values import OwnValues, tensor_at, unexplained
from .runner import MakeInvocation, Run, run_variant
from .shipped_checks import PLUMBING_OPS, ShippedChecks
from .tree import as_bits, bitwise_equal, iter_tensors, unravel

log = logging.getLogger(__name__)



_VALUED = (MismatchKind.VALUE, MismatchKind.NORM)    # the kinds an original's variation forgives


class OracleFailure(TritonForgeError):
    """The ORIGINAL itself failed on a case: the case is unusable, not the candidate wrong."""


@dataclass(frozen=True)
class VerifyOptions:
    """How strict and how thorough one verification is (defaults: everything on)."""

    recheck: bool = True                  # second pass: fresh seed, reverse case order
    check_launches: bool = True
    check_library_ops: bool = True
    check_streams: bool = True
    race_check: bool = True
    allowed_ops: frozenset[str] = frozenset()   # extra aten ops the candidate may use
    uses_dot: bool | None = None          # None: look for tl.dot in the original's source
    nonce: int | None = None              # makes the recheck seed; None: drawn at random
    baseline: IntegritySnapshot | None = None   # taken BEFORE the candidate was imported
    max_mismatches: int = 20
    synchronize: Callable[[], None] | None = None   # None: torch.cuda.synchronize on cuda
    self_variation_runs: int = 2          # extra runs of the original when a candidate differs
    config_variation: bool = True         # and runs under other configs of its own autotunes
    race_runs: int = 6                    # more runs to see the values a racing original leaves
    catch_errors: bool = False            # True: a candidate exception becomes Verdict.failure
    shipped_check: bool = True            # the bare-call probe (verify.shipped)
    first_calls: bool = True              # the candidate's first calls bare, before any guard
    repeat_runs: int | None = None        # identical probe runs; None: 2 on a GPU, 0 on the CPU
    freshness: bool = True                # aliasing, subclasses, module state (verify.freshness)
    original_runs: OriginalRuns | None = None   # the original's runs kept across verifications
    # told what comes next, (step, case id or None): "first calls", "seed S" of a case, the
    # "recheck" of a case, the "probe": a worker reports it, so a slow verification shows where
    # its time goes, and a worker that dies names the case it died on
    progress: Callable[[str, str | None], None] | None = None


# the precision a dot's fp32 operands get when its call says so: IEEE fp32, or three tf32
# passes (fp32 to within its rounding)
_PRECISE_DOT = {"ieee", "tf32x3"}


def _dot_loosens(call: ast.Call) -> bool:
    """Whether ``call`` (a ``dot``/``dot_scaled``) may run fp32 operands at tf32 precision: it
    does unless it says ``allow_tf32=False`` or ``input_precision="ieee"``/``"tf32x3"`` in
    constants (a name there is decided elsewhere: it may)."""
    if _call_name(call) != "dot":
        return True
    for kw in call.keywords:
        value = kw.value.value if isinstance(kw.value, ast.Constant) else None
        if kw.arg == "allow_tf32" and value is False:
            return False
        if kw.arg == "input_precision" and value in _PRECISE_DOT:
            return False
    return True


def _call_name(call: ast.Call) -> str:
    f = call.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""


def _sources(module: types.ModuleType) -> list[str]:
    """The module's source, else its kernels' sources."""
    try:
        return [inspect.getsource(module)]
    except (OSError, TypeError):
        pass
    found = []
    for value in vars(module).values():
        fn = value
        while hasattr(fn, "fn"):
            fn = fn.fn
        src = getattr(value, "src", None)
        if src is None and inspect.isfunction(fn) and fn is not value:
            try:
                src = inspect.getsource(fn)
            except (OSError, TypeError):
                src = None
        if isinstance(src, str):
            found.append(src)
    return found


def uses_dot(module: types.ModuleType) -> bool:
    """Whether the module's kernels call ``dot``/``dot_scaled`` in a way that may run fp32 at
    tf32 precision (Triton's default for fp32 operands), which the ``-dot`` tolerances allow
    for. An original whose every dot asks IEEE precision (``allow_tf32=False``,
    ``input_precision="ieee"``) keeps the fp32 tolerance: with the looser one, a candidate that
    dropped the keyword (tf32, about 1e-3 off in norm and several times faster on fp32 operands)
    passed as equal to an original its user had asked to be exact. 10 of the 142 TritonBench-G
    originals write ``allow_tf32=False`` on every dot (two more on some of them)."""
    pattern = re.compile(r"\bdot(_scaled)?\s*\(")
    for src in _sources(module):
        if not pattern.search(src):
            continue
        try:
            tree = ast.parse(src)
        except SyntaxError:
            return True                  # unreadable here: as if it may
        calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)
                 and _call_name(n) in ("dot", "dot_scaled")]
        if not calls or any(_dot_loosens(c) for c in calls):
            return True
    return False


def reasons(verdict: Verdict) -> tuple[str, ...]:
    """``mismatch:<kind>``, ``cheat:<kind>`` and ``error:<status>`` labels, in verdict order."""
    out = [f"error:{verdict.failure.status.value}"] if verdict.failure else []
    out += [f"cheat:{c.kind}" for c in verdict.violations]
    out += [f"mismatch:{m.kind}" for m in verdict.mismatches]
    return tuple(dict.fromkeys(out))


def _cuda_sync() -> None:
    torch.cuda.synchronize()


def _classify(exc: BaseException, case_id: str, seed: int) -> Failure:
    name, module = type(exc).__name__, type(exc).__module__ or ""
    text = str(exc).strip().splitlines()
    line = f"{name}: {text[0] if text else ''}"[:300]
    if name == "OutOfMemoryError" or isinstance(exc, MemoryError):
        status = Status.OOM
    elif module.startswith("triton.compiler") or name in ("CompilationError", "OutOfResources"):
        status = Status.COMPILE_ERROR
    else:
        status = Status.RUNTIME_ERROR
    detail = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))[-6000:]
    return Failure(status, line, detail, case_id, seed)


@dataclass
class _Layout:
    """Which tensor arguments the original writes, which of those it never reads."""

    written: frozenset[str]
    outputs: frozenset[str]          # written and never read: poisoned before every call
    read_only_floats: frozenset[str]  # overwritten after the candidate returns (race check)


@contextlib.contextmanager
def _located(case: Case, seed: int):
    """An exception leaving the block names ``(case.id, seed)`` as ``tritonforge_where`` unless
    an inner block named its own: a sticky CUDA error raised outside a run's own capture (at the
    next run's ``torch.manual_seed``) named no case, so the original could not be run alone there
    to see whether it breaks the context itself. apply_penalty (H100, pass on 310957ee7859): all
    12 candidates crashed so, the original's own stability run crashed the same way, and no case
    was dropped."""
    try:
        yield
    except BaseException as exc:
        if getattr(exc, "tritonforge_where", None) is None:
            try:
                exc.tritonforge_where = (case.id, seed)  # type: ignore[attr-defined]
            except (AttributeError, TypeError):   # pragma: no cover - an exception without a dict
                pass
        raise


class _Verifier(ShippedChecks):
    def __init__(self, reference: types.ModuleType, candidate: types.ModuleType,
                 make_invocation: MakeInvocation, tolerance_for: ToleranceFor, device: str,
                 options: VerifyOptions) -> None:
        self.reference, self.candidate = reference, candidate
        self.make_invocation, self.tolerance_for = make_invocation, tolerance_for
        self.device, self.options = device, options
        self.uses_dot = uses_dot(reference) if options.uses_dot is None else options.uses_dot
        self.sync = options.synchronize or (_cuda_sync if device.startswith("cuda") else None)
        self.layouts: dict[str, _Layout] = {}
        self.mismatches: list[Mismatch] = []
        self.cheats: dict[str, Cheat] = {}
        self.failure: Failure | None = None
        self.checked = 0
        self.ref_launches = self.cand_launches = 0
        self.ref_ops: dict[str, int] = {}
        self.cand_ops: dict[str, int] = {}
        self.cand_streams = self.ref_streams = 0
        self.ref_side_launches = 0
        self.previous: Run | None = None
        self.first_pass = 0
        self.nondeterministic: list[str] = []
        self.unjudged: list[str] = []          # checks a case of the original's ruled out
        self.outside_cases: dict[str, Outside] = {}   # where it reaches outside (verify.bounds)
        self.ref_races: dict[str, bool] = {}     # case -> the original's outputs move after return
        self.nonfinite_seen: set[str] = set()    # cases whose reference was checked for NaN/Inf
        self.ref_aliases: set[tuple[str, str]] = set()
        self.ref_subclasses: set[tuple[str, str]] = set()
        self.ref_state_repeats = False          # the original changes its state on repeat calls
        self.ref_seen: set[str] = set()
        self.cand_seen: set[str] = set()
        self.cand_earlier: list[torch.Tensor] = []

    # ------------------------------------------------------------------ bookkeeping
    def cheat(self, kind: CheatKind, message: str, case: Case | None = None,
              seed: int | None = None) -> None:
        if kind.value not in self.cheats:
            self.cheats[kind.value] = Cheat(kind.value, message, case.id if case else None, seed)

    def compare(self, ref: Any, cand: Any, case: Case, seed: int, path: str) -> list[Mismatch]:
        return compare_outputs(ref, cand, case_id=case.id, seed=seed,
                               tolerance_for=self.tolerance_for, path=path, uses_dot=self.uses_dot)

    def _reference(self, case: Case, seed: int, poison: frozenset[str] = frozenset(),
                   again: bool = False) -> Run:
        """The original's run on (case, seed) with ``poison`` outputs poisoned: kept from an
        earlier candidate's check in this process where ``options.original_runs`` holds it,
        unless ``again`` (a run to see the original vary: never a kept one, never kept)."""
        kept = None if again else self.options.original_runs
        key = kept.key(case, seed, poison, self.device) if kept is not None else None
        run = kept.get(self.reference, key) if kept is not None else None
        if run is None:
            with _located(case, seed):
                run = run_variant(self.reference, case, seed, self.make_invocation, self.device,
                                  poison=poison, keep_pristine=True)
            if kept is not None:
                kept.put(self.reference, key, run)
        if run.error is not None:
            raise OracleFailure(f"the original fails on case {case.id!r} seed {seed}: "
                                f"{type(run.error).__name__}: {run.error}",
                                hint="drop or fix this case; the original is the oracle") \
                from run.error
        self.ref_launches += run.launches.count
        for op, n in run.calls.ops.items():
            self.ref_ops[op] = self.ref_ops.get(op, 0) + n
        self.ref_streams += run.calls.streams_created
        self.ref_side_launches += len(run.launches.side_stream_launches())
        self.ref_aliases.update((p, w) for p, w in run.aliases if w != "earlier call")
        self.ref_subclasses.update(run.subclasses)
        if run.state_changed and case.id in self.ref_seen:
            self.ref_state_repeats = True
        self.ref_seen.add(case.id)
        return run

    def _layout(self, case: Case, seed: int) -> tuple[_Layout, Run | None]:
        """Find the original's outputs on the first seed of a case (one or two extra runs)."""
        if case.id in self.layouts:
            return self.layouts[case.id], None
        first = self._reference(case, seed)
        written = frozenset(p for p, t in first.args.items()
                            if not bitwise_equal(t, first.pristine[p]))
        floats = frozenset(p for p, t in first.pristine.items()
                           if p not in written and t.is_floating_point())
        outputs: frozenset[str] = frozenset()
        ready: Run | None = first                  # valid as the reference run if nothing to poison
        if written:
            probe = self._reference(case, seed, poison=written)
            if not self.compare(first.result, probe.result, case, seed, "return"):
                outputs = frozenset(p for p in written
                                    if not self.compare(first.args[p], probe.args[p], case, seed, p))
            ready = probe if outputs == written else (first if not outputs else None)
        layout = _Layout(written, outputs, floats)
        self.layouts[case.id] = layout
        log.debug("case %s: writes %s, pure outputs %s", case.id, sorted(written), sorted(outputs))
        return layout, first

    # ------------------------------------------------------------------ one (case, seed)
    def check(self, case: Case, seed: int, rerun: bool) -> None:
        with _located(case, seed):
            self._check(case, seed, rerun)

    def _check(self, case: Case, seed: int, rerun: bool) -> None:
        if self._outside(case, seed, self.sync).reads:
            return        # its result there is not defined by its inputs (verify.bounds)
        layout, ready = self._layout(case, seed)
        ref = ready if ready is not None else self._reference(case, seed, poison=layout.outputs)
        snapshot = integrity_snapshot()
        cand = run_variant(self.candidate, case, seed, self.make_invocation, self.device,
                           poison=layout.outputs, inputs=ref.pristine,
                           scramble=layout.read_only_floats if self.options.race_check else frozenset(),
                           synchronize=self.sync if self.options.race_check else None,
                           earlier=self.cand_earlier if self.options.freshness else None)
        self._integrity(snapshot, case, seed)
        self.cand_launches += cand.launches.count
        for op, n in cand.calls.ops.items():
            self.cand_ops[op] = self.cand_ops.get(op, 0) + n
        self._streams(cand, case, seed)
        if cand.error is not None:
            self._error(cand.error, case, seed)
            return
        self.checked += 1
        if self.options.freshness:
            self._freshness(cand, case, seed)
        if self.options.check_launches and ref.launches.count > 0 and cand.launches.count == 0:
            self.cheat(CheatKind.NO_LAUNCH, f"the call launched no Triton kernel (the original "
                                            f"launched {ref.launches.count}: "
                                            f"{', '.join(ref.launches.kernels)})", case, seed)
        if case.id not in self.nonfinite_seen:
            self.nonfinite_seen.add(case.id)
            odd = nonfinite_from_finite(ref, layout.written)
            if odd is not None:
                self.nondeterministic.append(f"{case.id} seed {seed}: {NONFINITE_NOTE} "
                                             f"({odd[0]} of {odd[1]} elements)")
        found = self._compare_run(ref, cand, case, seed)
        if found:
            found = self._within_self_variation(ref, found, case, seed, layout, cand)
        if cand.late_args is not None:
            found = self._race(ref, cand, case, seed, found, layout)
        if found and self.previous is not None and self._matches(self.previous, cand, case, seed):
            self.cheat(CheatKind.STALE_OUTPUT, "its outputs equal what the PREVIOUS call should "
                                               "have returned: it serves a cached result", case, seed)
        if found and rerun:
            self.cheat(CheatKind.RERUN, f"correct on the {self.first_pass} checked calls, wrong "
                                        f"on a fresh seed re-run in reverse case order: its result "
                                        f"depends on call order, call count or seed", case, seed)
        self.mismatches.extend(found)
        self.previous = _written_part(ref)

    def _within_self_variation(self, ref: Run, found: list[Mismatch], case: Case, seed: int,
                               layout: _Layout, cand: Run | None = None) -> list[Mismatch]:
        """Forgive value differences no larger than the ORIGINAL's own run-to-run differences.

        Some originals are nondeterministic (a scatter to duplicate indices, float atomics): two
        runs of the original on the same inputs disagree on a few elements. A candidate is then
        judged as another run of the original would be: per output, no more differing elements
        than twice the most the original's own runs differ, and no larger norm error. Only
        ``value``/``norm`` kinds are forgiven, and only where the original proved nondeterministic
        on that very output (seen on an H200: TritonBench-G destindex_copy, ~5k of 134M elements).
        An autotuned original also runs under a few other configs of its own lists: a config
        another process could pick differs by its rounding, and counts as variation too, unless
        it differs grossly (``verify.config_variation``). A candidate beyond the count is still
        forgiven on an output where every element it differs on holds a value one of the
        original's own runs left at that element (a race: ``verify.race_values``; up to
        ``race_runs`` more runs of the original are made to see more of the values it leaves).
        """
        if not any(m.kind in _VALUED for m in found):
            return found
        # output -> (most elements, largest norm error) the original differs on: from its own
        # re-runs, and from its other autotune configs (whose forgiveness is capped: below)
        own_runs: dict[str, tuple[int, float]] = {}
        own_configs: dict[str, tuple[int, float]] = {}

        def count(diffs: list[Mismatch], into: dict[str, tuple[int, float]]) -> None:
            for m in diffs:
                n, norm = into.get(m.output, (0, 0.0))
                into[m.output] = (max(n, m.n_bad), max(norm, m.rel_norm_err or 0.0))
        # what the original's own re-runs left at the differing outputs (for races)
        seen = OwnValues([m.output for m in found if m.kind in _VALUED])
        for _ in range(self.options.self_variation_runs):
            count(self._again(ref, case, seed, layout, seen), own_runs)
        if self.options.config_variation:
            # an autotuned original may pick any of its configs in another process: their
            # rounding differences are its own variation too (verify.config_variation)
            for _described in config_variants(self.reference):
                try:
                    diffs = self._again(ref, case, seed, layout)
                except OracleFailure:
                    continue                   # the original fails with that config: not rounding
                if all(m.kind in _VALUED and (m.rel_norm_err or 0.0) <= GROSS_NORM for m in diffs):
                    count(diffs, own_configs)
        if not own_runs and not own_configs:
            return self._launch_explains(found, ref, cand, case, seed, layout)

        def within(m: Mismatch, own: dict[str, tuple[int, float]], cap: float) -> bool:
            n_own, norm_own = own.get(m.output, (0, 0.0))
            return (m.output in own and m.n_bad <= 2 * n_own + 8
                    and (m.rel_norm_err or 0.0) <= min(3 * norm_own + 1e-12, cap))
        kept = []
        for m in found:
            if m.kind not in _VALUED:
                kept.append(m)
                continue
            n_own = own_runs.get(m.output, (0, 0.0))[0]
            if within(m, own_runs, math.inf):
                self.nondeterministic.append(
                    f"{case.id} seed {seed} {m.output}: {m.n_bad} elements differ, the original "
                    f"differs from itself on {n_own}")
            elif within(m, own_configs, GROSS_NORM):
                # three times a config's rounding, but never past what counts as rounding at all
                self.nondeterministic.append(
                    f"{case.id} seed {seed} {m.output}: {m.n_bad} elements differ, the original "
                    f"differs by as much under its own autotune configs "
                    f"({own_configs[m.output][0]} elements)")
            elif cand is not None and n_own > 0 and \
                    self._race_explains(m.output, ref, cand, seen, case, seed, layout):
                self.nondeterministic.append(
                    f"{case.id} seed {seed} {m.output}: {m.n_bad} elements differ, each "
                    f"holding a value one of {seen.runs + 1} runs of the original left there "
                    f"(it races: differs from itself on {n_own})")
            else:
                kept.append(m)
        return self._launch_explains(kept, ref, cand, case, seed, layout)

    def _launch_explains(self, found: list[Mismatch], ref: Run, cand: Run | None, case: Case,
                         seed: int, layout: _Layout) -> list[Mismatch]:
        """Forgive an output whose elements beyond the tolerance each lie within it of the
        original's own result under another num_warps (``config_variation.launch_variants``), where
        the error norm still passes: a change of schedule rounds a reduction otherwise, and the
        candidate then holds a value the original's code computes. Never a norm failure, nor an
        element no such run of the original comes near."""
        if cand is None or not self.options.config_variation:
            return found
        eligible = []
        for m in found:
            r = tensor_at(ref, m.output)
            if m.kind != MismatchKind.VALUE or r is None or m.rel_norm_err is None:
                continue
            if m.rel_norm_err <= self.tolerance_for(r.dtype, self.uses_dot).rel_norm:
                eligible.append(m.output)
        if not eligible:
            return found
        seen = OwnValues(eligible)
        left = set(eligible)
        for _described in launch_variants(self.reference):
            try:
                seen.add(self._reference(case, seed, poison=layout.outputs, again=True))
            except OracleFailure:
                continue                       # the original fails at that num_warps
            left = {p for p in left if not self._values_explain(p, ref, cand, seen)}
            if not left:
                break
        if len(left) < len(eligible):
            mark_schedule_sensitive(self.reference, case)
        kept = []
        for m in found:
            if m.output in eligible and m.output not in left:
                self.nondeterministic.append(
                    f"{case.id} seed {seed} {m.output}: {m.n_bad} elements differ, each within "
                    f"the tolerance of the original's own result under another num_warps")
            else:
                kept.append(m)
        return kept

    def _values_explain(self, path: str, ref: Run, cand: Run, seen: OwnValues) -> bool:
        """Every element of ``path`` where ``cand`` differs from ``ref`` is within the tolerance
        of a value one of the original's runs in ``seen`` left there."""
        c, r = tensor_at(cand, path), tensor_at(ref, path)
        if c is None or r is None:
            return False
        return unexplained(c, r, seen.values.get(path, []),
                           self.tolerance_for(r.dtype, self.uses_dot)) == 0

    def _again(self, ref: Run, case: Case, seed: int, layout: _Layout,
               seen: OwnValues | None = None) -> list[Mismatch]:
        """How another run of the original differs from ``ref``; of that run only what ``seen``
        keeps outlives the call (a run holds every argument: GBs for a KV-cache copy)."""
        again = self._reference(case, seed, poison=layout.outputs, again=True)
        if not _same_start(ref, again):
            return []          # built from other inputs: nothing it differs by is the original's
        if seen is not None:
            seen.add(again)
        return self._compare_run(ref, again, case, seed)

    def _race_explains(self, path: str, ref: Run, cand: Run, seen: OwnValues, case: Case,
                       seed: int, layout: _Layout) -> bool:
        """Whether every element of ``path`` where ``cand`` differs from ``ref`` holds a value
        that ``ref`` or one of the original's own runs (``seen``) left there; more runs of the
        original are made (their values kept in ``seen`` for every output) up to ``race_runs``."""
        c, r = tensor_at(cand, path), tensor_at(ref, path)
        if c is None or r is None:
            return False
        tol = self.tolerance_for(r.dtype, self.uses_dot)
        while True:
            left = unexplained(c, r, seen.values.get(path, []), tol)
            if left == 0:
                return True
            if left < 0 or seen.runs >= self.options.self_variation_runs + self.options.race_runs:
                return False
            again = self._reference(case, seed, poison=layout.outputs, again=True)
            if not _same_start(ref, again):
                return False
            seen.add(again)

    def _compare_run(self, ref: Run, cand: Run, case: Case, seed: int) -> list[Mismatch]:
        found = self.compare(ref.result, cand.result, case, seed, "return")
        for path, after in ref.args.items():
            before = ref.pristine[path]
            if bitwise_equal(after, before):         # the original leaves it alone: so must it
                if not bitwise_equal(cand.args[path], before):
                    found.append(self._mutated(path, before, cand.args[path], case, seed))
            else:
                found.extend(self.compare(after, cand.args[path], case, seed, path))
        return found

    def _mutated(self, path: str, before: torch.Tensor, after: torch.Tensor, case: Case,
                 seed: int) -> Mismatch:
        if before.shape != after.shape or before.dtype != after.dtype:
            changed_n, at = before.numel(), ()
        else:
            changed = as_bits(before) != as_bits(after)
            if changed.dim() > before.dim():
                changed = changed.any(dim=-1)
            changed_n = int(changed.sum().item())
            flat = int(torch.argmax(changed.reshape(-1).to(torch.uint8)).item())
            at = unravel(flat, tuple(before.shape))
        return Mismatch(case.id, seed, path, MismatchKind.INPUT_MUTATED.value,
                        f"the candidate wrote {changed_n} of {before.numel()} elements of {path}, "
                        f"an argument the original leaves untouched (first at {at})",
                        n_bad=changed_n, n_total=before.numel(), worst_index=at)

    def _race(self, ref: Run, cand: Run, case: Case, seed: int, found: list[Mismatch],
              layout: _Layout) -> list[Mismatch]:
        """The race check: ``cand``'s outputs changed between the clones taken when it returned
        and those taken after its read-only inputs were overwritten and the device synchronized
        is the ``race`` cheat, and then its late outputs are what is compared. Judged only where
        the original's own outputs hold still under the same overwrite (``_original_races``):
        elsewhere ``found``, the comparison of its early outputs, stands as it is."""
        if not _moved(cand) or self._original_races(case, seed, layout):
            return found
        self.cheat(CheatKind.RACE, "its outputs changed after the call returned (after the device "
                                   "was synchronized and its read-only inputs overwritten): work "
                                   "left running on another stream, or inputs read after return",
                   case, seed)
        if found:
            return found
        late_found = self.compare(ref.result, cand.late_result, case, seed, "return")
        for path, t in (cand.late_args or {}).items():
            if not bitwise_equal(ref.args[path], ref.pristine[path]):
                late_found.extend(self.compare(ref.args[path], t, case, seed, path))
        return late_found

    def _original_races(self, case: Case, seed: int, layout: _Layout) -> bool:
        """Whether the original's own outputs change after it returns on ``case`` once its
        read-only inputs are overwritten and the device synchronized, as a candidate's are for the
        race check: run once a case, only when a candidate's did change there, and never kept in
        ``options.original_runs``. An original that writes outside its arguments' memory (seen on
        an H100, TritonBench-G decay_cumsum) or whose outputs share storage with an input moves
        so itself, and a candidate doing the same work cannot be judged a race there. A note says
        so, once a case. Where the original fails on this run, it counts as holding still."""
        if case.id not in self.ref_races:
            try:
                with _located(case, seed):
                    run = run_variant(self.reference, case, seed, self.make_invocation,
                                      self.device, poison=layout.outputs, keep_pristine=True,
                                      scramble=layout.read_only_floats, synchronize=self.sync)
                races = run.error is None and _moved(run)
            except Exception:  # noqa: BLE001 - the original failing here: judged as before
                log.debug("case %s: the original's own race run failed", case.id, exc_info=True)
                races = False
            self.ref_races[case.id] = races
            if races:
                self.unjudged.append(
                    f"{case.id} seed {seed}: the original's own outputs change after it returns "
                    f"once its read-only inputs are overwritten: the race check does not judge "
                    f"this case")
        return self.ref_races[case.id]

    def _matches(self, previous: Run, cand: Run, case: Case, seed: int) -> bool:
        try:
            if self.compare(previous.result, cand.result, case, seed, "return"):
                return False
            if not set(previous.args) <= set(cand.args):     # previous: its written part
                return False
            return not any(self.compare(previous.args[p], cand.args[p], case, seed, p)
                           for p in previous.args)
        except Exception:  # noqa: BLE001 - a heuristic: structures that cannot be compared
            return False

    def _streams(self, cand: Run, case: Case, seed: int) -> None:
        if not self.options.check_streams:
            return
        side = cand.launches.side_stream_launches()
        if cand.calls.streams_created and not self.ref_streams:
            self.cheat(CheatKind.SIDE_STREAM, f"it created {cand.calls.streams_created} CUDA "
                                              f"stream(s); the original creates none", case, seed)
        elif side and not self.ref_side_launches:
            self.cheat(CheatKind.SIDE_STREAM, f"it launched {side[0].kernel} on a stream other "
                                              f"than the caller's", case, seed)

    def _integrity(self, snapshot: IntegritySnapshot, case: Case, seed: int) -> None:
        problems = check_integrity(snapshot)
        if problems:
            self.cheat(CheatKind.PATCHED, "; ".join(problems[:5]), case, seed)
            restore_integrity(snapshot)

    def _error(self, exc: BaseException, case: Case, seed: int) -> None:
        if not self.options.catch_errors:
            for c in self.cheats.values():
                exc.add_note(f"tritonforge verify, before the error: cheat {c.one_line()}")
            # where it failed, for the caller's record (a crash with no case cannot be checked
            # against the original's own run: apply_penalty, H100, 2026-11-23)
            try:
                exc.tritonforge_where = (case.id, seed)  # type: ignore[attr-defined]
            except (AttributeError, TypeError):   # pragma: no cover - an exception without a dict
                pass
            raise exc
        self.failure = _classify(exc, case.id, seed)

    # ------------------------------------------------------------------ whole verification
    def finish(self) -> Verdict:
        if self.options.check_library_ops:
            extra = sorted(op for op in self.cand_ops if op not in self.ref_ops
                           and op not in PLUMBING_OPS and op not in self.options.allowed_ops)
            if extra:
                listed = ", ".join(f"{op} (x{self.cand_ops[op]})" for op in extra[:8])
                self.cheat(CheatKind.LIBRARY_OP, f"it calls {listed}, which the original never "
                                                 f"uses: the work must be done by Triton kernels")
        if self.checked == 0 and self.failure is None and \
                any(found.reads for found in self.outside_cases.values()):
            self.failure = Failure(Status.SKIPPED, "nothing verified: the original reads outside "
                                   "its arguments' memory on every case checked, so no case "
                                   "defines its result", "; ".join(self.unjudged[:2]))
        violations = tuple(self.cheats.values())
        passed = not self.mismatches and not violations and self.failure is None
        return Verdict(
            passed=passed, mismatches=tuple(self.mismatches[: self.options.max_mismatches]),
            cheats=tuple(c.one_line() for c in violations), checked=self.checked,
            violations=violations, failure=self.failure, reference_launches=self.ref_launches,
            candidate_launches=self.cand_launches, reference_ops=tuple(sorted(self.ref_ops)),
            candidate_ops=tuple(sorted(self.cand_ops)), uses_dot=self.uses_dot,
            notes=tuple(self.nondeterministic[:10]) + tuple(self.unjudged[:4]))

    def stop(self) -> bool:
        return self.failure is not None or len(self.mismatches) >= self.options.max_mismatches


def _moved(run: Run) -> bool:
    """Whether ``run``'s outputs (what it returned and the arguments not overwritten) differ, bit
    for bit, between the clones taken when it returned and the late ones (``run_variant``)."""
    early = [t for _, t in iter_tensors(run.result, "return")] + \
        [run.args[p] for p in sorted(run.late_args or {})]
    late = [t for _, t in iter_tensors(run.late_result, "return")] + \
        [run.late_args[p] for p in sorted(run.late_args or {})]  # type: ignore[index]
    return not all(bitwise_equal(a, b) for a, b in zip(early, late))


def _same_start(ref: Run, again: Run) -> bool:
    """Whether a re-run of the original started from the inputs ``ref`` started from, bit for
    bit, on every argument both kept: the original's own variation is what it does on the same
    inputs, never what other inputs make it do (a build of a (case, seed) that came out other
    than the first, however it happened, must not pass for nondeterminism)."""
    return all(bitwise_equal(t, again.pristine[p]) for p, t in ref.pristine.items()
               if p in again.pristine)


def _written_part(run: Run) -> Run:
    """What the stale-output check (``_matches``) reads of a run kept for the next check: its
    result and the arguments it wrote, not the inputs it only read (they can be GBs)."""
    written = [p for p, t in run.args.items() if not bitwise_equal(t, run.pristine[p])]
    return Run(result=run.result, args={p: run.args[p] for p in written},
               pristine={p: run.pristine[p] for p in written})


def fresh_seed(nonce: int | None) -> int:
    """A seed no test section or spec uses (>= 2**20), unpredictable without the nonce."""
    value = secrets.randbits(30) if nonce is None else (nonce * 2654435761) % (2 ** 30)
    return 2 ** 20 + value % (2 ** 30 - 2 ** 20)


def verify(
    reference_module: types.ModuleType,
    candidate_module: types.ModuleType,
    cases: Sequence[Case],
    make_invocation: MakeInvocation,
    *,
    seeds_for: Callable[[Case], Iterable[int]] | None = None,
    tolerance_for: ToleranceFor | None = None,
    device: str = "cpu",
    options: VerifyOptions = VerifyOptions(),
) -> Verdict:
    """Check ``candidate_module`` against ``reference_module`` on ``cases``; see the module doc.

    ``make_invocation(module, case, seed, device)`` must build identical inputs for identical
    (case, seed). ``seeds_for`` defaults to ``case.seeds``; ``tolerance_for`` to BENCHMARK.md's
    table. Raises ValueError without cases, ``OracleFailure`` when the original itself fails on a case, and re-raises a
    candidate's exception unless ``options.catch_errors``.
    """
    if not cases:
        raise ValueError("verify needs at least one case: a verification of nothing proves nothing")
    seeds_for = seeds_for or (lambda case: case.seeds)
    v = _Verifier(reference_module, candidate_module, make_invocation,
                  tolerance_for or tolerance_table(), device, options)
    if options.baseline is not None:
        problems = check_integrity(options.baseline)
        if problems:
            v.cheat(CheatKind.PATCHED, "; ".join(problems[:5]) + " (when its module was imported)")
            restore_integrity(options.baseline)
    # the candidate's first call is bare, before any guard it could see (verify.shipped_checks)
    first_nonce = options.nonce if options.nonce is not None else secrets.randbits(30)
    # (a seed of its own: the recheck and the probe share theirs, and a candidate shown their
    # inputs first would see them "again")
    step = options.progress or (lambda what, case_id: None)
    if options.first_calls:
        step("first calls", None)
    unwatched = v.bare_first(cases, first_nonce, fresh_seed(first_nonce + 1)) \
        if options.first_calls else None
    for case in cases:
        for seed in seeds_for(case):
            step(f"seed {seed}", case.id)
            v.check(case, seed, rerun=False)
            if v.stop():
                return v.finish()
    if options.recheck and not v.mismatches:
        v.first_pass = v.checked
        seed = fresh_seed(options.nonce)
        for case in reversed(list(cases)):
            step("recheck", case.id)
            v.check(case, seed, rerun=True)
            if v.stop():
                break
    if options.shipped_check and not v.stop() and not v.mismatches:
        nonce = options.nonce if options.nonce is not None else secrets.randbits(30)
        step("probe", None)
        v.probe(cases, nonce, fresh_seed(nonce))
    if unwatched and not v.stop() and not v.mismatches:
        v.cheat(CheatKind.WATCHED, unwatched + " (before any guarded call; every guarded call "
                                               "matched)")
    return v.finish()


def verify_against_reference(reference_module: types.ModuleType,
                             candidate_module: types.ModuleType, task: Any,
                             cases: Sequence[Case], builder: Any, device: str,
                             options: VerifyOptions = VerifyOptions()) -> Verdict:
    """The worker's entry point: ``builder.build(module, case, seed)`` makes invocations and the
    task's ``tolerance_overrides`` adjust the tolerance table."""
    return verify(reference_module, candidate_module, cases,
                  lambda module, case, seed, _device: builder.build(module, case, seed),
                  tolerance_for=tolerance_table(getattr(task, "tolerance_overrides", ()) or ()),
                  device=device, options=options)
