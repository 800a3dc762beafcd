"""Running Nsight Compute on a worker command, and reading its results.

``build_ncu_command`` wraps a Python command (normally ``python -m tritonforge.runtime.standalone
...``) in ``ncu``, narrowed to the task's kernels (a kernel-name regex or an NVTX range) and to a
window of launches (skip/count), with ``--clock-control none`` by default (the GPU's clocks are
measured as found, as the timing is), and the metrics of ``profile.metrics``'s table, printed as
``--csv --page raw`` into a log file. ``run_ncu`` runs it with a timeout and sorts the outcome
into a typed status: ok, ncu-missing, permission (ERR_NVGPUCTRPERM, with the fix), timeout,
no-kernels or failed. Callers fall back to timing plus static stats on anything but ok, and say
so (see ``profile.build``).

``read_ncu_report`` reads a saved ``.ncu-rep`` through the ``ncu_report`` module that ships with
Nsight Compute (``<install>/extras/python``), or through ``ncu --import ... --csv`` when only the
executable is there.
"""

from __future__ import annotations

import enum
import glob
import importlib.util
import json
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from ..config import env_settings
from ..errors import EnvironmentProblem
from ..model import KernelProfile, Metric
from .metrics import METRICS, convert, ncu_metric_names, parse_raw_csv

log = logging.getLogger(__name__)

NCU_SEARCH_GLOBS = ("/opt/nvidia/nsight-compute/*/ncu", "/usr/local/cuda*/bin/ncu",
                    "/usr/local/cuda*/nsight-compute*/ncu")
PERMISSION_FIX = (
    "the GPU's performance counters are restricted to admin users (ERR_NVGPUCTRPERM): run the "
    "profiling as root, or allow all users with the driver option NVreg_RestrictProfilingToAdminUsers=0 "
    "(e.g. 'options nvidia NVreg_RestrictProfilingToAdminUsers=0' in /etc/modprobe.d/, then reload "
    "the driver or reboot); see https://developer.nvidia.com/ERR_NVGPUCTRPERM")


class NcuStatus(str, enum.Enum):
    OK = "ok"
    NCU_MISSING = "ncu-missing"
    PERMISSION = "permission"
    TIMEOUT = "timeout"
    NO_KERNELS = "no-kernels"
    FAILED = "failed"


@dataclass(frozen=True)
class NcuResult:
    """The outcome of one ncu run: a status, a message a user can act on, the parsed kernels."""

    status: NcuStatus
    message: str
    kernels: tuple[KernelProfile, ...] = ()
    command: tuple[str, ...] = ()
    returncode: int | None = None
    elapsed_s: float = 0.0
    output_tail: str = ""
    csv_path: str | None = None

    @property
    def ok(self) -> bool:
        return self.status is NcuStatus.OK


def find_ncu() -> str | None:
    """The ncu executable: $TRITONFORGE_NCU, PATH, then the usual install folders (newest first)."""
    explicit = env_settings().ncu
    if explicit:
        return explicit if os.access(explicit, os.X_OK) else None
    found = shutil.which("ncu")
    if found:
        return found
    for pattern in NCU_SEARCH_GLOBS:
        hits = sorted(glob.glob(pattern), key=_version_key, reverse=True)
        hits = [h for h in hits if os.access(h, os.X_OK)]
        if hits:
            return hits[0]
    return None


def _version_key(path: str) -> tuple:
    return tuple(int(x) for x in re.findall(r"\d+", path))


def kernel_regex(names: Sequence[str]) -> str:
    """An ncu kernel-name regex matching exactly these kernel (function) names."""
    return "^(" + "|".join(re.escape(n) for n in names) + ")$"


