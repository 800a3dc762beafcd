"""``tritonforge check``: guard kernels in a user's CI against a recorded baseline.

``record`` runs each kernel file's cases and writes a baseline file: the kernel's source as it is
now (the oracle for later checks) and, on a GPU, every timing sample of its performance cases.
``check`` then verifies each kernel as it is now against its recorded source (the same verifier
as the search: every correctness case, fresh seeds, NaN/Inf positions, in-place writes) and, on a
GPU, times the recorded and the current source side by side in one worker, call by call, and
calls a case a regression when even the upper end of the 95% bootstrap interval of
``recorded median / current median`` is below ``1 / (1 + noise)``. The recorded times are shown
beside the fresh ones for reference only: a CI machine is not the recording machine, so
regressions are judged on the side-by-side timing alone.

On the CPU interpreter correctness is checked and timing is skipped, with a note that says so.
Runs in the main process; the kernels run in isolated workers (``runtime.evaluator.Evaluator``).
"""

from __future__ import annotations

import json
import logging
import platform
import statistics
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from .config import Settings
from .errors import InputError
from .model import Candidate, CaseRole, Status, Task, Variant
from .report.gather import median_ratio_bounds
from .runtime.evaluator import Evaluator, original_variant

log = logging.getLogger(__name__)

BASELINE_VERSION = 1
DEFAULT_NOISE = 0.05


@dataclass(frozen=True)
class BaselineCase:
    case_id: str
    role: str
    samples_ms: tuple[float, ...] = ()


@dataclass(frozen=True)
class BaselineKernel:
    name: str
    file: str
    spec: str | None
    source: str
    device: str
    cases: tuple[BaselineCase, ...]


@dataclass(frozen=True)
class CaseCheck:
    case_id: str
    role: str
    status: str                 # "ok", "mismatch", "regression", "failed", "skipped"
    detail: str = ""
    ratio: float | None = None  # recorded median / current median, side by side (> 1: faster now)
    low: float | None = None
    high: float | None = None
    recorded_ms: float | None = None   # the baseline file's median, for reference only


@dataclass(frozen=True)
class KernelCheck:
    name: str
    file: str
    cases: tuple[CaseCheck, ...]
    failure: str = ""           # a failure of the whole kernel (import, crash) or a missing record
    timing_note: str = ""

    @property
    def ok(self) -> bool:
        return not self.failure and all(c.status in ("ok", "skipped") for c in self.cases)


@dataclass(frozen=True)
class CheckReport:
    kernels: tuple[KernelCheck, ...]
    device: str
    interpreted: bool
    noise: float

    @property
    def ok(self) -> bool:
        return all(k.ok for k in self.kernels)


def read_baseline(path: str | Path) -> dict[str, BaselineKernel]:
    p = Path(path)
    if not p.exists():
        raise InputError(f"baseline file {p} does not exist",
                         hint=f"record one first: tritonforge check FILE... --baseline {p} --record")
    try:
        data = json.loads(p.read_text())
        if data.get("version") != BASELINE_VERSION:
            raise ValueError(f"version {data.get('version')!r}, expected {BASELINE_VERSION}")
        return {k["name"]: BaselineKernel(
            k["name"], k["file"], k.get("spec"), k["source"], k.get("device", ""),
            tuple(BaselineCase(c["case_id"], c["role"], tuple(c.get("samples_ms", ())))
                  for c in k["cases"])) for k in data["kernels"]}
    except (ValueError, KeyError, TypeError) as exc:
        raise InputError(f"baseline file {p} cannot be read ({exc})",
                         hint="record it again with --record") from None


def write_baseline(path: str | Path, kernels: list[BaselineKernel]) -> None:
    body = {"version": BASELINE_VERSION, "python": platform.python_version(),
            "kernels": [asdict(k) for k in kernels]}
    Path(path).write_text(json.dumps(body, indent=1) + "\n")


def _case_ids(task: Task, timed: bool) -> tuple[str, ...]:
    return tuple(c.id for c in task.cases if timed or c.role is CaseRole.CORRECTNESS)


def record(tasks: list[tuple[Task, str, str | None]], settings: Settings, baseline: str | Path,
           run_dir: Path) -> list[BaselineKernel]:
    """Run each (task, file, spec) once as it is now and write the baseline file."""
    kept = []
    with Evaluator(settings, run_dir / "check-record", None) as ev:
        timed = ev.device == "cuda"
        for task, file, spec in tasks:
            evaluation = ev.evaluate(task, (original_variant(task),), purpose="check-record",
                                     case_ids=_case_ids(task, timed), verify=False, time=timed,
                                     use_store=False)
            res = evaluation.results[0]
            if res.status is not Status.OK:
                why = res.failure.one_line() if res.failure else res.status.value
                raise InputError(f"{file} fails as it is now ({why})",
                                 hint="record a baseline of a kernel that runs its cases")
            cases = tuple(BaselineCase(c.id, c.role.value,
                                       tuple(res.timing(c.id).samples_ms) if timed and res.timing(c.id)
                                       else ()) for c in task.cases)
            kept.append(BaselineKernel(task.name, file, spec, task.source,
                                       evaluation.device.name, cases))
    write_baseline(baseline, kept)
    return kept


