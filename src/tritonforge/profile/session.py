"""Profile one case of a task: what ``tritonforge profile`` does, step by step.

1. Pick the case: the one asked for; else, on a GPU, every performance case is timed (the run
   store keeps the evaluation) and the slowest is profiled; elsewhere the slowest by GPU timings
   already in the store, else the last performance case.
2. Time it on the GPU (``runtime.evaluator.Evaluator``: L2 flushed, CUDA events, every sample kept).
3. Run the case once more in a plain process (``runtime.standalone``) that records its launches;
   on a GPU that process runs under Nsight Compute with ``--profile-from-start off``, the recorded
   call bracketed by cudaProfilerStart/Stop, so exactly one call's launches are profiled whatever
   the warm-up (compilation, autotune benchmarking) launched. On the CPU the launches are recorded
   through the interpreter without executing them (``--dry-run``).
4. Compile every launched kernel at its recorded arguments, constexprs and num_warps/num_stages
   for sm_90 (or the GPU's own arch) and read registers, spills, shared memory, vector width,
   tensor cores (``profile.static``), in child processes started before step 3 (they import
   torch and Triton meanwhile), where the compile's bound (``ProfileOptions.static_timeout_s``)
   holds.
5. On a GPU: measured peaks (``roofline.measure_peaks``, cached, in a child process), bytes and
   FLOPs of the call (``profile.accounting``), the roofline position, then the diagnosis
   (``build_profile``). Without ncu or without a GPU the profile rests on what there is and says
   so in ``Profile.source`` and ``Profile.notes``.

The profile is written as JSON (``model.serialize``) and into the run store.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from importlib.metadata import PackageNotFoundError, version
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from ..analyze import analyze_source
from ..config import Settings, env_name, env_settings
from ..errors import InputError
from ..model import CaseRole, CompileStats, Profile, Task
from ..model.serialize import dumps
from ..runtime.perf_inputs import ENV_DIR
from ..runtime.hardware import resolve_device
from ..runtime.evaluator import Evaluator, original_variant
from ..runtime.gpu_lock import gpu_lock, lock_mode
from ..runtime.standalone import TensorInfo, Unsupported, read_capture
from ..store import RunStore
from .accounting import call_work, compute_kind
from .build import build_profile
from .ncu import NcuRequest, NcuResult, profile_with_ncu
from .compile_child import CompileChild
from .roofline import Peaks, load_cached, place
from .static import DEFAULT_TARGET, CompileRequest, TensorArg, compile_many, load_kernel, signature_from_args

log = logging.getLogger(__name__)

LAUNCH_OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg", "enable_fp_fusion")
MAX_PROFILED_LAUNCHES = 32      # ncu replays each profiled launch once per metric pass
NCU_LOCK_ENV = env_name("ncu_lock")


def ncu_lock_mode(settings: Settings | None = None) -> str:
    """The GPU lock an Nsight Compute run takes among processes sharing the GPU (shards):
    'shared' by default, beside other shards' verifications but never beside a timing;
    'exclusive' with $TRITONFORGE_NCU_LOCK=exclusive, like timing. A profile is advice: another
    process's kernels interleaved with its replays can only lower the efficiency it measures, so
    the worst case is a kernel not stopped as "near the roofline". Measured on an H100 with three
    shards: under 'exclusive' a record's profile phase queued 35-69 s for the lock against
    20-28 s of profiling itself (attention_fwd_triton3: 61 of 89 s); under 'shared',
    max_reduction's profile took 25 s and queued 0 s (H100, 2026-11-25)."""
    return (settings or env_settings()).sharing.ncu_lock   # checked by config.load_settings


STATIC_CHILDREN = 2     # compile children of the static stats, started before Nsight Compute


@dataclass(frozen=True)
class ProfileOptions:
    case_id: str | None = None
    use_ncu: bool = True
    ncu_timeout_s: float = 300.0
    # the static compile's bound: on four H100s (engine 20710a76802c, 2026-11-28) attn_fwd_causal's
    # kernels took 86 s to compile for the static stats, after a 15 s ncu run, in a 120 s record
    # that then had no time for a round; where it runs out, the stats are errors and the diagnosis
    # goes on from ncu's metrics
    static_timeout_s: float = 600.0
    arch: int | None = None           # compile target (capability x10); default: the GPU's, else 90
    out: Path | None = None           # the profile's JSON (default RUN_DIR/profile.json)
    # What the caller already measured (the optimization loop's baseline): with ``case_id``, the
    # case's time and the GPU, so that no worker is started just to time the case again (14-35 s
    # a kernel on an H100, 2026-11-23).
    known_time_ms: float | None = None
    device_name: str | None = None
    capability: str | None = None     # "9.0"
    perf_inputs_dir: Path | None = None   # a run's shared perf-script inputs (runtime.perf_inputs)


