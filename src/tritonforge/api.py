"""The public facade: load a task, evaluate its original, (later) optimize it.

Everything a script or the CLI needs goes through here; the modules behind it are private.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace as _replace
from pathlib import Path

from .compose import OptimizeSession, SessionOptions
from .compose import build_proposers, record_llm_usage  # noqa: F401 - public names kept here
from .config import Settings
from .errors import ConfigError, InputError
from .model import CaseRole, Evaluation, Status, Task, Variant, content_hash
from .profile.session import ProfileOptions, profile_task
from .report.gather import gather_extras
from .report.optimize import write_outputs
from .runtime.evaluator import Evaluator, original_variant
from .runtime.hardware import resolve_device
from .store import RunStore
from .tasks.loader import default_spec_path, task_from_file
from .tasks.source import read_source, summarize_source
from .tasks.tritonbench import load_tasks, split_source
from .testgen.augment import with_generated_cases
from .testgen.generate import TestgenOptions, generate
from .verify.policy import check_source


def check_writable_dir(path: str | Path, what: str) -> Path:
    """``path`` as an absolute directory this process can write, created if missing; else a
    ``ConfigError`` naming it. Called before any kernel runs, so that a bad ``--run-dir`` or
    ``--out`` fails at once instead of after minutes of work."""
    target = Path(path).expanduser().resolve()
    if target.exists() and not target.is_dir():
        raise ConfigError(f"{what} {target} is a file, not a directory",
                          hint=f"pass a directory for {what}")
    try:
        target.mkdir(parents=True, exist_ok=True)
        probe = target / f".tritonforge-write-check-{os.getpid()}"
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        raise ConfigError(f"{what} {target} is not writable ({exc.strerror or exc})",
                          hint=f"pass a {what} in a directory you can write") from None
    return target


def load_task(path: str | Path | None = None, *, spec: str | Path | None = None,
              entry: str | None = None, tritonbench: str | None = None) -> Task:
    """A task from a kernel file (+ spec) or from a TritonBench-G record name."""
    if tritonbench:
        return load_tasks([tritonbench])[0]
    if path is None:
        raise InputError("give a kernel file or a TritonBench-G name",
                         hint="load_task('kernel.py') or load_task(tritonbench='NAME')")
    return task_from_file(path, spec, entry)


@dataclass(frozen=True)
class RunOutcome:
    task: Task
    evaluation: Evaluation
    device: str
    skipped_performance: bool
    store_path: Path


def run_original(task: Task, settings: Settings, *, with_performance: bool | None = None,
                 case_ids: tuple[str, ...] | None = None) -> RunOutcome:
    """Run every case of the original once and time its performance cases.

    On the CPU interpreter, performance cases are skipped unless asked for: interpreter timings
    say nothing about GPU performance, and GPU-sized inputs take minutes there.
    """
    run_dir = check_writable_dir(settings.run_dir, "--run-dir")
    store_path = run_dir / "store.sqlite"
    with RunStore(store_path) as store, Evaluator(settings, run_dir, store) as evaluator:
        store.put_task(task)
        on_gpu = evaluator.device == "cuda"
        perf = on_gpu if with_performance is None else with_performance
        ids = case_ids or tuple(c.id for c in task.cases
                                if perf or c.role is CaseRole.CORRECTNESS)
        evaluation = evaluator.evaluate(task, (original_variant(task),), purpose="run",
                                        case_ids=ids, verify=False, time=True, keep_going=True)
    return RunOutcome(task, evaluation, evaluator.device, not perf, store_path)


def optimize(task: Task, settings: Settings, *, jobs: int = 1, budget_s: float | None = None,
             progress=None, out_dir: str | Path | None = None):
    """Optimize ``task``; returns (OptimizeResult, paths of the written outputs, device name).

    ``jobs``: verification workers side by side. ``budget_s``: seconds for the whole run, the
    final check included. ``progress``: a ``model.progress.ProgressSink`` that receives a
    ``ProgressEvent`` at each step (baseline, profile, each round's propose/verify/time, final
    check, done); its ``message`` carries the run's notes as text. ``out_dir``: where the faster
    file, diff and reports go (default ``RUN_DIR/output``). Bad arguments and unwritable
    directories raise ``ConfigError`` before any kernel runs (docs/API.md).
    """
    if budget_s is not None and not budget_s > 0:
        raise ConfigError(f"budget {budget_s} is not above 0", hint="give seconds, e.g. 300")
    if jobs < 1:
        raise ConfigError(f"jobs {jobs} is below 1", hint="give 1 or more verification workers")
    run_dir = check_writable_dir(settings.run_dir, "--run-dir")
    out = check_writable_dir(out_dir, "--out") if out_dir is not None else None
    settings = settings.replace(run_dir=str(run_dir))
    with RunStore(run_dir / "store.sqlite") as store, \
            OptimizeSession(settings, store, SessionOptions(jobs=jobs)) as session:
        result = session.optimize(task, budget_s, progress)
        info, device = session.worker_info, session.device
        extras = gather_extras(store, result)
    name = Path(task.source_path).name if task.source_path else f"{task.name}.py"
    device_name = info.name if info else device
    paths = write_outputs(result, out or run_dir / "output", name, device_name, extras=extras)
    return result, paths, device_name


def generate_cases(path: str | Path, settings: Settings, *, entries: tuple[str, ...] = (),
                   test: str | Path | None = None, out: str | Path | None = None,
                   overwrite: bool = False, options=None):
    """Cases for a kernel file from its own test or example, written as a spec (``testgen``).

    ``test``: a separate test or example file run against the module (default: the file's
    ``test_*`` functions, else its ``__main__`` block, else the TritonBench-style test section
    after a line of 146 ``#``). ``out``: where to write the spec (refused if it exists, unless
    ``overwrite``). Returns ``testgen.model.TestgenResult``; ``options`` is a
    ``testgen.generate.TestgenOptions``.
    """
    kernel = Path(path).resolve()     # the tracing process runs in another working directory
    source = read_source(kernel)
    summarize_source(source, str(kernel))            # a clear error for a file with no kernel
    if out is not None and Path(out).exists() and not overwrite:
        raise InputError(f"{out} already exists", hint="pass --force to replace it, or --out elsewhere")
    if test is not None and not Path(test).exists():
        raise InputError(f"test file {test} does not exist", hint="pass the test or example file to run")
    options = options or TestgenOptions()
    if entries:
        options = _replace(options, entries=tuple(entries))
    work = check_writable_dir(settings.run_dir, "--run-dir") / "testgen" / kernel.stem
    module_path, section = kernel, Path(test).resolve() if test else None
    module_text, section_text = split_source(source)
    if section is None and section_text.strip():
        work.mkdir(parents=True, exist_ok=True)
        module_path = work / kernel.name
        module_path.write_text(module_text, encoding="utf-8")
        section = work / "test_section.py"
        section.write_text(section_text, encoding="utf-8")
    result = generate(module_path, settings, work, options=options, section_path=section)
    if out is not None and result.spec_text:
        Path(out).write_text(result.spec_text, encoding="utf-8")
    return result


def profile(task: Task, settings: Settings, *, case_id: str | None = None, use_ncu: bool = True,
            out: str | Path | None = None, ncu_timeout_s: float = 300.0, progress=lambda s: None):
    """Profile one case of ``task``: static stats, timing, Nsight Compute metrics and the roofline
    on a GPU, and the diagnosis (``profile.session``). Returns ``profile.session.ProfileOutcome``;
    the profile is also written as JSON (``out``, default RUN_DIR/profile.json) and into the store.
    """
    settings = settings.replace(run_dir=str(check_writable_dir(settings.run_dir, "--run-dir")))
    options = ProfileOptions(case_id=case_id, use_ncu=use_ncu, ncu_timeout_s=ncu_timeout_s,
                             out=Path(out) if out else None)
    return profile_task(task, settings, options, progress)


@dataclass(frozen=True)
class RejectionReason:
    """One reason a candidate was refused: ``kind`` names the class (``policy:clock``,
    ``cheat:watched``, ``mismatch:value``, ``error:runtime_error``), ``message`` the evidence."""

    kind: str
    message: str


@dataclass(frozen=True)
class CandidateVerdict:
    """What ``verify_candidate`` found: accepted, or the reasons it was not."""

    accepted: bool
    reasons: tuple[RejectionReason, ...]
    checked: int                      # (case, seed) pairs compared
    cases: tuple[str, ...]            # the case ids used
    spec: str                         # the spec file the cases came from (testgen's when generated)
    generated: bool                   # the cases were generated by testgen
    device: str


def _rejection_reasons(result) -> tuple[RejectionReason, ...]:
    """The candidate's VariantResult as reasons, verdict first, then a failure outside it."""
    out: list[RejectionReason] = []
    verdict = result.verdict
    if verdict is not None:
        out += [RejectionReason(f"cheat:{c.kind}", c.one_line()) for c in verdict.violations]
        out += [RejectionReason(f"mismatch:{m.kind}", f"{m.case_id} seed {m.seed} {m.output}: "
                                                      f"{m.message}") for m in verdict.mismatches]
        if verdict.failure is not None:
            out.append(RejectionReason(f"error:{verdict.failure.status.value}",
                                       verdict.failure.one_line()))
    failure = result.failure
    if failure is not None:
        head = failure.reason.split(":", 1)[0]
        kind = f"cheat:{head}" if result.status.value == "cheat" and head.isidentifier() \
            else f"error:{failure.status.value}"
        out.append(RejectionReason(kind, failure.one_line()))
    for failure in result.case_failures:
        out.append(RejectionReason(f"error:{failure.status.value}", failure.one_line()))
    return tuple(out)


