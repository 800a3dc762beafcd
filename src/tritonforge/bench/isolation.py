"""Is a GPU's timing undisturbed by work on another GPU of the host? (``bench isolation``)

The per-GPU executor times records on one GPU while others run verification, compilation,
profiling and timing on theirs; the host's CPU cores, PCIe and power are shared. This times the
same records on GPU A three times in one worker (driver side; the worker sees GPU A alone):
alone, beside a busy neighbour on GPU B (``NEIGHBOUR``: large matmuls and host<->device copies
in a loop, in its own process, plus ``busy_cores`` processes spinning on the host's cores as a
lane's compiling workers do), and alone again. A case's ratio is its time beside the
neighbour over the mean of its two times alone; BENCHMARK.md's bar is within 2% on cases over
50 us. The second time alone shows the drift that is not the neighbour's.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from ..config import Settings
from ..errors import EnvironmentProblem
from ..model import Task
from ..runtime.evaluator import Evaluator
from .selfcheck import self_check

log = logging.getLogger(__name__)

LONG_CASE_MS = 0.05


@dataclass(frozen=True)
class IsolationCase:
    name: str
    case_id: str
    alone_ms: float
    beside_ms: float
    alone_again_ms: float

    @property
    def ratio(self) -> float:
        base = (self.alone_ms + self.alone_again_ms) / 2
        return self.beside_ms / base if base > 0 else float("nan")

    @property
    def drift(self) -> float:
        return self.alone_again_ms / self.alone_ms if self.alone_ms > 0 else float("nan")

    @property
    def long(self) -> bool:
        return min(self.alone_ms, self.beside_ms, self.alone_again_ms) > LONG_CASE_MS


NEIGHBOUR = """
import sys, time, torch
end = time.time() + float(sys.argv[1])
a = torch.randn(8192, 8192, device="cuda", dtype=torch.float16)
host = torch.empty(256 * 2**20, dtype=torch.uint8).pin_memory()
dev = torch.empty_like(host, device="cuda")
print("neighbour busy", flush=True)
while time.time() < end:
    for _ in range(8):
        a = (a @ a).clamp_(-1, 1)
    dev.copy_(host, non_blocking=True)
    host.copy_(dev, non_blocking=True)
    torch.cuda.synchronize()
"""


SPIN = "import sys, time\nend = time.time() + float(sys.argv[1])\nwhile time.time() < end: pass\n"


def start_neighbour(gpu: str, seconds: float, busy_cores: int = 0) -> list[subprocess.Popen]:
    """Processes keeping GPU ``gpu`` (and its PCIe link) and ``busy_cores`` host cores busy for
    ``seconds``; the GPU one is running its loop when this returns."""
    env = dict(os.environ, CUDA_VISIBLE_DEVICES=gpu)
    env.pop("TRITON_INTERPRET", None)
    proc = subprocess.Popen([sys.executable, "-c", NEIGHBOUR, str(seconds)], env=env,
                            stdout=subprocess.PIPE, text=True, start_new_session=True)
    assert proc.stdout is not None
    if not proc.stdout.readline().startswith("neighbour busy"):   # its loop runs: else no check
        proc.kill()
        raise EnvironmentProblem(f"the busy neighbour on GPU {gpu} did not start (exit {proc.wait()})",
                          hint="give two GPUs of this host: --gpus A,B")
    spinners = [subprocess.Popen([sys.executable, "-c", SPIN, str(seconds)],
                                 start_new_session=True) for _ in range(busy_cores)]
    return [proc, *spinners]


def _medians(task: Task, evaluator) -> dict[str, float]:
    check = self_check(task, evaluator)
    if check.error:
        log.warning("isolation: %s: %s", task.name, check.error)
    return {r.case_id: r.median_a_ms for r in check.ratios}


def measure(tasks: list[Task], settings: Settings, work_dir: Path, gpu: str, neighbour_gpu: str,
            progress=lambda s: None, busy_cores: int = 4) -> list[IsolationCase]:
    """Every performance case of ``tasks`` on ``gpu``: alone, beside a busy ``neighbour_gpu``,
    alone again (one worker throughout, no cached timings)."""
    old = os.environ.get("CUDA_VISIBLE_DEVICES")
    os.environ["CUDA_VISIBLE_DEVICES"] = gpu          # the worker starts with GPU A alone
    try:
        with Evaluator(settings, work_dir, None) as ev:
            alone = {t.name: _medians(t, ev) for t in tasks}
            progress(f"alone on GPU {gpu}: done")
            neighbours = start_neighbour(neighbour_gpu, 3600, busy_cores)
            try:
                time.sleep(2.0)
                beside = {t.name: _medians(t, ev) for t in tasks}
            finally:
                for p in neighbours:
                    p.kill()
                    p.wait()
            progress(f"beside a busy GPU {neighbour_gpu}: done")
            again = {t.name: _medians(t, ev) for t in tasks}
    finally:
        if old is None:
            os.environ.pop("CUDA_VISIBLE_DEVICES", None)
        else:
            os.environ["CUDA_VISIBLE_DEVICES"] = old
    cases = []
    for t in tasks:
        for cid, a in alone[t.name].items():
            if cid in beside[t.name] and cid in again[t.name]:
                cases.append(IsolationCase(t.name, cid, a, beside[t.name][cid], again[t.name][cid]))
    return cases


from ..model.serialize import register as _register  # noqa: E402

_register(IsolationCase)