@dataclass(frozen=True)
class ProfileOutcome:
    profile: Profile
    device: str                       # "cuda" or "cpu"
    device_name: str
    json_path: Path
    store_path: Path
    time_us: float | None = None
    launches_per_call: int = 0
    failure: str | None = None        # the original failed on the case (first line)
    wall_s: float = 0.0


def choose_case(task: Task, case_id: str | None, times_ms: Mapping[str, float]) -> tuple[Any, str]:
    """The case to profile and why: asked for, slowest timed, last performance, or last case."""
    if case_id is not None:
        try:
            return task.case(case_id), "asked for"
        except KeyError:
            raise InputError(f"no case {case_id!r} in {task.name}",
                             hint="known cases: " + ", ".join(c.id for c in task.cases)) from None
    perf = task.performance_cases
    timed = [c for c in perf if c.id in times_ms]
    if timed:
        best = max(timed, key=lambda c: times_ms[c.id])
        return best, f"the slowest performance case ({times_ms[best.id]:.3f} ms)"
    if perf:
        return perf[-1], "the last performance case (no GPU timings to choose by)"
    if not task.cases:
        raise InputError(f"{task.name} has no cases to profile", hint="add cases to its spec")
    return task.cases[-1], "the last case (the task has no performance case)"


def stored_times(store: RunStore, task: Task) -> dict[str, float]:
    """Median GPU times (ms) of the original per case, from earlier evaluations in the store."""
    times: dict[str, float] = {}
    for _, ev in store.evaluations(task.name):
        if ev.device.interpreted:
            continue
        for r in ev.results:
            if r.hash == task.source_hash:
                times.update({t.case_id: t.median_ms for t in r.timings if t.samples_ms})
    return times


def _decode_arg(value: Any) -> Any:

    if isinstance(value, TensorInfo):
        return TensorArg(value.dtype, value.aligned)
    if isinstance(value, dict) and "tl_dtype" in value:
        import triton.language as tl   # triton is optional in profile: only a dtype needs it
        return tl.dtype(value["tl_dtype"])
    if isinstance(value, tuple):
        return tuple(_decode_arg(v) for v in value)
    if isinstance(value, Unsupported):
        raise TypeError(f"an argument of type {value.type_name} ({value.text[:80]}) cannot be "
                        "described for a static compile")
    return value


def launch_requests(launches: Sequence[Any], arch: int) -> tuple[list[CompileRequest], list[CompileStats]]:
    """One compile request per distinct (kernel, signature, launch options) among ``launches``;
    launches that cannot be described become error stats."""
    requests: dict[Any, CompileRequest] = {}
    failed: list[CompileStats] = []
    target = (DEFAULT_TARGET[0], arch, DEFAULT_TARGET[2])
    for x in launches:
        kwargs = dict(x.kwargs)
        nw, ns = int(kwargs.pop("num_warps", 4) or 4), int(kwargs.pop("num_stages", 3) or 3)
        options = tuple((k, kwargs.pop(k)) for k in LAUNCH_OPTIONS[2:] if kwargs.get(k) is not None)
        base = CompileStats(kernel=x.kernel, target=f"cuda:{arch}", num_warps=nw, num_stages=ns)
        if x.source_path is None:
            failed.append(replace(base, error="the kernel is not defined in a file: no static compile"))
            continue
        try:
            fn = load_kernel(x.source_path, x.kernel)
            sig = signature_from_args(fn, tuple(_decode_arg(a) for a in x.args),
                                      {k: _decode_arg(v) for k, v in kwargs.items()})
        except Exception as exc:  # noqa: BLE001 - a launch we cannot describe is data
            failed.append(replace(base, error=f"{type(exc).__name__}: {exc}"))
            continue
        key = (x.source_path, x.kernel, repr(sig), nw, ns, repr(options))
        requests.setdefault(key, CompileRequest(x.source_path, x.kernel, sig, nw, ns, target, options))
    return list(requests.values()), failed