def build_ncu_command(
    python_cmd: Sequence[str],
    kernel_regex: str | None,
    launch_skip: int = 0,
    launch_count: int = 1,
    metrics: Sequence[str] | None = None,
    clock_control: str = "none",
    out_csv: str | None = None,
    *,
    ncu_path: str | None = None,
    nvtx_include: str | None = None,
    arch: int = 90,
    extra_args: Sequence[str] = (),
) -> list[str]:
    """The ncu command line that profiles ``python_cmd``'s matching launches.

    ``metrics`` are ncu metric names (default: the whole short-name table for ``arch``); the raw
    CSV page goes to ``out_csv`` (ncu's ``--log-file``) so that the program's own output stays
    apart. ``nvtx_include`` (e.g. "tritonforge/") narrows to launches inside that NVTX range.
    """
    if launch_skip < 0 or launch_count < 1:
        raise ValueError(f"launch_skip must be >= 0 and launch_count >= 1, got {launch_skip}, {launch_count}")
    names = list(metrics) if metrics else ncu_metric_names(arch=arch)
    cmd = [ncu_path or find_ncu() or "ncu",
           "--target-processes", "all",
           "--clock-control", clock_control,
           "--csv", "--page", "raw", "--print-units", "base",
           "--metrics", ",".join(names)]
    if kernel_regex:
        cmd += ["--kernel-name-base", "function", "--kernel-name", f"regex:{kernel_regex}"]
    if nvtx_include:
        cmd += ["--nvtx", "--nvtx-include", nvtx_include]
    cmd += ["--launch-skip", str(launch_skip), "--launch-count", str(launch_count)]
    if out_csv:
        cmd += ["--log-file", out_csv]
    cmd += list(extra_args)
    cmd += list(python_cmd)
    return cmd


def _classify(text: str, returncode: int | None) -> tuple[NcuStatus, str] | None:
    if "ERR_NVGPUCTRPERM" in text:
        return NcuStatus.PERMISSION, PERMISSION_FIX
    if "No kernels were profiled" in text:
        return NcuStatus.NO_KERNELS, ("ncu ran but profiled no kernel: check the kernel-name "
                                      "filter, the NVTX range and the launch skip/count")
    errors = [ln for ln in text.splitlines() if ln.startswith("==ERROR==")]
    if returncode not in (0, None) or errors:
        detail = "; ".join(errors[:3]) or f"exit status {returncode}"
        return NcuStatus.FAILED, f"ncu failed: {detail}"
    return None


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=5)
    except (ProcessLookupError, subprocess.TimeoutExpired, PermissionError):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        proc.wait()


def run_ncu(cmd: Sequence[str], timeout_s: float, *, env: dict[str, str] | None = None,
            cwd: str | None = None) -> NcuResult:
    """Run an ncu command line (from ``build_ncu_command``) and parse what it measured.

    The command runs in its own process group, killed whole on timeout. The CSV is read from the
    ``--log-file`` path in the command when there is one, else from the command's output.
    """
    cmd = list(cmd)
    start = time.monotonic()
    csv_path = cmd[cmd.index("--log-file") + 1] if "--log-file" in cmd else None
    with tempfile.TemporaryFile("w+") as out:
        try:
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=cwd,
                                    start_new_session=True, text=True)
        except FileNotFoundError:
            return NcuResult(NcuStatus.NCU_MISSING,
                             f"Nsight Compute ('{cmd[0]}') is not installed or not on PATH: install "
                             "it, put ncu on PATH or set TRITONFORGE_NCU; profiling falls back to "
                             "timing plus static stats", command=tuple(cmd))
        except PermissionError as exc:
            return NcuResult(NcuStatus.NCU_MISSING, f"cannot execute {cmd[0]}: {exc}", command=tuple(cmd))
        try:
            returncode: int | None = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            out.seek(0)
            return NcuResult(NcuStatus.TIMEOUT,
                             f"ncu did not finish in {timeout_s:.0f} s (each profiled launch is "
                             "replayed once per metric pass): raise the timeout, profile fewer "
                             "launches or ask for fewer metrics", command=tuple(cmd),
                             elapsed_s=time.monotonic() - start, output_tail=out.read()[-4000:],
                             csv_path=csv_path)
        out.seek(0)
        output = out.read()
    elapsed = time.monotonic() - start
    csv_text = ""
    if csv_path and os.path.exists(csv_path):
        csv_text = Path(csv_path).read_text(errors="replace")
    text = output + "\n" + csv_text
    kernels = tuple(parse_raw_csv(csv_text or output))
    verdict = _classify(text, returncode)
    common = dict(command=tuple(cmd), returncode=returncode, elapsed_s=elapsed,
                  output_tail=text[-4000:], csv_path=csv_path)
    if verdict is not None and not (verdict[0] is NcuStatus.FAILED and kernels and returncode == 0):
        status, message = verdict
        log.info("ncu: %s: %s", status.value, message)
        return NcuResult(status, message, kernels, **common)
    if not kernels:
        return NcuResult(NcuStatus.NO_KERNELS, "ncu finished but its output holds no profiled "
                         "kernel: check the kernel-name filter and launch skip/count", **common)
    return NcuResult(NcuStatus.OK, f"profiled {len(kernels)} launch(es) in {elapsed:.1f} s",
                     kernels, **common)


