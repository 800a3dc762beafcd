"""Compile in a child process with Triton's interpreter off: the parent's side, and the JSON both
sides speak.

A process that imported triton with ``TRITON_INTERPRET=1`` (the CPU test setup, the CPU runtime)
holds interpreter versions of ``tl.sum``, ``tl.cdiv`` and the rest of Triton's library, which the
real compiler cannot call. The child (``python -m tritonforge.profile.compile_child_main``) starts
without that variable, reads a JSON list of requests on stdin and writes a JSON list of
CompileStats on stdout. Constexpr values travel as JSON (numbers, strings, booleans, None, Triton
dtypes). This module imports nothing of ``profile.static``, which calls it.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
from typing import Any

from ..model import CompileStats


def _encode_value(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if type(value).__name__ == "dtype" and hasattr(value, "name"):      # tl.float16 and friends
        return {"tl_dtype": value.name}
    if isinstance(value, (tuple, list)):
        return {"tuple": [_encode_value(v) for v in value]}
    raise TypeError(f"constexpr value {value!r} cannot be sent to the compile child")


def decode_value(value: Any) -> Any:
    if isinstance(value, dict) and "tl_dtype" in value:
        import triton.language as tl   # only the child decodes dtypes: the parent needs no triton
        return tl.dtype(value["tl_dtype"])
    if isinstance(value, dict) and "tuple" in value:
        return tuple(decode_value(v) for v in value["tuple"])
    return value


def encode_request(r: Any) -> dict:
    sig = r.signature
    return {
        "source_path": os.path.abspath(r.source_path), "kernel_name": r.kernel_name,
        "types": [list(t) for t in sig.types],
        "constexprs": [[k, _encode_value(v)] for k, v in sig.constexprs],
        "divisible_by_16": list(sig.divisible_by_16),
        "num_warps": r.num_warps, "num_stages": r.num_stages, "target": list(r.target),
        "options": [[k, _encode_value(v)] for k, v in r.options],
    }


def stats_to_json(s: CompileStats) -> dict:
    d = dataclasses.asdict(s)
    d["constexprs"] = [[k, _encode_value(v)] for k, v in s.constexprs]
    return d


def stats_from_json(d: dict) -> CompileStats:
    d = dict(d)
    d["constexprs"] = tuple((k, decode_value(v)) for k, v in d.get("constexprs", []))
    d["warnings"] = tuple(d.get("warnings", ()))
    known = {f.name for f in dataclasses.fields(CompileStats)}
    return CompileStats(**{k: v for k, v in d.items() if k in known})


class CompileChild:
    """A compile child started before its requests are known (``warm``: it imports torch and
    Triton's compiler while it waits), so that its start overlaps the caller's other work; its
    ``compile`` is bounded by a timeout that kills the child's whole process group.

    Why: the profile's static compile ran in the driver's own process wherever it had one
    request, where no timeout can hold: on two H200s (engine c064071456aa, 2026-11-28)
    attn_fwd_causal's one kernel compiled for 61 s against a 30 s bound, in a 120 s record. A
    child started before Nsight Compute runs has imported torch and Triton by the time the
    launches are known (``profile.session``)."""

    def __init__(self, warm: bool = True):
        env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
        cmd = [sys.executable, "-m", "tritonforge.profile.compile_child_main"]
        self._proc = subprocess.Popen(cmd + (["--warm"] if warm else []), stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                      env=env, start_new_session=True)
        self._used = False

    def compile(self, requests: list, timeout_s: float = 600.0) -> list[CompileStats]:
        """Compile ``requests`` in this child (once: a child serves one list); a child that
        fails or runs out of time yields error stats for all of them."""
        if self._used:
            raise RuntimeError("a CompileChild compiles one list of requests")
        self._used = True
        payload = json.dumps([encode_request(r) for r in requests])
        try:
            try:
                out, err = self._proc.communicate(payload, timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self.close()
                raise RuntimeError(f"timed out after {timeout_s:.0f} s") from None
            except (BrokenPipeError, OSError) as exc:
                self.close()
                raise RuntimeError(f"the child is gone: {exc}") from None
            if self._proc.returncode != 0:
                raise RuntimeError(f"compile child exited with {self._proc.returncode}: {err[-2000:]}")
            return [stats_from_json(d) for d in json.loads(out.strip().splitlines()[-1])]
        except (RuntimeError, ValueError, IndexError) as exc:
            return [CompileStats(kernel=r.kernel_name, target=f"{r.target[0]}:{r.target[1]}",
                                 num_warps=r.num_warps, num_stages=r.num_stages,
                                 error=f"compile child failed: {exc}") for r in requests]

    def close(self) -> None:
        """Stop the child (and anything it started) if it still runs; safe to call twice."""
        if self._proc.poll() is None:
            try:
                os.killpg(self._proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                self._proc.kill()
        try:
            self._proc.communicate(timeout=5)
        except (subprocess.TimeoutExpired, ValueError, OSError):
            pass


def compile_in_child(requests: list, timeout_s: float = 600.0,
                     child: CompileChild | None = None) -> list[CompileStats]:
    """Run the requests in one child process (``child``: one started ahead, else a new one,
    not warmed); a child that fails or runs out of time yields error stats for all."""
    own = child is None
    child = child or CompileChild(warm=False)
    try:
        return child.compile(requests, timeout_s=timeout_s)
    finally:
        if own:
            child.close()
