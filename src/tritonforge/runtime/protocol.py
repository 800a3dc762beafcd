"""Messages between the driver and its worker process, framed as length-prefixed pickles.

The worker talks over two pipes of its own (not stdout/stderr, which belong to the user's code and
go to a log file), so a kernel that prints cannot corrupt the protocol.
"""

from __future__ import annotations

import json
import os
import pickle
import struct
from dataclasses import asdict, dataclass

from ..model import DeviceInfo, Evaluation, Task, Variant
from .timing import TimingPlan

_HEADER = struct.Struct("<Q")


@dataclass(frozen=True)
class EvaluateRequest:
    """Evaluate ``variants`` (the first is the reference) on ``task``'s cases.

    ``case_ids`` narrows the cases (None: all). With ``verify`` each non-reference variant is
    checked against the reference on every correctness case and seed; with ``time`` the
    performance cases are timed, all variants interleaved.

    A verification's checks that judge the candidate as a whole rather than case by case run
    where the request says: ``first_calls``, its first calls bare before any guard (verify.
    shipped_checks.bare_first), in the first request that verifies it; ``second_pass``, the
    recheck on a fresh seed and the bare-call probe, in the last (``search.cascade``).
    """

    task: Task
    variants: tuple[Variant, ...]
    case_ids: tuple[str, ...] | None = None
    verify: bool = True
    time: bool = True
    timing: TimingPlan = TimingPlan()
    run_cases: bool = True        # run every selected case once per variant (baseline checks)
    keep_going: bool = False      # record a failing case and go on with the others (baselines)
    compile_only: bool = False    # kernels are compiled, never launched (Evaluator._compile_first)
    first_calls: bool = True      # verify: the candidate's first calls bare, before any guard
    second_pass: bool = True      # verify: the fresh-seed recheck and the bare-call probe
    compile_threads: int = 1      # compile_only: kernels compiled side by side in this many threads
    nonce: int | None = None      # verify: the run's recheck nonce (runtime.evaluator.RUN_NONCE);
    # None: the worker's own
    end_by: float | None = None   # time: when (``time.monotonic()``, one clock for the host's
    # processes) the timing should have ended; each case's rounds past the minimum stop at its
    # share of what is left (runtime.worker_evaluate). None: the plan alone decides


@dataclass(frozen=True)
class Shutdown:
    pass


@dataclass(frozen=True)
class Ready:
    device: DeviceInfo
    pid: int


# The device a worker is started on, as another worker of the host reported it in its ``Ready``
# (``runtime.worker_client.Worker``'s ``known_device``): a worker given it reports it back without
# asking CUDA, and makes its CUDA context in its first request, so its start is CPU work alone.
KNOWN_DEVICE_ENV = "TRITONFORGE_WORKER_KNOWN_DEVICE"


def device_to_env(device: DeviceInfo) -> str:
    return json.dumps(asdict(device), sort_keys=True)


def device_from_env(text: str) -> DeviceInfo:
    return DeviceInfo(**json.loads(text))


@dataclass(frozen=True)
class Progress:
    stage: str                    # import | run | verify | time
    variant: str | None = None
    case_id: str | None = None


@dataclass(frozen=True)
class Done:
    evaluation: Evaluation
    context_broken: bool = False  # a sticky CUDA error: the worker exits after this message


def send(fd: int, message: object) -> None:
    payload = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    data = _HEADER.pack(len(payload)) + payload
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _read_exact(fd: int, n: int) -> bytes | None:
    chunks = []
    while n:
        chunk = os.read(fd, min(n, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def receive(fd: int) -> object | None:
    """Read one message; None on end of file (the other side is gone)."""
    header = _read_exact(fd, _HEADER.size)
    if header is None:
        return None
    (length,) = _HEADER.unpack(header)
    payload = _read_exact(fd, length)
    if payload is None:
        return None
    return pickle.loads(payload)
