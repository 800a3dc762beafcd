"""The device this process evaluates on, resolved once (driver side).

Whether a CUDA GPU is visible is asked in a throwaway child process, so that the driver never
initializes CUDA itself (a forked or later-started worker then owns the GPU alone). That child
imports torch, which takes seconds: the answer is kept for the life of the process, and every
part that needs the device (the CLI's commands, the Evaluator, profiling, test generation) reads
the same ``Hardware`` value instead of asking again. How many threads a compile pass may use
(``compile_threads``) is read here too.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
from dataclasses import dataclass

from ..errors import EnvironmentProblem

log = logging.getLogger(__name__)

_PROBE = "import torch,sys; sys.exit(0 if torch.cuda.is_available() else 1)"
_mu = threading.Lock()
_visible: bool | None = None      # the probe's answer, once asked
probes = 0                        # how many child processes asked (a test counts them)


@dataclass(frozen=True)
class Hardware:
    """Where variants run: 'cuda' (a GPU) or 'cpu' (Triton's interpreter)."""

    device: str

    @property
    def gpu(self) -> bool:
        return self.device == "cuda"


def _probe() -> bool:
    global probes
    probes += 1
    try:
        return subprocess.run([sys.executable, "-c", _PROBE], timeout=120,
                              capture_output=True).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def cuda_available() -> bool:
    """True when a CUDA device is visible; asked in a child process the first time only."""
    global _visible
    with _mu:
        if _visible is None:
            _visible = _probe()
            log.info("CUDA GPU visible: %s", _visible)
        return _visible


def resolve_hardware(setting: str) -> Hardware:
    """``Settings.device`` -> Hardware: 'auto' is 'cuda' when a GPU is visible, else 'cpu'."""
    if setting == "cpu":
        return Hardware("cpu")
    has_gpu = cuda_available()
    if setting == "cuda" and not has_gpu:
        raise EnvironmentProblem("--device cuda was asked for, but no CUDA GPU is visible",
                                 hint="use --device cpu to run through Triton's interpreter")
    return Hardware("cuda" if has_gpu else "cpu")


def resolve_device(setting: str) -> str:
    """``resolve_hardware(setting).device``."""
    return resolve_hardware(setting).device


MAX_COMPILE_THREADS = 8


def compile_threads(setting: int) -> int:
    """Threads for a compile pass: ``setting``, or (0) a quarter of the cores this process may
    run on, 1 to ``MAX_COMPILE_THREADS``: a GPU host's cores are shared by its lanes' workers."""
    if setting > 0:
        return setting
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return max(1, min(MAX_COMPILE_THREADS, cores // 4))
