"""The evaluation pipeline that runs inside the worker: import, run, verify, time.

Every variant's failure is caught here and becomes data; only a broken CUDA context (a sticky
error such as an illegal memory access) ends the worker, and the driver starts a new one.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
import statistics
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable

import torch

from ..model import (
    Case, CaseRole, DeviceInfo, Evaluation, Failure, Status, Timing, Variant, VariantResult,
)
from ..verify.bounds import outside
from ..verify.compare import compare_outputs, tolerance_table
from ..verify.config_variation import autotuners, may_round_otherwise, schedule_sensitive
from ..verify.differential import VerifyOptions, fresh_seed, uses_dot, verify_against_reference
from ..verify.guards import integrity_snapshot
from ..verify.integrity import watch_integrity
from ..verify.original_runs import ORIGINAL_RUNS
from ..verify.shipped import original_bare, shipped_after_timing, unwritten_masks
from ..verify.timed_calls import TimedCalls
from ..verify.tree import clone_tree, iter_tensors
from .autotune_picks import autotune_picks
from .failures import classify_exception
from .invoke import InvocationBuilder
from .loader import import_source, install_support_modules, module_key
from .protocol import EvaluateRequest, Progress
from .quick_autotune import (
    compile_in_parallel, compile_without_launching, compiles_reported, quicken_autotuners,
    shorten_autotuners,
)
from .timing import TimingPlan, far_slower, time_interleaved
from .varied_inputs import VariedInputs

log = logging.getLogger(__name__)


class _State:
    """Mutable per-variant bookkeeping while a request is evaluated."""

    def __init__(self, variant: Variant):
        self.variant = variant
        self.module: Any = None
        self.failure: Failure | None = None
        self.verdict = None
        self.timings: list[Timing] = []
        self.launches = 0
        self.case_failures: list[Failure] = []
        self.run_s: dict[str, float] = {}
        self.started = time.perf_counter()

    def fail(self, failure: Failure, keep_going: bool) -> None:
        """Record a failure; in keep-going mode only the case is lost, not the variant."""
        if keep_going and failure.case_id is not None:
            self.case_failures.append(failure)
        else:
            self.failure = failure

    def case_ok(self, case_id: str) -> bool:
        return all(f.case_id != case_id for f in self.case_failures)

    def result(self) -> VariantResult:
        if self.failure is not None:
            status = self.failure.status
        elif self.verdict is not None and not self.verdict.passed:
            status = Status.CHEAT if self.verdict.cheats else Status.MISMATCH
        elif self.case_failures:
            status = self.case_failures[0].status
        else:
            status = Status.OK
        return VariantResult(self.variant.name, self.variant.hash, status, self.failure,
                             self.verdict, tuple(self.timings), self.launches,
                             time.perf_counter() - self.started, tuple(self.case_failures),
                             tuple(self.run_s.items()))


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def autotunes_quickly(dev: str, request: EvaluateRequest) -> bool:
    """A verification on the GPU (nothing timed) autotunes cheaply: runtime.quick_autotune."""
    return dev == "cuda" and not request.time


def autotune_mode(dev: str, request: EvaluateRequest) -> str:
    """How the request's autotuners benchmark their configs: 'compile' (a compile-only pass:
    each config compiled, nothing launched), 'quick' (verification on the GPU: each config run
    twice), 'short' (the search's timings, and a final check that Triton's own would not end by
    the record's cap: a short do_bench), or 'full' (Triton's own: the final check, the baseline,
    and the CPU interpreter with its own shim)."""
    if dev == "cuda" and request.compile_only:
        return "compile"
    if autotunes_quickly(dev, request):
        return "quick"
    if dev == "cuda" and request.time and request.timing.autotune_rep_ms:
        return "short"
    return "full"


def module_label(task: str, variant: str, mode: str) -> str:
    """The name a variant's module is imported under in the worker, per ``autotune_mode``.
    Modules that autotune another way get their own, so a request in the same worker never reuses
    autotuners (and the configs they chose) of another kind; modules are cached by label and
    source (runtime.loader)."""
    return f"{task}_{variant}" + {"quick": "_verify", "short": "_short",
                                  "compile": "_compile"}.get(mode, "")


def compiled_in_pass(states: list) -> list:
    """The variants a compile-only request compiles: the reference when it comes alone (the
    original's baseline), else the candidates alone. The reference is then the original or the
    incumbent, whose kernels its own compile pass or an earlier request compiled: at a record's
    start each spare worker compiling ahead compiled the original again beside the baseline's own
    pass, running its wrapper on every case's inputs once more per candidate."""
    return list(states[1:]) if len(states) > 1 else list(states)


def _selected_cases(request: EvaluateRequest) -> list[Case]:
    if request.case_ids is None:
        return list(request.task.cases)
    wanted = set(request.case_ids)
    return [c for c in request.task.cases if c.id in wanted]


def case_plan(plan: TimingPlan, end_by: float | None, cases_left: int) -> TimingPlan:
    """``plan`` for the next of ``cases_left`` cases of a request that should end by ``end_by``
    (``EvaluateRequest.end_by``): its rounds past the minimum stop at an even share of the time
    left. A check whose verification took longer than foreseen then times on fewer samples
    instead of being killed at the record's cap: on an H100 pass (120 s a record, engine
    1018ceeea5af, 2026-11-27) add_example's final check verified for 19 s where 15 s were
    foreseen, and was killed at the cap timing its ninth case of 16, losing a 27x candidate."""
    if end_by is None:
        return plan
    share = max(end_by - time.monotonic(), 0.0) / max(cases_left, 1)
    return replace(plan, stop_after_s=share)


def _timing_order(cases: list[Case], case_ids: tuple[str, ...] | None) -> list[Case]:
    """The performance cases in the order the request names them (the task's order otherwise).

    A variant far slower than the reference on one case is not timed on the later ones
    (``far_slower``), so the order decides what the search learns of it. The search names its
    longest cases first (``search.loop.representative_cases``); timed in the task's order, the
    quickest came first: on the H100 (2026-11-25) a dequantize_rowwise config 4.4x faster on the
    long cases read 2.1x slower on a 4 us launch-bound case during a burst of host noise, was
    dropped there, and was never timed where it gains, so it could not reach the final check and
    its size dispatch (``search.final_check``), which are what judge a size it loses on."""
    perf = [c for c in cases if c.role is CaseRole.PERFORMANCE]
    if case_ids is None:
        return perf
    rank = {cid: i for i, cid in enumerate(case_ids)}
    return sorted(perf, key=lambda c: rank.get(c.id, len(rank)))


def evaluate_request(request: EvaluateRequest, device: DeviceInfo, module_dir: Path,
                     report: Callable[[Progress], None]) -> tuple[Evaluation, bool]:
    """Run ``request``; return the evaluation and whether the CUDA context is broken."""
    dev = "cpu" if device.interpreted else "cuda"
    task = request.task
    states = [_State(v) for v in request.variants]
    broken = False
    install_support_modules(module_dir / "support", task.support_modules)
    watched = request.verify and len(states) > 1
    # taken once the reference is imported: what its own import sets (a module-level
    # ``torch.backends.cuda.matmul.allow_tf32 = True``) is how it runs, not a candidate's patch;
    # taken before, every candidate of such an original read "patched", and the restore after
    # its verification undid the original's own setting
    snapshot = None

    def guarded(st: _State):
        """Charge a patch of torch/triton/time to the candidate that made it (then undo it)."""
        return _watch(st) if watched and st is not states[0] else contextlib.nullcontext()

    mode = autotune_mode(dev, request)
    marks = [("import", time.perf_counter())]   # where a timed request's seconds go (its notes)
    for st in states:
        report(Progress("import", st.variant.name))
        try:
            with guarded(st):
                st.module = import_source(module_dir, module_label(task.name, st.variant.name, mode),
                                          st.variant.source, shown_as=task.name)
            # the harness's own change, outside the candidate's watch
            if mode in ("quick", "compile"):
                quicken_autotuners(st.module)
            elif mode == "short":
                shorten_autotuners(st.module, request.timing.autotune_rep_ms)
        except BaseException as exc:  # noqa: BLE001 - a variant's import failure is data
            st.failure, broken = classify_exception(exc, importing=True)
        if watched and st is states[0]:
            snapshot = _integrity_snapshot()
    reference = states[0]
    if reference.module is None:
        return _finish(task, states, device, ["the reference failed to import"]), broken

    builder = _builder(reference.module, dev, module_dir)
    keep = request.keep_going
    cases = _selected_cases(request)

    def alive() -> list[_State]:
        return [s for s in states if s.failure is None and s.module is not None]

    # 1. run every case once per variant: does it run at all? (compile errors, crashes)
    marks.append(("first runs (compile, autotune)", time.perf_counter()))
    if mode == "compile":
        # one variant at a time, its cases' kernels side by side (compile_in_parallel): a compile
        # that hangs stays the variant's, whose name the worker's last progress message carries
        with compile_without_launching():
            for st in [s for s in compiled_in_pass(states) if s.failure is None
                       and s.module is not None]:
                def compiled(done: int, total: int, name: str = st.variant.name) -> None:
                    report(Progress(f"compile ({done} of {total} kernels done)", name))
                with compile_in_parallel(request.compile_threads, compiled):
                    for case in cases:
                        report(Progress("compile", st.variant.name, case.id))
                        try:
                            builder.build(st.module, case, case.seeds[0]).call()
                        except BaseException as exc:  # noqa: BLE001 - best effort, dropped
                            # a wrapper that reads what no kernel wrote (matrix_reduction's
                            # checks its own result) fails here; its other cases still compile
                            failure, broken = classify_exception(exc, case_id=case.id)
                            if broken:
                                st.failure = failure
                                return _finish(task, states, device, []), True
        return _finish(task, states, device, [phase_note(marks, time.perf_counter(), mode)]), broken
    if request.run_cases:
        for case in cases:
            for st in alive():
                report(Progress("run", st.variant.name, case.id))
                seed = case.seeds[0]
                began = time.perf_counter()

                def compiling(kernel: str, name: str = st.variant.name, cid: str = case.id) -> None:
                    report(Progress("compile at first run", name, cid))
                try:
                    with guarded(st), compiles_reported(compiling):
                        inv = builder.build(st.module, case, seed)
                        inv.call()
                        _sync(dev)
                    st.run_s[case.id] = time.perf_counter() - began
                except BaseException as exc:  # noqa: BLE001
                    failure, broken = classify_exception(exc, case_id=case.id, seed=seed)
                    st.fail(failure, keep)
                    if broken:
                        return _finish(task, _unverified(states, st, failure, request.verify),
                                       device, []), True

    # 2. verify each candidate against the reference
    marks.append(("verify", time.perf_counter()))
    if request.verify and len(states) > 1 and reference.failure is None:
        for st in [s for s in alive() if s is not reference]:
            report(Progress("verify", st.variant.name))
            try:
                st.verdict = _verify(reference.module, st.module, task, cases, builder, dev, snapshot,
                                     request, lambda what, case_id, name=st.variant.name:
                                     report(Progress(f"verify ({what})", name, case_id)))
            except BaseException as exc:  # noqa: BLE001
                case_id, seed = getattr(exc, "tritonforge_where", (None, None))
                st.failure, broken = classify_exception(exc, case_id=case_id, seed=seed)
                if broken:
                    return _finish(task, _unverified(states, st, st.failure, True), device, []), True

    # 3. time the performance cases, every surviving variant interleaved on the same inputs
    marks.append(("timing", time.perf_counter()))
    grew: list[str] = []                 # cases the timed-call check stood down on
    if request.time:
        hopeless: set[str] = set()       # far slower than the reference on an earlier case
        order = _timing_order(cases, request.case_ids)
        for position, case in enumerate(order):
            timed = [s for s in alive() if (s.verdict is None or s.verdict.passed) and s.case_ok(case.id)
                     and s.variant.name not in hopeless]
            if not timed:
                break
            if len(states) > 1 and all(s is reference for s in timed):
                # candidates came, and none is left on this case: the reference timed alone
                # judges nothing (attention_kernel_aligned, H100, 2026-11-25: a final check whose
                # best failed verification went on to time the original alone, under the
                # exclusive lock, before checking again)
                continue

            def by_name_ok(name: str, timed: list[_State] = timed, cid: str = case.id) -> bool:
                return any(s.variant.name == name and s.failure is None and s.case_ok(cid)
                           for s in timed)

            seed = case.seeds[0]
            group: list[_State] | None = timed
            while group:
                # a group's inputs go before the next group's are built
                fns, invocations, varieds = {}, {}, {}
                group, waiting = _build_fitting(group, reference, builder, case, seed,
                                                invocations, fns, keep, dev)
                if group is None:
                    return _finish(task, states, device, []), True
                fns = {n: f for n, f in fns.items() if by_name_ok(n)}
                if not fns:
                    group = _next_group(reference, waiting, case.id)
                    continue
                kept = TimedCalls()
                varieds = _varying(fns, invocations)
                try:
                    samples, method = time_interleaved(
                        {n: kept.keeping(n, f, dict(iter_tensors(invocations[n].arguments, "arg")),
                                         reference=n == reference.variant.name)
                         for n, f in fns.items()},
                        case_plan(request.timing, request.end_by,
                                  len(order) - position + _groups_after(group, waiting)), dev,
                        progress=lambda name, cid=case.id: report(Progress("time", name, cid)),
                        vary={n: v.step for n, v in varieds.items()})
                except BaseException as exc:  # noqa: BLE001 - attribute to the variant in flight
                    kept.clear()
                    failure, broken = classify_exception(exc, case_id=case.id, seed=seed)
                    culprit = _culprit(group, fns, dev, failure)
                    culprit.fail(failure, keep)
                    if broken:
                        return _finish(task, states, device, []), True
                    group = _next_group(reference, waiting, case.id)
                    continue
                _out_of_step(kept, varieds, reference.variant.name)
                try:
                    wrong_when_timed = _timed_calls_differ(kept, reference, timed, case, seed, fns,
                                                           invocations, builder, task, dev,
                                                           varieds.get(reference.variant.name))
                except BaseException as exc:  # noqa: BLE001 - the check's own trouble is no verdict
                    failure, broken = classify_exception(exc, case_id=case.id, seed=seed)
                    if broken:       # a timed call's sticky CUDA error, surfacing in the check
                        _culprit(group, fns, dev, failure).fail(failure, keep)
                        return _finish(task, states, device, []), True
                    log.warning("%s: the timed calls' results on case %s not compared: %s",
                                task.name, case.id, exc)
                    wrong_when_timed = {}
                finally:
                    if kept.grew and case.id not in grew:
                        grew.append(case.id)
                    kept.clear()
                by_name = {s.variant.name: s for s in timed}
                for name, values in samples.items():
                    _add_samples(by_name[name], Timing(case.id, name, method, tuple(values)))
                for name, diffs in wrong_when_timed.items():
                    by_name[name].failure = Failure(
                        Status.CHEAT, f"watched: its last timed call on case {case.id} differs from "
                        f"the original's: {diffs[0].output}: {diffs[0].message}"[:300],
                        "\n".join(f"{m.output}: {m.message}" for m in diffs[:5]), case.id, seed)
                # far slower on this case: not timed on the next ones (the per-case regression limit
                # rejects it already; a candidate 100x slower on a 350 ms case cost minutes, H100)
                hopeless |= far_slower(samples, states[0].variant.name, request.timing.abandon_slower)
                group = _next_group(reference, waiting, case.id)
    if request.time and len(states) > 1 and reference.failure is None:
        marks.append(("shipped check", time.perf_counter()))
        _check_after_timing(states, task, builder, dev, report, _nonce(request))
    notes = [line for st in states if st.module is not None
             for line in autotune_picks(st.module, st.variant.name)] if request.time else []
    if grew:
        notes.append(f"timed-call check not judged on {', '.join(grew)}: one call of the original "
                     "on its pristine inputs differs from its last timed result (it accumulates)")
    if request.time:
        notes.append(phase_note(marks, time.perf_counter(), mode))
    return _finish(task, states, device, notes), broken


def _build_fitting(group: list[_State], reference: _State, builder: InvocationBuilder, case: Case,
                   seed: int, invocations: dict[str, Any], fns: dict[str, Callable[[], object]],
                   keep: bool, dev: str = "cpu") -> tuple[list[_State] | None, list[_State]]:
    """Build the invocations of ``group`` (the reference first) on ``case`` into ``invocations``
    and ``fns``. A variant whose build runs out of device memory once the reference and another
    variant are built waits, with those after it, for a group of its own on the same case
    (``_next_group``) instead of failing: each variant holds its own copy of a case's inputs, and
    fast_ce_loss's 4 GB case for 17 variants filled 137 GiB of an H200's 140, failing 16
    candidates "oom" (engine c064071456aa, 2026-11-28). One that does not fit beside the
    reference alone fails. On a GPU the next one waits already where the free memory is under
    twice what the last build took (the calls' own outputs need room too).
    Returns (the variants built, those left waiting), or (None, []) where the context broke."""
    built: list[_State] = []
    last_build = 0
    gpu = dev.startswith("cuda")
    for i, st in enumerate(group):
        if gpu and len(built) > 1 and reference in built and last_build > 0 \
                and _device_free() < 2 * last_build:
            return built, [s for s in group[i:] if s is not reference]
        try:
            before = torch.cuda.memory_allocated() if gpu else 0
            invocations[st.variant.name] = builder.build(st.module, case, seed)
            fns[st.variant.name] = invocations[st.variant.name].timed
            built.append(st)
            if gpu:
                last_build = max(last_build, torch.cuda.memory_allocated() - before)
        except BaseException as exc:  # noqa: BLE001
            failure, broken = classify_exception(exc, case_id=case.id, seed=seed)
            if failure.status is Status.OOM and not broken and st is not reference \
                    and len(built) > 1 and reference in built:
                invocations.pop(st.variant.name, None)
                return built, [s for s in group[i:] if s is not reference]
            st.fail(failure, keep)
            if broken:
                return None, []
    return built, []


def _device_free() -> int:
    """Bytes the next allocation can have: the device's free memory and the blocks the caching
    allocator holds unused (an earlier group's, freed)."""
    return torch.cuda.mem_get_info()[0] + torch.cuda.memory_reserved() - torch.cuda.memory_allocated()


def _next_group(reference: _State, waiting: list[_State], case_id: str) -> list[_State] | None:
    """The variants a case's timing still owes (``_build_fitting``), beside the reference; none
    once the reference failed, on the request or on this case (nothing to judge them against)."""
    if not waiting or reference.failure is not None or not reference.case_ok(case_id):
        return None
    return [reference] + waiting


def _add_samples(st: _State, timing: Timing) -> None:
    """Record ``timing``; the reference timed in several groups on one case keeps one timing
    with every group's samples taken the same way (a group timed another way, CUDA graphs
    against events, adds none: its samples would not be comparable)."""
    for i, t in enumerate(st.timings):
        if t.case_id == timing.case_id:
            if t.method == timing.method:
                st.timings[i] = Timing(t.case_id, t.variant, t.method,
                                       t.samples_ms + timing.samples_ms)
            return
    st.timings.append(timing)


def _groups_after(group: list[_State], waiting: list[_State]) -> int:
    """About how many more groups the case's timing owes after ``group`` (``_build_fitting``):
    the case's share of the time left is split among its groups, not taken by each."""
    per = max(len(group) - 1, 1)
    return -(-len(waiting) // per)


def _varying(fns: dict[str, Callable[[], object]], invocations: dict[str, Any]) -> dict[str, VariedInputs]:
    """Per timed variant, what changes its inputs between timed turns (``runtime.varied_inputs``:
    no variant is timed on a remembered answer); a variant whose arguments hold no tensor that can
    be varied (floating-point, or integer and unsorted where there is none) has none. Each
    invocation holds its own copies of the case's inputs, so the steps of one variant never
    reach another's."""
    out = {name: VariedInputs(invocations[name].arguments) for name in fns}
    # a tensor two variants share would take two steps a turn: it is left as it is
    owners: dict[int, int] = {}
    for v in out.values():
        for ptr in {t.untyped_storage().data_ptr() for t in v.tensors}:
            owners[ptr] = owners.get(ptr, 0) + 1
    for v in out.values():
        v.tensors = [t for t in v.tensors if owners[t.untyped_storage().data_ptr()] == 1]
    return {name: v for name, v in out.items() if v.tensors}


def _out_of_step(kept: TimedCalls, varieds: dict[str, VariedInputs], reference: str) -> None:
    """Forget the last timed result of a variant whose inputs took another number of steps than
    the original's (one the timer dropped as far slower, timed no further): it was computed on
    other values, and comparing it with the original's would call an honest slow variant a cheat."""
    def steps(name: str) -> int:
        return varieds[name].steps if name in varieds else 0
    for name in list(kept.last):
        if steps(name) != steps(reference):
            kept.last.pop(name, None)


def _timed_calls_differ(kept: TimedCalls, reference: _State, states: list[_State], case: Case,
                        seed: int, fns: dict[str, Callable[[], object]],
                        invocations: dict[str, Any], builder: InvocationBuilder, task: Any,
                        dev: str, varied: VariedInputs | None = None) -> dict[str, list]:
    """{candidate: how its last timed call's result differs from the original's}
    (verify.timed_calls); {} where the original was not timed on this case."""
    name = reference.variant.name
    if name not in fns or len(kept.last) < 2:
        return {}
    sync = torch.cuda.synchronize if dev.startswith("cuda") else None
    if outside(reference.module, case, seed, _maker(builder), dev, sync):
        return {}           # its results depend on where memory was handed out (verify.bounds)

    def unwritten() -> dict[str, torch.Tensor]:
        return unwritten_masks(reference.module, case, seed, _maker(builder), dev,
                               kept.args.get(name, {}), sync)
    modules = {s.variant.name: s.module for s in states}
    compare = _comparer(task, reference.module, case, seed)

    def rounds_elsewhere() -> bool:
        return schedule_sensitive(
            reference.module, case,
            lambda: clone_tree(builder.build(reference.module, case, seed).call()),
            lambda a, b: bool(compare(a, b, "return")))
    return kept.differences(name, fns[name], compare, unwritten, sync,
                            lambda cand: may_round_otherwise(reference.module, modules.get(cand)),
                            rounds_elsewhere, varied.replay if varied is not None else None)


def _comparer(task: Any, reference: Any, case: Case, seed: int) -> Callable[[Any, Any, str], list]:
    """``compare(original's, candidate's, path)`` on (case, seed) with the task's tolerances."""
    tolerance = tolerance_table(getattr(task, "tolerance_overrides", ()) or ())
    dot = uses_dot(reference)

    def compare(r: Any, c: Any, path: str) -> list:
        return compare_outputs(r, c, case_id=case.id, seed=seed, tolerance_for=tolerance,
                               path=path, uses_dot=dot)
    return compare


def _maker(builder: InvocationBuilder) -> Callable[[Any, Case, int, str], Any]:
    """``verify``'s ``MakeInvocation`` over this worker's builder (its device is the builder's)."""
    return lambda module, case, seed, _device: builder.build(module, case, seed)


def phase_note(marks: list[tuple[str, float]], end: float, mode: str) -> str:
    """``worker seconds (autotune MODE): import 1.2, first runs ... 40.3, ...``: a timed
    request holds the GPU exclusively throughout, so its notes say which part took the time."""
    ends = [t for _, t in marks[1:]] + [end]
    parts = [f"{name} {stop - start:.1f}" for (name, start), stop in zip(marks, ends)]
    return f"worker seconds (autotune {mode}): " + ", ".join(parts)


_BUILDERS: dict[tuple[str, str], InvocationBuilder] = {}


def _builder(reference: Any, dev: str, module_dir: Path) -> InvocationBuilder:
    """One builder per reference module per worker: its input caches outlive a request."""
    key = (module_key(reference), dev)
    if key not in _BUILDERS:
        if len(_BUILDERS) > 4:
            _BUILDERS.clear()
        _BUILDERS[key] = InvocationBuilder(reference, dev, module_dir)
    return _BUILDERS[key]


def _culprit(timed: list[_State], fns: dict[str, Callable[[], object]], dev: str,
             failure: Failure) -> _State:
    """Find which variant failed during interleaved timing by running each alone once."""
    for st in timed:
        fn = fns.get(st.variant.name)
        if fn is None:
            continue
        try:
            fn()
            _sync(dev)
        except BaseException:  # noqa: BLE001
            return st
    return timed[-1]


@contextlib.contextmanager
def _watch(st: "_State"):
    with watch_integrity() as patched:
        yield
    if patched and st.failure is None:
        st.failure = Failure(Status.CHEAT, "patched: " + "; ".join(patched[:3]),
                             "\n".join(patched))


def _integrity_snapshot() -> Any:
    """What torch, triton and time look like before any candidate is imported."""
    return integrity_snapshot()


def _verify(ref_module: Any, cand_module: Any, task: Any, cases: list[Case],
            builder: InvocationBuilder, dev: str, snapshot: Any,
            request: EvaluateRequest,
            progress: Callable[[str, str | None], None] | None = None) -> Any:
    options = VerifyOptions(baseline=snapshot, nonce=_nonce(request),
                            first_calls=request.first_calls, recheck=request.second_pass,
                            shipped_check=request.second_pass, original_runs=ORIGINAL_RUNS,
                            progress=progress)
    return verify_against_reference(ref_module, cand_module, task, cases, builder, dev, options)


# The recheck's fresh seed, drawn once per worker process rather than once per candidate, where
# the request brings none (``EvaluateRequest.nonce``: the driver's, shared by a run's workers). A
# TritonBench-G performance script builds every size at once on the host, so each new seed meant
# rebuilding (and writing to the run's input cache) all of them: destindex_copy's 22 sizes took
# 75-88 s per candidate's verification on an H100 (2026-11-23), most of it that rebuild.
# The seed is still one no test section or spec uses and that no candidate's author can know
# (drawn at random at run time).
_RECHECK_NONCE = secrets.randbits(30)


def _nonce(request: EvaluateRequest) -> int:
    return request.nonce if request.nonce is not None else _RECHECK_NONCE


def after_timing_case(task: Any, reference: _State, timed: list[_State], nonce: int) -> Any:
    """The case of the check after timing (None: nothing to check): a correctness case, drawn
    by the nonce; where a variant autotunes, the timed performance case the original ran
    fastest on instead, one every timed variant was timed on. An autotuner meets a correctness
    case's sizes in this worker for the first time there, and tunes (and compiles, for a changed
    kernel body) every config for it: on two H200s (engine c064071456aa, 2026-11-28) the check
    after layer_norm_ops' round-1 timing took 59.7 s for 15 candidates, 6-15 s for each whose
    kernel body changed, where its timing took 22.2 s. On a timed case every pick is made
    already, the one the timer ran; the inputs are still fresh (``fresh_seed``)."""
    if not timed:
        return None
    if any(autotuners(st.module) for st in (reference, *timed) if st.module is not None):
        ref_ms = {t.case_id: statistics.median(t.samples_ms)
                  for t in reference.timings if t.samples_ms}
        common = set(ref_ms).intersection(*({t.case_id for t in st.timings if t.samples_ms}
                                            for st in timed))
        perf = [c for c in task.performance_cases if c.id in common]
        if perf:
            return min(perf, key=lambda c: (ref_ms[c.id], c.id))
    pool = [c for c in task.cases if c.role is CaseRole.CORRECTNESS] or list(task.cases)
    return pool[nonce % len(pool)] if pool else None


def _check_after_timing(states: list[_State], task: Any, builder: InvocationBuilder, dev: str,
                        report: Callable[[Progress], None], nonce: int) -> None:
    """What the timer ran is what ships: after the timing runs, each timed candidate's BARE call
    (``Invocation.timed``) on one case (``after_timing_case``), fresh seed, must match the original's
    (verify.shipped.shipped_after_timing). A candidate that computes the right thing only under
    the verifier's guards, or only on its first calls, fails here as ``watched``."""
    reference = states[0]
    timed = [s for s in states[1:] if s.failure is None and s.timings and s.module is not None
             and (s.verdict is None or s.verdict.passed)]
    case = after_timing_case(task, reference, timed, nonce)
    if case is None:
        return
    seed = fresh_seed(nonce)
    compare = _comparer(task, reference.module, case, seed)
    report(Progress("verify", reference.variant.name, case.id))
    try:      # the original's side, once for every candidate (verify.shipped.OriginalBare)
        original = original_bare(reference.module, case, seed, _maker(builder), dev, compare)
    except BaseException as exc:  # noqa: BLE001 - as when each candidate's check took it: a
        # crash here counts against every timed candidate (one of them may have left a sticky
        # error or a patched module behind), never for them
        failure, _ = classify_exception(exc, case_id=case.id, seed=seed)
        for st in timed:
            st.failure = failure
        return
    if original is None:
        return          # it reads or writes outside its arguments, or differs from itself
    for st in timed:
        report(Progress("verify", st.variant.name, case.id))
        try:
            problem = shipped_after_timing(reference.module, st.module, case, seed,
                                           _maker(builder), dev, compare, original)
        except BaseException as exc:  # noqa: BLE001 - a crash here is the candidate's
            failure, _ = classify_exception(exc, case_id=case.id, seed=seed)
            st.failure = failure
            continue
        if problem is not None:
            st.failure = Failure(Status.CHEAT, problem[:300], problem, case.id, seed)


def _unverified(states: list[_State], culprit: _State, failure: Failure,
                verify: bool) -> list[_State]:
    """After ``culprit`` broke the CUDA context before verification was done, every other
    candidate that has no failure yet is marked SKIPPED: it was never compared, and "OK" would
    say it was. (An H100 run of 2026-11-23 reported fused_rotary_embedding's candidates OK after
    the ORIGINAL hit an illegal memory access in their verification runs.) The reference keeps
    its status: it is not judged here. The failure names the case, so the caller can tell a case
    the original cannot run."""
    if verify:
        for st in states[1:]:
            if st is not culprit and st.failure is None:
                st.failure = Failure(Status.SKIPPED, f"not verified: {culprit.variant.name} "
                                     f"{failure.status.value} first and the CUDA context is lost",
                                     failure.one_line(), failure.case_id, failure.seed)
    return states


def _finish(task: Any, states: list[_State], device: DeviceInfo, notes: list[str]) -> Evaluation:
    return Evaluation(task.name, tuple(s.result() for s in states), device, tuple(notes))
