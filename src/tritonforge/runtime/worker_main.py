"""The worker process: owns one device, evaluates requests until told to stop or its context breaks.

Started by ``runtime.worker_client.Worker`` as ``python -m tritonforge.runtime.worker_main IN OUT DIR``.
IN and OUT are inherited pipe descriptors carrying ``protocol`` messages; the process's own
stdout and stderr go to a log file, so user code may print freely. The device choice comes from
the environment: ``TRITON_INTERPRET=1`` means CPU through Triton's interpreter, set by the driver
before this process imports triton.
"""

from __future__ import annotations

import gc
import os
import sys
from pathlib import Path

from .priority import WORKER_NICE_ENV, from_env, lower_priority   # os alone: nothing heavy

# Imports happen inside the functions: the module is started as the worker's process
# (``python -m``), and nothing heavy (torch, triton, the verifier) is imported before main runs.


def _device_info():
    """The device this worker runs on. Given it by the driver (``protocol.KNOWN_DEVICE_ENV``), as
    another worker of the host reported it, the worker asks CUDA nothing before ``Ready``: its
    CUDA context is made by its first request, under that request's GPU lock, and its start is
    CPU work alone, which may overlap another process's timed call."""
    import torch
    import triton

    from ..model import DeviceInfo
    from .protocol import KNOWN_DEVICE_ENV, device_from_env

    known = os.environ.get(KNOWN_DEVICE_ENV)
    if known and os.environ.get("TRITON_INTERPRET") != "1":
        return device_from_env(known)
    interpreted = os.environ.get("TRITON_INTERPRET") == "1" or not torch.cuda.is_available()
    if interpreted:
        return DeviceInfo("cpu (triton interpreter)", True, torch.__version__, triton.__version__)
    props = torch.cuda.get_device_properties(0)
    return DeviceInfo(props.name, False, torch.__version__, triton.__version__,
                      f"{props.major}.{props.minor}", props.multi_processor_count)


def _release_cached_memory() -> None:
    """Hand the CUDA caching allocator's free blocks back to the device between requests.

    A pass runs a verification pool of several workers per GPU beside a fresh final-check
    worker; each pool worker otherwise kept the blocks its largest request had used. On an H100
    (2026-11-25, add_example, four pool workers) they held 18.2-19.6 GiB each after the search,
    and the final check of a 28.9x candidate died of CUDA out-of-memory allocating 256 MiB.
    What a request keeps alive (captured inputs) stays; only freed blocks go back."""
    import torch

    gc.collect()
    torch.cuda.empty_cache()


def main(argv: list[str]) -> int:
    fd_in, fd_out, module_dir = int(argv[0]), int(argv[1]), Path(argv[2])
    lower_priority(from_env(WORKER_NICE_ENV))      # before torch starts its threads
    from .protocol import Done, EvaluateRequest, Progress, Ready, Shutdown, receive, send
    from .worker_evaluate import evaluate_request

    device = _device_info()
    if device.interpreted:
        from . import cpu_shim

        cpu_shim.install()
    else:
        # the first verification's integrity snapshot imports torch._dynamo (1-3 s); paid here,
        # before Ready, it is part of the start that a final-check worker makes ahead of need
        # (runtime.evaluator.PrestartedEvaluators). Not on the CPU: tests start many workers.
        from ..verify.integrity import settle_lazy_rewrites

        settle_lazy_rewrites()
    send(fd_out, Ready(device, os.getpid()))
    while True:
        message = receive(fd_in)
        if message is None or isinstance(message, Shutdown):
            return 0
        if not isinstance(message, EvaluateRequest):
            print(f"worker: ignoring unknown message {type(message).__name__}", file=sys.stderr)
            continue
        evaluation, broken = evaluate_request(message, device, module_dir,
                                              lambda p: send(fd_out, p))
        send(fd_out, Done(evaluation, broken))
        if broken:
            return 3
        if not device.interpreted:
            _release_cached_memory()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