def check(tasks: list[tuple[Task, str, str | None]], settings: Settings, baseline: str | Path,
          run_dir: Path, *, noise: float = DEFAULT_NOISE) -> CheckReport:
    """Verify (and on a GPU, time) each kernel against its recorded source."""
    recorded = read_baseline(baseline)
    kernels: list[KernelCheck] = []
    with Evaluator(settings, run_dir / "check", None) as ev:
        timed = ev.device == "cuda"
        device = ev.device
        for task, file, _ in tasks:
            base = recorded.get(task.name)
            if base is None:
                kernels.append(KernelCheck(task.name, file, (), failure=(
                    f"no record of {task.name} in {baseline}; record it with --record")))
                continue
            kernels.append(_check_one(ev, task, file, base, timed, noise))
        device = ev.worker.info.name if ev.worker.info else device
    return CheckReport(tuple(kernels), device, not timed, noise)


def _check_one(ev, task: Task, file: str, base: BaselineKernel, timed: bool,
               noise: float) -> KernelCheck:
    oracle = replace(task, source=base.source)
    variants = (Variant("recorded", base.source, Candidate(base.source, "recorded").hash),
                Variant("current", task.source, Candidate(task.source, "current").hash))
    evaluation = ev.evaluate(oracle, variants, purpose="check", case_ids=_case_ids(task, timed),
                             verify=True, time=timed, use_store=False)
    rec, cur = evaluation.result("recorded"), evaluation.result("current")
    note = "" if timed else ("timing skipped: the CPU interpreter's times say nothing about GPU "
                             "speed; run `tritonforge check` on a GPU to check for regressions")
    if rec.status is not Status.OK and rec.status is not Status.MISMATCH:
        why = rec.failure.one_line() if rec.failure else rec.status.value
        return KernelCheck(task.name, file, (), failure=f"the recorded source fails now: {why}",
                           timing_note=note)
    blamed = {f.case_id: f for f in cur.case_failures if f.case_id}
    recorded_ms = {c.case_id: c.samples_ms for c in base.cases}
    out: list[CaseCheck] = []
    for case in task.cases:
        if case.role is CaseRole.PERFORMANCE and not timed:
            out.append(CaseCheck(case.id, case.role.value, "skipped", "not run on the interpreter"))
            continue
        if case.id in blamed:
            f = blamed[case.id]
            kind = "mismatch" if f.status in (Status.MISMATCH, Status.CHEAT) else "failed"
            out.append(CaseCheck(case.id, case.role.value, kind, f.reason[:300]))
            continue
        if cur.status is not Status.OK:
            out.append(_failed_case(case.id, case.role.value, cur))
            continue
        out.append(_timed_case(case.id, case.role.value, rec, cur, timed, noise,
                               recorded_ms.get(case.id, ())))
    return KernelCheck(task.name, file, tuple(out), timing_note=note)


def _failed_case(case_id: str, role: str, cur) -> CaseCheck:
    """The current source failed: this case's own mismatches where the verdict names them; a
    case it does not name is reported as not verified, never as passed."""
    verdict = cur.verdict
    if verdict is not None and not verdict.passed:
        mine = [m for m in verdict.mismatches if m.case_id == case_id]
        if mine:
            return CaseCheck(case_id, role, "mismatch", "; ".join(
                f"seed {m.seed} {m.output}: {m.message}" for m in mine[:2])[:300])
        if verdict.cheats:
            return CaseCheck(case_id, role, "mismatch", "; ".join(verdict.cheats)[:300])
    why = cur.failure.one_line() if cur.failure else (
        verdict.summary() if verdict is not None else cur.status.value)
    return CaseCheck(case_id, role, "failed", f"not verified: the kernel failed ({why[:260]})")


def _timed_case(case_id: str, role: str, rec, cur, timed: bool, noise: float,
                recorded: tuple[float, ...]) -> CaseCheck:
    t_rec, t_cur = rec.timing(case_id), cur.timing(case_id)
    if not timed or role != CaseRole.PERFORMANCE.value or t_rec is None or t_cur is None \
            or not t_rec.samples_ms or not t_cur.samples_ms:
        return CaseCheck(case_id, role, "ok", "verified")
    ratio, low, high = median_ratio_bounds(t_rec.samples_ms, t_cur.samples_ms)
    rec_ms = statistics.median(recorded) if recorded else None
    if high < 1.0 / (1.0 + noise):
        return CaseCheck(case_id, role, "regression",
                         f"{1 / ratio:.3f}x the recorded source's time (95% interval of the "
                         f"speedup {low:.3f}x-{high:.3f}x, noise bound {noise:.0%})",
                         ratio, low, high, rec_ms)
    return CaseCheck(case_id, role, "ok", f"verified; {ratio:.3f}x ({low:.3f}x-{high:.3f}x)",
                     ratio, low, high, rec_ms)
