"""Run one case of a task in a plain process, optionally recording the Triton launches it makes.

    python -m tritonforge.runtime.standalone --task-file T.json --case ID [--variant-file V.py]
        [--seed S] [--warmup N] [--repeat N] [--record-launches OUT.json] [--dry-run]
        [--profiler-range] [--module-dir DIR]

The task file is a ``model.serialize`` dump of a Task; the variant (default: the task's own source)
is imported with ``runtime.loader`` and called through ``runtime.invoke.InvocationBuilder``, so the
inputs are exactly those the worker builds for (case, seed). The call runs ``--warmup`` times
(compilation, autotuning), then ``--repeat`` times with a synchronize; those last calls are the
ones recorded and, with ``--profiler-range``, the only ones inside cudaProfilerStart/Stop, so that
``ncu --profile-from-start off`` profiles exactly one call's launches however many launches the
warm-up (autotune benchmarking included) made.

Launches are recorded at ``JITFunction.run`` / ``InterpretedFunction.run`` (every ``kernel[grid]``
call goes through one of them, autotuned and heuristics-wrapped ones with their final config), with
launches made by Triton's own autotune benchmarking left out (``verify.guards.triton_internal``,
whose taps ``count_launches`` installs). Each record holds what a static compile needs: the
kernel, its source file, the arguments described without tensors (dtype, shape, bytes, 16-byte
alignment) and the keyword arguments (constexprs, num_warps, num_stages).

Device: ``TRITON_INTERPRET=1`` in the environment (set by the caller before this process starts)
means the CPU through Triton's interpreter with ``cpu_shim`` installed; otherwise the GPU.
``--dry-run`` (interpreter only) records launches without executing them: a performance case of
millions of tiny programs would take hours in the interpreter, and only the launch configs are
wanted. Host code that reads a kernel's output then sees unwritten memory; whatever was recorded
before such code fails is still written, with the error.

Nothing here imports torch or triton at module import time: the driver imports this module to read
the recorded JSON (``read_capture``).
"""

from __future__ import annotations

import argparse
import inspect
import json
import math
import os
import sys
import time
import traceback
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from ..model import PerfScriptCall, Task
from ..model.serialize import loads

CAPTURE_VERSION = 1


# ---- what is recorded (plain data; the driver reads it back) ----------------------------------

@dataclass(frozen=True)
class TensorInfo:
    """A tensor argument of a launch, described without its data."""

    dtype: str                    # "torch.float32"
    shape: tuple[int, ...]
    nbytes: int                   # numel * element size
    aligned: bool                 # data pointer divisible by 16


@dataclass(frozen=True)
class Unsupported:
    """An argument the recorder cannot describe (a TMA descriptor, an object, ...)."""

    type_name: str
    text: str


@dataclass(frozen=True)
class CapturedLaunch:
    """One ``kernel[grid](*args, **kwargs)`` call as the variant made it."""

    kernel: str
    source_path: str | None       # the file defining the kernel (None: not a file)
    args: tuple[Any, ...]
    kwargs: tuple[tuple[str, Any], ...]
    grid: tuple[int, ...] | None = None   # None when the grid was a callable

    def kwarg(self, name: str, default: Any = None) -> Any:
        return dict(self.kwargs).get(name, default)


@dataclass(frozen=True)
class LaunchCapture:
    """What one standalone run recorded: the launches of ``repeat`` calls after the warm-up."""

    task: str
    case_id: str
    device: str                   # "cuda" or "cpu"
    repeat: int
    launches: tuple[CapturedLaunch, ...] = ()
    warmup_launches: int = 0      # Triton launches during the warm-up calls (autotuning included)
    declared_bytes: float | None = None   # a TritonBench perf script's own accounting, per call
    declared_flops: float | None = None
    dry_run: bool = False
    wall_s: float = 0.0
    error: str | None = None      # the call failed (launches recorded before it are kept)

    @property
    def launches_per_call(self) -> int:
        return len(self.launches) // max(1, self.repeat) if self.launches else 0

    @property
    def one_call(self) -> tuple[CapturedLaunch, ...]:
        """The launches of the last recorded call."""
        n = self.launches_per_call
        return self.launches[-n:] if n else ()


