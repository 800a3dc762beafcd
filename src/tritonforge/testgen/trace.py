"""Run a kernel file's own test or example in a separate process and read back what it called.

The driver never imports the user's file: ``trace_source`` writes a request, starts
``python -m tritonforge.testgen._trace_main`` in its own process group with a timeout (killed as a
group when it overruns), and decodes the JSON it leaves into a ``Trace``. On the CPU the child runs
Triton's interpreter with the CPU shim, so tests written for ``device='cuda'`` run there too.

Which code drives the calls (``driver``):
- ``section``: a TritonBench-style test section, executed in a copy of the module's namespace;
- ``tests``: the module's ``test_*`` functions (``pytest.mark.parametrize`` expanded);
- ``main``: the body of its ``if __name__ == "__main__":`` block;
- ``auto``: tests, then the main block if the tests launched nothing.
"""

from __future__ import annotations

import ast
import json
import logging
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from ..model import content_hash
from .model import (
    ArgNode, KernelLaunch, Parameter, TensorStats, Trace, TracedCall, TracedSeq, TracedTensor,
    TracedValue,
)

log = logging.getLogger(__name__)

_SRC_ROOT = str(Path(__file__).resolve().parents[2])


def trace_source(module_path: str | Path, *, section_path: str | Path | None = None,
                 driver: str = "auto", device: str = "cpu", functions: tuple[str, ...] | None = None,
                 timeout_s: float = 180.0, work_dir: str | Path, max_calls: int = 64,
                 values_limit: int = 4096, seed: int = 0) -> Trace:
    """Run the test or example of the module at ``module_path`` and return what it recorded.

    ``functions`` limits the watched functions (default: every top-level function and autograd
    Function of the module). The child stops itself at ``timeout_s`` and keeps what it recorded;
    if it does not, it is killed 30 s later.
    """
    work = Path(work_dir)
    work.mkdir(parents=True, exist_ok=True)
    module_path = Path(module_path).resolve()
    tag = content_hash(f"{module_path}|{section_path}|{driver}|{device}|{time.time_ns()}")
    request = {
        "module_path": str(module_path), "module_name": f"tf_trace_{_safe(module_path.stem)}_{tag}",
        "driver": "section" if section_path else driver,
        "section_path": str(Path(section_path).resolve()) if section_path else None,
        "wrap": list(functions) if functions else None, "device": device,
        "deadline_s": timeout_s, "max_calls": max_calls, "values_limit": values_limit, "seed": seed,
    }
    req_path, out_path, log_path = (work / f"trace_{tag}.{ext}" for ext in ("req.json", "out.json", "log"))
    req_path.write_text(json.dumps(request), encoding="utf-8")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([_SRC_ROOT, str(module_path.parent)]
                                        + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env["PYTHONUNBUFFERED"] = "1"
    if device == "cpu":
        env["TRITON_INTERPRET"] = "1"
    else:
        env.pop("TRITON_INTERPRET", None)
    started = time.perf_counter()
    with open(log_path, "wb") as log_file:
        proc = subprocess.Popen([sys.executable, "-m", "tritonforge.testgen._trace_main",
                                 str(req_path), str(out_path)], cwd=str(work), env=env,
                                stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
        try:
            proc.wait(timeout=timeout_s + 30)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
    wall = time.perf_counter() - started
    tail = _tail(log_path)
    if not out_path.exists():
        code = proc.returncode
        timed_out = wall > timeout_s
        if timed_out:
            reason = f"the tracing process was killed after {wall:.0f} s"
        elif code is not None and code < 0:
            reason = f"the tracing process died of signal {signal.Signals(-code).name}"
        else:
            reason = f"the tracing process died (exit status {code}) without a trace"
        partial = Path(str(out_path) + ".partial")
        data = json.loads(partial.read_text(encoding="utf-8")) if partial.exists() else {}
        data.update(ok=False, driver=request["driver"], device=device, error=reason,
                    error_detail=tail, timed_out=timed_out, died=code is not None and code != 0)
        return decode_trace(data, wall, "")
    data = json.loads(out_path.read_text(encoding="utf-8"))
    return decode_trace(data, wall, tail)


def top_level_imports(source: str) -> str:
    """The ``import`` statements at the top level of ``source`` (a test section's), as code.

    In a TritonBench file the kernel module and its test section are one module, so the
    module's functions may use names only the section imports; tracing and validation add them
    to the module, as the file itself does.
    """
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return ""
    return "\n".join(ast.unparse(n) for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom)))


def _safe(text: str) -> str:
    return re.sub(r"\W", "_", text)[:40]


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()
    proc.wait()


def _tail(path: Path, chars: int = 4000) -> str:
    try:
        return path.read_bytes()[-chars:].decode("utf-8", "replace")
    except OSError:
        return ""