# ---- saved reports ---------------------------------------------------------------------------

def ncu_report_paths() -> list[str]:
    """Folders that may hold the ``ncu_report`` module (newest Nsight Compute first)."""
    paths = sorted(glob.glob("/opt/nvidia/nsight-compute/*/extras/python"), key=_version_key,
                   reverse=True)
    ncu = find_ncu()
    if ncu:
        beside = Path(os.path.realpath(ncu)).parent / "extras" / "python"
        if beside.is_dir() and str(beside) not in paths:
            paths.insert(0, str(beside))
    return paths


def ncu_report_available() -> bool:
    """Whether some Python here can import ncu_report (checked without importing it)."""
    return bool(ncu_report_paths()) or importlib.util.find_spec("ncu_report") is not None


# Runs in a child process: ncu_report's native library has crashed (SIGSEGV) when loaded into a
# process that already holds torch (seen on an H200 with Nsight Compute 2025.3.1, torch 2.11).
_CHILD_READER = r"""
import json, sys
sys.path[:0] = json.loads(sys.argv[2])
import ncu_report
names = json.loads(sys.stdin.read())
ctx = ncu_report.load_report(sys.argv[1])
out = []
for r in range(ctx.num_ranges()):
    rng = ctx.range_by_idx(r)
    for a in range(rng.num_actions()):
        act = rng.action_by_idx(a)
        vals = {}
        for n in names:
            m = act.metric_by_name(n)
            if m is None:
                continue
            try:
                v = float(m.as_double())
            except Exception:
                continue
            try:
                u = m.unit() or ""
            except Exception:
                u = ""
            vals[n] = [v, u]
        out.append({"name": act.name(), "metrics": vals})
sys.stdout.write("\n" + json.dumps(out) + "\n")
"""

_BASE_UNIT = {"us": "nsecond", "B": "byte", "GB/s": "byte/second"}


def _read_in_child(path: str, timeout_s: float = 300.0) -> list[KernelProfile]:
    names = [spec.ncu for spec in METRICS]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([sys.executable, "-c", _CHILD_READER, path, json.dumps(ncu_report_paths())],
                          input=json.dumps(names), capture_output=True, text=True,
                          timeout=timeout_s, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"ncu_report reader exited with {done.returncode}: {done.stderr[-500:]}")
    actions = json.loads(done.stdout.strip().splitlines()[-1])
    profiles = []
    for launch, action in enumerate(actions):
        metrics = []
        for spec in METRICS:
            if spec.ncu not in action["metrics"]:
                continue
            value, unit = action["metrics"][spec.ncu]
            unit = unit or _BASE_UNIT.get(spec.unit, spec.unit)
            metrics.append(Metric(spec.short, convert(value, unit, spec.unit), spec.unit))
        duration = next((m.value for m in metrics if m.name == "duration_us"), None)
        profiles.append(KernelProfile(kernel=action["name"], metrics=tuple(metrics),
                                      duration_us=duration, launch_id=launch))
    return profiles