def _encode(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else {"float": repr(value)}
    if hasattr(value, "data_ptr") and hasattr(value, "dtype") and hasattr(value, "shape"):
        try:
            nbytes = int(value.numel()) * int(value.element_size())
            aligned = int(value.data_ptr()) % 16 == 0
        except Exception:  # noqa: BLE001 - a meta or fake tensor
            nbytes, aligned = 0, True
        return {"tensor": str(value.dtype), "shape": [int(d) for d in value.shape],
                "nbytes": nbytes, "aligned": aligned}
    if type(value).__name__ == "dtype" and hasattr(value, "name") and \
            type(value).__module__.startswith("triton"):
        return {"tl_dtype": value.name}
    if type(value).__name__ == "constexpr" and hasattr(value, "value"):
        return _encode(value.value)
    if isinstance(value, (tuple, list)):
        return {"tuple": [_encode(v) for v in value]}
    return {"unsupported": type(value).__name__, "text": repr(value)[:200]}


def _decode(value: Any) -> Any:
    if isinstance(value, dict):
        if "tensor" in value:
            return TensorInfo(value["tensor"], tuple(value.get("shape", ())),
                              int(value.get("nbytes", 0)), bool(value.get("aligned", True)))
        if "tuple" in value:
            return tuple(_decode(v) for v in value["tuple"])
        if "float" in value:
            return float(value["float"])
        if "tl_dtype" in value:
            return {"tl_dtype": value["tl_dtype"]}      # the static side turns it into tl.dtype
        if "unsupported" in value:
            return Unsupported(value["unsupported"], value.get("text", ""))
    return value


def capture_to_json(c: LaunchCapture) -> dict:
    return {
        "version": CAPTURE_VERSION, "task": c.task, "case_id": c.case_id, "device": c.device,
        "repeat": c.repeat, "warmup_launches": c.warmup_launches,
        "declared_bytes": c.declared_bytes, "declared_flops": c.declared_flops,
        "dry_run": c.dry_run, "wall_s": c.wall_s, "error": c.error,
        "launches": [{"kernel": x.kernel, "source_path": x.source_path,
                      "args": [_encode(a) for a in x.args],
                      "kwargs": [[k, _encode(v)] for k, v in x.kwargs],
                      "grid": list(x.grid) if x.grid is not None else None}
                     for x in c.launches],
    }


def read_capture(path: str | Path) -> LaunchCapture:
    """Read what ``--record-launches`` wrote (ValueError when it is not such a file)."""
    data = json.loads(Path(path).read_text())
    if not isinstance(data, dict) or data.get("version") != CAPTURE_VERSION:
        raise ValueError(f"{path} is not a launch capture of version {CAPTURE_VERSION}")
    launches = tuple(
        CapturedLaunch(d["kernel"], d.get("source_path"), tuple(_decode(a) for a in d["args"]),
                       tuple((k, _decode(v)) for k, v in d["kwargs"]),
                       tuple(d["grid"]) if d.get("grid") is not None else None)
        for d in data["launches"])
    return LaunchCapture(data["task"], data["case_id"], data["device"], int(data["repeat"]),
                         launches, int(data.get("warmup_launches", 0)),
                         data.get("declared_bytes"), data.get("declared_flops"),
                         bool(data.get("dry_run")), float(data.get("wall_s", 0.0)),
                         data.get("error"))


# ---- recording (in the process that runs the case) --------------------------------------------

@dataclass
class _Recorder:
    active: bool = False
    dry_run: bool = False
    launches: list[CapturedLaunch] = field(default_factory=list)
    seen: int = 0                 # every launch, recorded or not (warm-up counts)


def _grid_of(grid: Any) -> tuple[int, ...] | None:
    if isinstance(grid, (tuple, list)) and all(isinstance(g, int) for g in grid):
        return tuple(int(g) for g in grid)
    return None


def _source_of(kernel: Any) -> tuple[str, str | None]:
    fn = getattr(kernel, "fn", kernel)
    name = getattr(fn, "__name__", None) or getattr(kernel, "__name__", "?")
    try:
        path = inspect.getsourcefile(fn)
    except TypeError:
        path = None
    return name, (os.path.abspath(path) if path and os.path.exists(path) else None)


@contextmanager
def record_launches(recorder: _Recorder) -> Iterator[_Recorder]:
    """Patch ``run`` of Triton's JIT and interpreted functions to record (and maybe skip) launches."""
    from triton.runtime.jit import JITFunction

    from ..verify.guards import count_launches, triton_internal

    classes: list[type] = [JITFunction]
    try:
        from triton.runtime.interpreter import InterpretedFunction
        classes.append(InterpretedFunction)
    except ImportError:  # pragma: no cover - the interpreter ships with triton 3.x
        InterpretedFunction = None  # type: ignore[assignment,misc]
    originals = {cls: cls.__dict__["run"] for cls in classes if "run" in cls.__dict__}

    def make(original: Any, interpreted: bool) -> Any:
        def run(self: Any, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> Any:
            if not warmup and not triton_internal():
                recorder.seen += 1
                if recorder.active:
                    name, path = _source_of(self)
                    recorder.launches.append(CapturedLaunch(
                        name, path, tuple(args), tuple(kwargs.items()), _grid_of(grid)))
            if interpreted and recorder.dry_run and not warmup:
                return None
            return original(self, *args, grid=grid, warmup=warmup, **kwargs)
        return run

    for cls, original in originals.items():
        setattr(cls, "run", make(original, cls is InterpretedFunction))
    try:
        with count_launches():          # installs the taps that make triton_internal() true
            yield recorder
    finally:
        for cls, original in originals.items():
            setattr(cls, "run", original)


def _declared_work(builder: Any, module: Any, case: Any, invocation: Any) -> tuple[float | None, float | None]:
    """Bytes and FLOPs per call by a TritonBench perf script's own get_gbps/get_tflops, if any."""
    if not isinstance(case.recipe, PerfScriptCall) or not invocation.arguments:
        return None, None
    try:
        instance = builder._perf_instance(module, case.recipe)   # cached: the same instance
    except Exception:  # noqa: BLE001
        return None, None
    inputs = invocation.arguments[0]
    out: list[float | None] = []
    for method, scale in (("get_gbps", 1e6), ("get_tflops", 1e9)):
        try:
            # rate at a runtime of 1 ms: GB/s * 1e6 = bytes, TFLOP/s * 1e9 = FLOPs
            value = float(getattr(instance, method)(inputs, 1.0))
            out.append(value * scale if math.isfinite(value) and value > 0 else None)
        except Exception:  # noqa: BLE001 - scripts compute these in many ways
            out.append(None)
    return out[0], out[1]


# The driver imports this module (read_capture, TensorInfo) without torch or triton; what only the
# child process needs (torch, triton, the invocation builder) is imported in the child's functions.


def run_case(task_file: Path, case_id: str, *, variant_file: Path | None = None, seed: int | None = None,
             warmup: int = 1, repeat: int = 1, dry_run: bool = False, profiler_range: bool = False,
             module_dir: Path | None = None) -> LaunchCapture:
    """Run the case in this process and return what was recorded (errors become ``error``)."""
    task = loads(task_file.read_text())
    if not isinstance(task, Task):
        raise SystemExit(f"standalone: {task_file} does not hold a Task")
    try:
        case = task.case(case_id)
    except KeyError:
        raise SystemExit(f"standalone: no case {case_id!r} in {task.name}; known: "
                         + ", ".join(c.id for c in task.cases)) from None
    interpreted = os.environ.get("TRITON_INTERPRET") == "1"
    import torch

    from .invoke import InvocationBuilder
    from .loader import import_source, install_support_modules

    if interpreted:
        from . import cpu_shim
        cpu_shim.install()
    elif not torch.cuda.is_available():
        raise SystemExit("standalone: no CUDA GPU is visible; set TRITON_INTERPRET=1 to run on the CPU")
    device = "cpu" if interpreted else "cuda"
    profiler_range = profiler_range and not interpreted      # no profiler API on the interpreter
    source = variant_file.read_text() if variant_file else task.source
    module_dir = module_dir or task_file.parent / "modules"
    recorder = _Recorder(dry_run=dry_run and interpreted)
    started = time.perf_counter()
    error = None
    declared: tuple[float | None, float | None] = (None, None)

    def sync() -> None:
        if device == "cuda":
            torch.cuda.synchronize()

    with record_launches(recorder):
        try:
            install_support_modules(module_dir / "support", task.support_modules)
            reference = import_source(module_dir, f"{task.name}_original", task.source,
                                      shown_as=task.name)
            module = reference if source == task.source else import_source(
                module_dir, f"{task.name}_variant", source, shown_as=task.name)
            builder = InvocationBuilder(reference, device, module_dir)
            invocation = builder.build(module, case, case.seeds[0] if seed is None else seed)
            declared = _declared_work(builder, module, case, invocation)
            for _ in range(warmup):
                invocation.call()
                sync()
            warm = recorder.seen
            recorder.active = True
            if profiler_range:
                torch.cuda.profiler.start()
            try:
                for _ in range(repeat):
                    invocation.call()
                    sync()
            finally:
                if profiler_range:
                    torch.cuda.profiler.stop()
                recorder.active = False
        except BaseException as exc:  # noqa: BLE001 - the variant's failure is data
            error = f"{type(exc).__name__}: {exc}\n{traceback.format_exc()[-3000:]}"
            warm = recorder.seen - len(recorder.launches)
    return LaunchCapture(task.name, case.id, device, repeat, tuple(recorder.launches), warm,
                         declared[0], declared[1], recorder.dry_run,
                         time.perf_counter() - started, error)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tritonforge.runtime.standalone",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--task-file", required=True, type=Path, help="a model.serialize dump of a Task")
    parser.add_argument("--case", required=True, help="the case id to run")
    parser.add_argument("--variant-file", type=Path, help="the source to run (default: the task's)")
    parser.add_argument("--seed", type=int, help="input seed (default: the case's first)")
    parser.add_argument("--warmup", type=int, default=1, help="unrecorded calls first (default 1)")
    parser.add_argument("--repeat", type=int, default=1, help="recorded calls (default 1)")
    parser.add_argument("--record-launches", type=Path, help="write the recorded launches here (JSON)")
    parser.add_argument("--dry-run", action="store_true",
                        help="interpreter only: record launches without executing them")
    parser.add_argument("--profiler-range", action="store_true",
                        help="bracket the recorded calls with cudaProfilerStart/Stop (GPU only)")
    parser.add_argument("--module-dir", type=Path, help="where variant modules are written")
    args = parser.parse_args(argv)
    if args.warmup < 0 or args.repeat < 1:
        parser.error("--warmup must be >= 0 and --repeat >= 1")
    capture = run_case(args.task_file, args.case, variant_file=args.variant_file, seed=args.seed,
                       warmup=args.warmup, repeat=args.repeat, dry_run=args.dry_run,
                       profiler_range=args.profiler_range, module_dir=args.module_dir)
    if args.record_launches:
        args.record_launches.parent.mkdir(parents=True, exist_ok=True)
        tmp = args.record_launches.with_suffix(".tmp")
        tmp.write_text(json.dumps(capture_to_json(capture)))
        tmp.replace(args.record_launches)
    if capture.error:
        print(f"standalone: case {args.case} failed: {capture.error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