# ----------------------------------------------------------------------------- decoding

def _stats(d: dict | None) -> TensorStats | None:
    if not d:
        return None
    values = d.get("values")
    return TensorStats(numel=int(d.get("numel", 0)), finite=int(d.get("finite", 0)),
                       min=d.get("min"), max=d.get("max"), mean=d.get("mean"), std=d.get("std"),
                       kurtosis=d.get("kurtosis"), zero_frac=float(d.get("zero_frac", 0.0)),
                       integral=bool(d.get("integral", False)), unique=d.get("unique"),
                       sorted=bool(d.get("sorted", False)),
                       permutation=bool(d.get("permutation", False)),
                       values=tuple(values) if values is not None else None)


def decode_node(d: dict) -> ArgNode:
    kind = d.get("k")
    if kind == "tensor":
        return TracedTensor(shape=tuple(d["shape"]), dtype=d["dtype"], stride=tuple(d.get("stride", ())),
                            device=d.get("device", "cpu"), layout=d.get("layout", "contiguous"),
                            requires_grad=bool(d.get("requires_grad", False)),
                            stats=_stats(d.get("stats")), written=bool(d.get("written", False)))
    if kind == "seq":
        return TracedSeq(d.get("type", "tuple"), tuple(decode_node(i) for i in d.get("items", ())))
    if kind in ("int", "float", "bool", "str", "none", "dtype"):
        return TracedValue(kind, d.get("v"), d.get("t", ""))
    return TracedValue("other", None, d.get("t", ""))


def _launch(d: dict) -> KernelLaunch:
    return KernelLaunch(kernel=d.get("kernel", "?"),
                        args=tuple((n, decode_node(v)) for n, v in d.get("args", ())),
                        constexprs=tuple((n, v) for n, v in d.get("constexprs", ())),
                        grid=tuple(d["grid"]) if d.get("grid") else None,
                        options=tuple((n, v) for n, v in d.get("options", ())))


def decode_trace(data: dict, wall_s: float = 0.0, log_tail: str = "") -> Trace:
    calls = tuple(
        TracedCall(function=c["function"], index=c["index"], parent=c.get("parent"),
                   args=tuple(decode_node(a) for a in c.get("args", ())),
                   kwargs=tuple((k, decode_node(v)) for k, v in c.get("kwargs", {}).items()),
                   returns=decode_node(c["returns"]) if c.get("returns") else None,
                   launches=tuple(_launch(x) for x in c.get("launches", ())),
                   n_launches=int(c.get("n_launches", 0)), repeats=int(c.get("repeats", 1)),
                   error=c.get("error"), wall_s=float(c.get("wall_s", 0.0)))
        for c in data.get("calls", ()))
    signatures = tuple(
        (name, tuple(Parameter(p["name"], p["kind"],
                               decode_node(p["default"]) if p.get("default") else None,
                               bool(p.get("has_default"))) for p in params))
        for name, params in data.get("signatures", ()))
    detail = data.get("error_detail", "")
    extra = "\n".join(data.get("notes", ()))
    tests = "\n".join(data.get("test_errors", ()))
    return Trace(ok=bool(data.get("ok")), driver=data.get("driver", "?"), device=data.get("device", "cpu"),
                 calls=calls, signatures=signatures, error=data.get("error"),
                 error_detail="\n".join(x for x in (detail, tests, extra, log_tail[-1500:]) if x),
                 launches_outside=int(data.get("launches_outside", 0)),
                 wall_s=wall_s or float(data.get("wall_s", 0.0)), timed_out=bool(data.get("timed_out")),
                 died=bool(data.get("died")))


# ----------------------------------------------------------------------------- failure kinds

# What the CPU interpreter (or the CPU shim) cannot do; such failures are not the generator's.
INTERPRETER_SIGNS = (
    "InterpreterError", "must be of type tl.constexpr", "interpreter", "Torch not compiled with CUDA",
    "CUDA driver", "NVIDIA driver", "no CUDA", "cuda", "get_device_properties", "driver.active",
    "do_bench", "Event(", "libcuda", "inline_asm", "not implemented for 'Half'",
    "not implemented for 'BFloat16'", "ptx", "device_capability",
)


def failure_kind(trace: Trace) -> str | None:
    """None when the trace ran; else timeout | interpreter_limitation | test_fails."""
    if trace.ok:
        return None
    if trace.timed_out:
        return "timeout"
    text = f"{trace.error}\n{trace.error_detail}"
    if trace.device == "cpu" and (trace.died or any(s in text for s in INTERPRETER_SIGNS)
                                  or "cuda" in text.lower()):
        return "interpreter_limitation"      # includes the interpreter crashing the process
    return "test_fails"
