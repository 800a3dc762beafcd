"""Turn an exception raised by a variant into a recorded failure (status, short reason, detail)."""

from __future__ import annotations

import traceback

from ..model import Failure, Status

# statuses of a variant that took the worker process down with it (it is restarted)
WORKER_KILLERS = frozenset({Status.CRASH, Status.OOM, Status.TIMEOUT})

# CUDA errors after which the context is unusable: the worker must be replaced.
_STICKY = ("illegal memory access", "unspecified launch failure", "device-side assert",
           "misaligned address", "illegal instruction", "an illegal", "CUDA_ERROR_ILLEGAL",
           "uncorrectable ECC", "cudaErrorLaunchFailure")


def _chain_text(exc: BaseException) -> str:
    return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))[-6000:]


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    line = text[0] if text else type(exc).__name__
    return f"{type(exc).__name__}: {line}"[:300]


def classify_exception(exc: BaseException, *, case_id: str | None = None,
                       seed: int | None = None, importing: bool = False) -> tuple[Failure, bool]:
    """Return the failure for ``exc`` and whether the CUDA context is now broken."""
    name = type(exc).__name__
    module = type(exc).__module__ or ""
    text = str(exc)
    detail = _chain_text(exc)
    broken = any(s in text for s in _STICKY)
    if broken:
        status, reason = Status.CRASH, _first_line(exc)
    elif name == "OutOfMemoryError" or isinstance(exc, MemoryError) or "out of memory" in text.lower():
        status, reason = Status.OOM, _first_line(exc)
    elif name == "OutOfResources":
        status, reason = Status.COMPILE_ERROR, f"out of resources: {text.strip()[:200]}"
    elif module.startswith("triton.compiler") or name in ("CompilationError", "CompileTimeAssertionFailure"):
        status, reason = Status.COMPILE_ERROR, _first_line(exc)
    elif importing:
        status, reason = Status.IMPORT_ERROR, _first_line(exc)
    else:
        status, reason = Status.RUNTIME_ERROR, _first_line(exc)
    return Failure(status, reason, detail, case_id, seed), broken