def verify_candidate(original_path: str | Path, candidate_path: str | Path, settings: Settings,
                     *, spec: str | Path | None = None, entry: str | None = None
                     ) -> CandidateVerdict:
    """Check a candidate file against its original with every check the search applies: the
    static policy, then (in a worker) import under an integrity watch, differential
    verification on the cases (poisoning, launch/op/stream/race guards, fresh-seed re-run,
    aliasing, module state, the bare-call probe) and, on a GPU, timing followed by a bare call
    after it. Cases come from ``spec``, else the .toml beside the original, else ``testgen``;
    generated cases join them as they join the search's (``Settings.generated_cases``).
    Raises InputError for missing files, an unusable spec, or an original that fails its cases.
    """
    original, candidate = Path(original_path), Path(candidate_path)
    for path in (original, candidate):
        if not path.is_file():
            raise InputError(f"{path} does not exist", hint="pass the original and the candidate .py")
    spec_path = Path(spec) if spec else default_spec_path(original)
    generated = False
    if not spec_path.exists():
        if spec:
            raise InputError(f"spec {spec} does not exist", hint="pass a spec file, or none")
        spec_path = Path(settings.run_dir) / "verify" / f"{original.stem}.toml"
        spec_path.parent.mkdir(parents=True, exist_ok=True)
        made = generate_cases(original, settings, out=spec_path, overwrite=True)
        if not made.spec_text:
            raise InputError(f"testgen found no cases for {original} ({made.stage_failed})",
                             hint="write a spec and pass it with --spec")
        generated = True
    task = task_from_file(original, spec_path, entry)
    device = resolve_device(settings.device)
    on_gpu = device == "cuda"
    source = candidate.read_text(encoding="utf-8")
    policy = check_source(source, original=task.source)
    if not policy.ok:
        ids = tuple(c.id for c in task.cases)
        reasons = tuple(RejectionReason(f"policy:{v.rule}", v.one_line()) for v in policy.violations)
        return CandidateVerdict(False, reasons, 0, ids, str(spec_path), generated, device)
    run_dir = Path(settings.run_dir) / "verify"
    with Evaluator(settings, run_dir, None, device=device) as evaluator:
        # the generated cases the search verifies on too (Settings.generated_cases: on the GPU by
        # default): odd sizes, large magnitudes, zeros, views, each validated on the original
        task = with_generated_cases(task, settings, run_dir / "generated", evaluator)
        ids = tuple(c.id for c in task.cases
                    if on_gpu or c.role is CaseRole.CORRECTNESS or c.generated) or \
            tuple(c.id for c in task.cases)
        evaluation = evaluator.evaluate(
            task, (original_variant(task), Variant("candidate", source, content_hash(source))),
            purpose="verify-candidate", case_ids=ids, verify=True, time=on_gpu, use_store=False)
    ref = evaluation.result("original")
    if ref.status is not Status.OK:
        detail = ref.failure.one_line() if ref.failure else ref.status.value
        raise InputError(f"the original fails its own cases: {detail}",
                         hint="fix the original or the spec; the original is the oracle")
    result = evaluation.result("candidate")
    reasons = _rejection_reasons(result)
    accepted = result.status is Status.OK and not reasons
    checked = result.verdict.checked if result.verdict is not None else 0
    return CandidateVerdict(accepted, reasons, checked, ids, str(spec_path), generated,
                            evaluation.device.name)