def _child_env(device: str, perf_inputs_dir: Path | None = None) -> dict[str, str]:
    env = dict(os.environ)
    if perf_inputs_dir is not None:

        env[ENV_DIR] = str(perf_inputs_dir)
    if device == "cpu":
        env["TRITON_INTERPRET"] = "1"
    else:
        env.pop("TRITON_INTERPRET", None)
    src_root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = src_root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def _run_child(cmd: list[str], env: dict[str, str], timeout_s: float) -> str | None:
    """Run a child to completion; None when it succeeded, else what went wrong."""
    try:
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return f"did not finish in {timeout_s:.0f} s"
    if done.returncode != 0:
        return f"exited with {done.returncode}: {(done.stderr or done.stdout)[-1500:]}"
    return None


PEAKS_CHILD = ("import dataclasses, json, sys\n"
               "from tritonforge.profile.roofline import measure_peaks\n"
               "sys.stdout.write('\\n' + json.dumps(dataclasses.asdict(measure_peaks())) + '\\n')\n")


def _visible_gpu_name() -> str | None:
    """The name of the GPU a child would use (the first visible one), from nvidia-smi, so the
    driver learns it without a CUDA context; None when nvidia-smi cannot say."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
    cmd = ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"]
    if visible.isdigit():
        cmd += ["-i", visible]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    names = done.stdout.strip().splitlines() if done.returncode == 0 else []
    return names[0].strip() if names else None


def cached_peaks() -> Peaks | None:
    """The peaks cached for this machine's GPU and torch, read in the driver: no child process
    (a CUDA start-up) and no exclusive GPU lock (which queues behind every other shard's
    timing) when they were measured before; None on a miss, or when the GPU cannot be named."""


    gpu = _visible_gpu_name()
    try:
        torch_version = version("torch")
    except PackageNotFoundError:
        return None
    return load_cached(gpu, torch_version) if gpu else None


def measure_peaks_isolated(timeout_s: float = 300.0) -> tuple[Peaks | None, str | None]:
    """Measured (or cached) peaks from a child process: the driver never holds a CUDA context.
    Peaks already cached for this GPU are read without the child (``cached_peaks``)."""
    if (known := cached_peaks()) is not None:
        return known, None
    try:
        with gpu_lock("exclusive"):     # peak bandwidth and FLOP/s are timed
            done = subprocess.run([sys.executable, "-c", PEAKS_CHILD], env=_child_env("cuda"),
                                  capture_output=True, text=True, timeout=timeout_s)
        if done.returncode != 0:
            return None, f"measuring peaks failed: {done.stderr[-500:]}"
        data = json.loads(done.stdout.strip().splitlines()[-1])
        known = {f.name for f in dataclasses.fields(Peaks)}
        return Peaks(**{k: v for k, v in data.items() if k in known}), None
    except (subprocess.TimeoutExpired, ValueError, IndexError, TypeError) as exc:
        return None, f"measuring peaks failed: {exc}"


def _time_cases(task: Task, settings: Settings, run_dir: Path, store: RunStore,
                case_id: str | None) -> tuple[dict[str, float], dict[str, str], Any]:
    """Time the asked case (or every performance case) of the original on the GPU."""

    if case_id is not None:     # time it whatever its role: the evaluator times performance cases
        task = replace(task, cases=tuple(replace(c, role=CaseRole.PERFORMANCE) if c.id == case_id
                                         else c for c in task.cases))
        ids: tuple[str, ...] = (case_id,)
    else:
        ids = tuple(c.id for c in task.performance_cases) or ((task.cases[-1].id,) if task.cases else ())
        if not task.performance_cases and task.cases:
            task = replace(task, cases=task.cases[:-1] + (replace(task.cases[-1], role=CaseRole.PERFORMANCE),))
    with Evaluator(settings, run_dir, store, device="cuda") as evaluator:
        evaluation = evaluator.evaluate(task, (original_variant(task),), purpose="profile",
                                        case_ids=ids, verify=False, time=True, keep_going=True)
    result = evaluation.results[0]
    times = {t.case_id: t.median_ms for t in result.timings if t.samples_ms}
    failures = {f.case_id: f.one_line() for f in result.case_failures if f.case_id}
    if result.failure is not None:
        failures.update({i: result.failure.one_line() for i in ids})
    return times, failures, evaluation.device


STEP_NOTE = "profile seconds: "     # the opening of the note that says where a profile's time went


def step_note(step_s: Sequence[tuple[str, float]]) -> str:
    """The record's note of where a profile's time went (``Profile.step_s``)."""
    return STEP_NOTE + ", ".join(f"{k} {v:.1f}" for k, v in step_s)


class StepClock:
    """Seconds per step of one profile, in the order marked: each ``mark`` ends the step before.
    On an H100 pass (120 s a record, engine 1018ceeea5af, 2026-11-27) the profile took 13-42 s
    of each record, 20 s at the median, with nothing said of where; ``Profile.step_s`` says it."""

    def __init__(self, first: str):
        self.steps: list[tuple[str, float]] = [(first, time.monotonic())]

    def mark(self, step: str) -> None:
        self.steps.append((step, time.monotonic()))

    def seconds(self) -> dict[str, float]:
        ends = [t for _, t in self.steps[1:]] + [time.monotonic()]
        out: dict[str, float] = {}
        for (name, began), end in zip(self.steps, ends):
            out[name] = out.get(name, 0.0) + (end - began)
        return out


def profile_task(task: Task, settings: Settings, options: ProfileOptions = ProfileOptions(),
                 progress: Callable[[str], None] = lambda s: None) -> ProfileOutcome:
    """Profile one case of ``task`` (see the module docstring); never raises for a failing kernel."""

    started = time.monotonic()
    run_dir = Path(settings.run_dir)
    device = resolve_device(settings.device)
    if options.case_id is not None:
        choose_case(task, options.case_id, {})          # a clear error before anything runs
    safe = "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in task.name)
    work = run_dir / "profile" / safe
    work.mkdir(parents=True, exist_ok=True)
    notes: list[str] = []
    steps = StepClock("setup")
    store_path = run_dir / "store.sqlite"
    with RunStore(store_path) as store, ExitStack() as cleanup:
        store.put_task(task)
        time_us, failure, device_name, arch = None, None, "cpu (triton interpreter)", options.arch or 90
        known = device == "cuda" and options.case_id is not None and options.known_time_ms is not None
        if known:
            case, why = choose_case(task, options.case_id, {})
            time_us = options.known_time_ms * 1e3
            device_name = options.device_name or "cuda"
            if options.arch is None and options.capability:
                arch = int(options.capability.replace(".", ""))
            notes.append("time: the caller's measurement of the case (not timed again here)")
        elif device == "cuda":
            progress("timing the original on the GPU")
            times, failures, info = _time_cases(task, settings, run_dir, store, options.case_id)
            device_name = info.name
            if options.arch is None and info.capability:
                arch = int(info.capability.replace(".", ""))
            case, why = choose_case(task, options.case_id, times)
            if case.id in times:
                time_us = times[case.id] * 1e3
            failure = failures.get(case.id)
        else:
            case, why = choose_case(task, options.case_id, stored_times(store, task))
            notes.append("CPU: no GPU timing; the launches were recorded through Triton's "
                         "interpreter without running them, and compiled for "
                         f"sm_{arch} (static stats only)")
        notes.insert(0, f"case {case.id}: {why}")
        progress(f"profiling case {case.id} ({why})")
        try:
            analysis = analyze_source(task.source, task.source_path or task.name)
        except InputError:
            analysis = None

        # the launches (and, on a GPU with ncu, the metrics) of one call
        task_file, capture_path = work / "task.json", work / "launches.json"
        task_file.write_text(dumps(task))
        for stale in (capture_path, work / "ncu_raw.csv"):
            stale.unlink(missing_ok=True)
        cmd = [sys.executable, "-m", "tritonforge.runtime.standalone", "--task-file", str(task_file),
               "--case", case.id, "--module-dir", str(work / "modules"),
               "--record-launches", str(capture_path)]
        ncu: NcuResult | None = None
        # the static compile's children start now, so that they have imported torch and Triton
        # while Nsight Compute runs; in a child the compile's bound holds (``CompileChild``)
        children = [] if device == "cpu" else [CompileChild() for _ in range(STATIC_CHILDREN)]
        for child in children:
            cleanup.callback(child.close)
        if device == "cpu":
            cmd += ["--warmup", "0", "--repeat", "1", "--dry-run"]
        else:
            cmd += ["--warmup", "1", "--repeat", "1", "--profiler-range"]
            if options.use_ncu:
                progress("running Nsight Compute")
                names = tuple(k.name for k in analysis.kernels) if analysis else ()
                steps.mark("ncu lock")
                with gpu_lock(ncu_lock_mode()):     # ncu's metrics are timings too
                    steps.mark("ncu")
                    ncu = profile_with_ncu(NcuRequest(
                        python_cmd=("--profile-from-start", "off", *cmd), kernel_names=names,
                        launch_count=MAX_PROFILED_LAUNCHES, timeout_s=options.ncu_timeout_s,
                        arch=arch), workdir=str(work), env=_child_env(device, options.perf_inputs_dir))
            else:
                notes.append("Nsight Compute was not asked for (--no-ncu)")
        if not capture_path.exists():
            progress("recording the launches")
            steps.mark("launches")
            with gpu_lock(lock_mode(device == "cuda", timed=False)):
                problem = _run_child(cmd, _child_env(device, options.perf_inputs_dir),
                                     settings.case_timeout_s + 120)
            if problem and not capture_path.exists():
                notes.append(f"recording the launches failed: {problem.splitlines()[0][:300]}")
        capture = read_capture(capture_path) if capture_path.exists() else None
        if capture is not None and capture.error:
            first = capture.error.splitlines()[0][:300]
            if capture.dry_run:     # kernels did not run: host code reading outputs may trip
                notes.append(f"the dry run stopped after {len(capture.launches)} launch(es): "
                             f"{first} (kernels were not executed; later launches are missing)")
            else:
                failure = failure or first
                notes.append(f"the case failed after {len(capture.launches)} launch(es): {first}")
        launches = capture.one_call if capture is not None else ()

        # static stats, with the peaks measured meanwhile in a child (GPU only)
        progress(f"compiling {len({x.kernel for x in launches})} kernel(s) for sm_{arch}")
        steps.mark("static compile")
        with ThreadPoolExecutor(max_workers=1) as pool:
            peaks_job = pool.submit(measure_peaks_isolated) if device == "cuda" else None
            requests, stats_failed = launch_requests(launches, arch)
            stats = list(compile_many(requests, workers=min(STATIC_CHILDREN, len(requests)),
                                      timeout_s=options.static_timeout_s,
                                      children=children)) + stats_failed
            peaks, peaks_problem = peaks_job.result() if peaks_job else (None, None)
        if peaks_problem:
            notes.append(peaks_problem.splitlines()[0][:300])

        steps.mark("roofline")
        measured = ncu.kernels if ncu is not None and ncu.ok else ()
        lpc = capture.launches_per_call if capture is not None and capture.launches else len(measured)
        if time_us is None and measured and all(k.duration_us for k in measured):
            time_us = sum(k.duration_us or 0.0 for k in measured)
            notes.append("time: the sum of the profiled launches' durations under Nsight Compute")
        roofline = None
        if peaks is not None and time_us:
            work_done = call_work(measured, stats, launches, analysis,
                                  capture.declared_bytes if capture else None,
                                  capture.declared_flops if capture else None)
            if work_done is not None:
                roofline = place(work_done.bytes_moved, work_done.flops, time_us, peaks,
                                 compute=compute_kind(stats, launches), launches=max(1, lpc))
                notes.append(f"roofline against {peaks.gpu}'s measured peaks ({peaks.dram_bw_gbs:,.0f} "
                             f"GB/s copy); {work_done.basis}")
        profile = build_profile(task.name, case.id, ncu=ncu, stats=stats, roofline=roofline,
                                time_us=time_us, launches_per_call=lpc or None)
        profile = replace(profile, notes=tuple(notes) + profile.notes,
                          step_s=tuple((k, round(v, 2)) for k, v in steps.seconds().items()))
        json_path = Path(options.out) if options.out else run_dir / "profile.json"
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(dumps(profile))
        store.put_profile(task.name, task.source_hash, profile)
    return ProfileOutcome(profile, device, device_name, json_path, store_path, time_us, lpc,
                          failure, time.monotonic() - started)