def read_ncu_report(path: str) -> list[KernelProfile]:
    """Read a saved ``.ncu-rep``: through ncu_report (in a child process) when some Nsight Compute
    install provides it, else through ``ncu --import REPORT --csv --page raw``."""
    if not os.path.exists(path):
        raise EnvironmentProblem(f"no such ncu report: {path}")
    problem = ""
    if ncu_report_available():
        try:
            return _read_in_child(os.path.abspath(path))
        except (RuntimeError, ValueError, IndexError, KeyError, subprocess.TimeoutExpired) as exc:
            problem = f"ncu_report failed ({exc}); "
            log.warning("reading %s through ncu_report failed, trying ncu --import: %s", path, exc)
    ncu = find_ncu()
    if ncu is None:
        raise EnvironmentProblem(
            f"cannot read {path}: {problem}neither the ncu_report module nor the ncu executable is here",
            hint="install Nsight Compute (its extras/python holds ncu_report), or export the "
                 "report as CSV with 'ncu --import REPORT --csv --page raw' and parse_raw_csv it")
    done = subprocess.run([ncu, "--import", path, "--csv", "--page", "raw", "--print-units", "base"],
                          capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise EnvironmentProblem(f"{problem}ncu --import {path} failed: {done.stderr[-500:]}")
    return parse_raw_csv(done.stdout)


@dataclass(frozen=True)
class NcuRequest:
    """What to profile: a command, the kernels, the launch window, limits."""

    python_cmd: tuple[str, ...]
    kernel_names: tuple[str, ...] = ()
    launch_skip: int = 0
    launch_count: int = 1
    timeout_s: float = 300.0
    clock_control: str = "none"
    metrics: tuple[str, ...] = field(default=())
    arch: int = 90


def profile_with_ncu(request: NcuRequest, workdir: str | None = None,
                     env: dict[str, str] | None = None) -> NcuResult:
    """Build, run and parse in one call; the CSV lands in ``workdir`` (a temp folder by default)."""
    ncu = find_ncu()
    if ncu is None:
        return NcuResult(NcuStatus.NCU_MISSING,
                         "Nsight Compute (ncu) was not found on PATH, in $TRITONFORGE_NCU or under "
                         "/opt/nvidia/nsight-compute: profiling falls back to timing plus static stats")
    folder = workdir or tempfile.mkdtemp(prefix="tritonforge-ncu-")
    out_csv = os.path.join(folder, "ncu_raw.csv")
    metrics = list(request.metrics or ncu_metric_names(arch=request.arch))
    regex = kernel_regex(request.kernel_names) if request.kernel_names else None

    def attempt(names: list[str]) -> NcuResult:
        cmd = build_ncu_command(request.python_cmd, regex, request.launch_skip,
                                request.launch_count, names, request.clock_control, out_csv,
                                ncu_path=ncu, arch=request.arch)
        return run_ncu(cmd, request.timeout_s, env=env)

    result = attempt(metrics)
    unknown = set(unknown_metrics(result.output_tail)) if result.status is NcuStatus.FAILED else set()
    if unknown and unknown & set(metrics):
        # an older ncu or another chip lacks some metrics of the table: drop them, say so, retry
        kept = [m for m in metrics if m not in unknown]
        log.info("ncu does not know %s; retrying without them", ", ".join(sorted(unknown)))
        retry = attempt(kept)
        note = f" (without metrics this ncu lacks: {', '.join(sorted(unknown))})"
        return NcuResult(retry.status, retry.message + note, retry.kernels, retry.command,
                         retry.returncode, result.elapsed_s + retry.elapsed_s, retry.output_tail,
                         retry.csv_path)
    return result


def unknown_metrics(output: str) -> list[str]:
    """Metric names ncu reported it could not find ("Failed to find metric X")."""
    return re.findall(r"Failed to find metric\s+(?:regex:)?([\w.]+)", output)
