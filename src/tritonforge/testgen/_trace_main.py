"""The tracing process: run a kernel file's own test or example once and record what it calls.

Started by ``testgen.trace.trace_source`` as ``python -m tritonforge.testgen._trace_main REQ OUT``
with a timeout, never in the driver. REQ is a JSON request (module file, driver, functions to
watch, device, deadline); OUT receives a JSON trace (decoded by ``testgen.trace``). On the CPU the
parent sets ``TRITON_INTERPRET=1`` and this process installs the CPU shim, so CUDA-minded tests run
through Triton's interpreter.

What is recorded: every call of the watched functions (top-level functions and autograd Functions
of the module) with argument shapes, dtypes, strides, devices, scalar values and value statistics
taken before the call, which tensors the call wrote (contents compared before and after), what it
returned, and every Triton launch made while it ran (kernel, arguments, constexprs, grid).
Identical calls are folded into one with a repeat count.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import inspect
import itertools
import json
import os
import signal
import sys
import time
import traceback
from typing import Any

from tritonforge.testgen._trace_values import (
    LIMITS, _count_tensors, _mark_written, _same, _strip_stats, _tensors, describe,
)
from tritonforge.testgen.trace import top_level_imports

# torch and triton are imported inside functions: this is the tracing process's entry point, and the
# CPU shim must be installed (main) before anything the traced file runs sees torch;
# ``_trace_values`` keeps torch out of its module top for the same reason.


class _Deadline(BaseException):
    """Raised by the alarm: the driver ran out of time (BaseException: tests cannot catch it)."""

STATE: dict[str, Any] = {"stack": [], "calls": [], "keys": {}, "outside": 0, "busy": False,
                         "per_function": {}, "max_calls": 64, "values_limit": 4096,
                         "clone_limit": 1 << 30, "constexprs": {}}


# ----------------------------------------------------------------------------- watching calls

def _watch(name: str, fn: Any) -> Any:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if STATE["busy"]:
            return fn(*args, **kwargs)
        import torch

        STATE["busy"] = True
        try:
            arg_desc = [describe(a, stats=True) for a in args]
            kw_desc = {k: describe(v, stats=True) for k, v in kwargs.items()}
            tensors = [t for a in (*args, *kwargs.values()) for t in _tensors(a, [])]
            total = sum(t.numel() * t.element_size() for t in tensors)
            with torch.no_grad():
                before = [t.detach().clone() for t in tensors] if total <= STATE["clone_limit"] else None
        except Exception as exc:  # noqa: BLE001 - never break the user's test: run it unwatched
            STATE.setdefault("watch_errors", []).append(f"{name}: {type(exc).__name__}: {exc}"[:300])
            return fn(*args, **kwargs)
        finally:
            STATE["busy"] = False
        STATE["next_frame"] += 1
        frame = {"function": name, "launches": [], "n_launches": 0,
                 "parent": STATE["stack"][-1]["id"] if STATE["stack"] else None,
                 "id": STATE["next_frame"]}
        STATE["stack"].append(frame)
        start = time.perf_counter()
        error = None
        result = None
        try:
            result = fn(*args, **kwargs)
            return result
        except _Deadline:
            raise
        except BaseException as exc:  # noqa: BLE001 - recorded, then re-raised
            error = f"{type(exc).__name__}: {exc}"[:500]
            result = None
            raise
        finally:
            STATE["stack"].pop()
            STATE["busy"] = True
            try:
                _finish_call(frame, arg_desc, kw_desc, tensors, before, result, error,
                             time.perf_counter() - start)
                if not STATE["stack"]:
                    _write_partial()
            finally:
                STATE["busy"] = False

    return wrapper


def _finish_call(frame: dict, arg_desc: list, kw_desc: dict, tensors: list, before: Any,
                 result: Any, error: str | None, wall: float) -> None:
    import torch

    if before is not None:
        with torch.no_grad():
            flags = [not _same(b, t.detach()) for b, t in zip(before, tensors)]
    else:
        flags = [False] * len(tensors)
    _mark_written(arg_desc, list(flags[:]))
    _mark_written(list(kw_desc.values()), flags[_count_tensors(arg_desc):])
    returns = describe(result, stats=False) if error is None else None
    key = json.dumps([frame["function"], frame["parent"] is None, _strip_stats(arg_desc),
                      _strip_stats(kw_desc), error is None], sort_keys=True, default=str)
    index = STATE["keys"].get(key)
    if index is not None:
        STATE["calls"][index]["repeats"] += 1
        STATE["id_map"][frame["id"]] = index
        return
    count = STATE["per_function"].get(frame["function"], 0)
    if count >= STATE["max_calls"]:
        STATE["id_map"][frame["id"]] = -1         # nested calls know they had a parent
        return
    STATE["per_function"][frame["function"]] = count + 1
    index = len(STATE["calls"])
    STATE["keys"][key] = index
    STATE["id_map"][frame["id"]] = index
    STATE["calls"].append({
        "function": frame["function"], "index": index, "parent": None,
        "parent_frame": frame["parent"],
        "args": arg_desc, "kwargs": kw_desc, "returns": returns,
        "launches": frame["launches"], "n_launches": frame["n_launches"], "repeats": 1,
        "error": error, "wall_s": wall})


# ----------------------------------------------------------------------------- watching launches

def _constexpr_names(kernel: Any) -> set[str]:
    key = id(kernel)
    if key not in STATE["constexprs"]:
        names: set[str] = set()
        params = getattr(kernel, "params", None)
        if params:
            names = {p.name for p in params if getattr(p, "is_constexpr", False)}
        else:
            fn = getattr(kernel, "fn", None)
            try:
                sig = inspect.signature(fn)
                names = {n for n, p in sig.parameters.items() if "constexpr" in str(p.annotation)}
            except (TypeError, ValueError):
                pass
        STATE["constexprs"][key] = names
    return STATE["constexprs"][key]


_OPTIONS = {"num_warps", "num_stages", "num_ctas", "maxnreg", "enable_fp_fusion", "debug"}


def _record_launch(kernel: Any, args: tuple, kwargs: dict, grid: Any) -> None:
    if STATE["busy"]:
        return
    STATE["busy"] = True
    try:
        if not STATE["stack"]:
            STATE["outside"] += 1
            return
        names = list(getattr(kernel, "arg_names", []))
        constexprs = _constexpr_names(kernel)
        bound = dict(zip(names, args))
        bound.update({k: v for k, v in kwargs.items() if k not in _OPTIONS})
        launch = {"kernel": getattr(kernel, "__name__", None) or getattr(getattr(kernel, "fn", None),
                                                                        "__name__", "?"),
                  "args": [], "constexprs": [], "options": [],
                  "grid": [int(g) for g in grid] if isinstance(grid, (tuple, list))
                  and all(isinstance(g, int) for g in grid) else None}
        for name, value in bound.items():
            if name in constexprs:
                if isinstance(value, (bool, int, float, str)) or value is None:
                    launch["constexprs"].append([name, value])
            else:
                launch["args"].append([name, describe(value, stats=False)])
        launch["options"] = [[k, v] for k, v in kwargs.items()
                             if k in _OPTIONS and isinstance(v, (bool, int, float, str))]
        for frame in STATE["stack"]:
            frame["n_launches"] += 1
            if len(frame["launches"]) < 32:
                frame["launches"].append(launch)
    finally:
        STATE["busy"] = False


def _install_launch_hooks() -> None:
    from triton.runtime.jit import JITFunction

    classes = [JITFunction]
    try:
        from triton.runtime.interpreter import InterpretedFunction

        classes.append(InterpretedFunction)
    except ImportError:
        pass
    for cls in classes:
        original = cls.run

        def run(self: Any, *args: Any, grid: Any, warmup: bool, _original: Any = original,
                **kwargs: Any) -> Any:
            if not warmup:
                _record_launch(self, args, kwargs, grid)
            return _original(self, *args, grid=grid, warmup=warmup, **kwargs)

        cls.run = run


# ----------------------------------------------------------------------------- the module

def _load_module(path: str, name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    stem = os.path.splitext(os.path.basename(path))[0]
    if stem.isidentifier() and stem not in sys.modules:
        sys.modules[stem] = module          # a separate test file may ``import <stem>``
    return module


def _signature(target: Any, is_function_class: bool) -> list[dict]:
    is_apply = inspect.ismethod(target) and target.__name__ == "apply"
    fn = target.forward if is_function_class else (target.__self__.forward if is_apply else target)
    is_function_class = is_function_class or is_apply
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return []
    if is_function_class and params:
        params = params[1:]          # ctx
    out = []
    for p in params:
        has = p.default is not inspect.Parameter.empty
        out.append({"name": p.name, "kind": p.kind.name.lower(), "has_default": has,
                    "default": describe(p.default, stats=False) if has else None})
    return out


def _watchable(module: Any, wanted: list[str] | None) -> dict[str, tuple[Any, bool]]:
    import torch

    found: dict[str, tuple[Any, bool]] = {}
    for name, obj in list(vars(module).items()):
        if wanted is not None and name not in wanted:
            continue
        if inspect.isfunction(obj) and obj.__module__ == module.__name__:
            if wanted is None and name.startswith("test"):
                continue
            found[name] = (obj, False)
        elif (inspect.isclass(obj) and issubclass(obj, torch.autograd.Function)
              and obj.__module__ == module.__name__):
            found[name] = (obj, True)
        elif (inspect.ismethod(obj) and obj.__name__ == "apply" and inspect.isclass(obj.__self__)
              and issubclass(obj.__self__, torch.autograd.Function)):
            found[name] = (obj, False)          # ``fn = MyFunction.apply`` at module level
    return found


def _install_watchers(module: Any, targets: dict[str, tuple[Any, bool]]) -> None:
    for name, (obj, is_class) in targets.items():
        if is_class:
            obj.apply = _watch(name, obj.apply)
        else:
            setattr(module, name, _watch(name, obj))


# ----------------------------------------------------------------------------- drivers

def _parametrize(fn: Any, limit: int = 24) -> list[dict[str, Any]]:
    """Keyword sets from ``@pytest.mark.parametrize`` marks (product, at most ``limit``)."""
    axes = []
    for mark in getattr(fn, "pytestmark", []) or []:
        if getattr(mark, "name", "") != "parametrize" or len(mark.args) < 2:
            continue
        names, values = mark.args[0], mark.args[1]
        names = [n.strip() for n in names.split(",")] if isinstance(names, str) else list(names)
        rows = []
        for v in values:
            if type(v).__name__ == "ParameterSet":          # pytest.param(...)
                v = v.values if len(names) > 1 else v.values[0]
            rows.append(dict(zip(names, tuple(v) if len(names) > 1 else (v,))))
        axes.append(rows)
    if not axes:
        return [{}]
    combos = []
    for parts in itertools.product(*axes):
        merged: dict[str, Any] = {}
        for p in parts:
            merged.update(p)
        combos.append(merged)
        if len(combos) >= limit:
            break
    return combos


def _run_tests(module: Any, notes: list[str]) -> None:
    tests = [(n, f) for n, f in vars(module).items()
             if n.startswith("test") and inspect.isfunction(f) and f.__module__ == module.__name__]
    for name, fn in tests:
        try:
            params = inspect.signature(fn).parameters
        except (TypeError, ValueError):
            continue
        for kwargs in _parametrize(fn):
            missing = [p for p, v in params.items()
                       if p not in kwargs and v.default is inspect.Parameter.empty
                       and v.kind not in (v.VAR_POSITIONAL, v.VAR_KEYWORD)]
            if missing:
                notes.append(f"{name}: skipped, needs {', '.join(missing)} (a fixture?)")
                break
            try:
                fn(**kwargs)
            except _Deadline:
                raise
            except Exception as exc:  # noqa: BLE001 - one failing test does not stop the others
                notes.append(f"{name}({kwargs}) raised {type(exc).__name__}: {str(exc)[:200]}")
                STATE.setdefault("test_errors", []).append(traceback.format_exc()[-3000:])


def _main_block(path: str) -> Any:
    tree = ast.parse(open(path, encoding="utf-8").read(), filename=path)
    body = [s for node in tree.body if isinstance(node, ast.If) and "__name__" in ast.unparse(node.test)
            for s in node.body]
    if not body:
        return None
    return compile(ast.Module(body=body, type_ignores=[]), path, "exec")


def _drive(request: dict, module: Any, notes: list[str]) -> str:
    driver = request["driver"]
    if driver == "section":
        path = request["section_path"]
        text = open(path, encoding="utf-8").read()
        exec(compile(top_level_imports(text), path, "exec"), module.__dict__)   # as in one file
        code = compile(text, path, "exec")
        namespace = dict(module.__dict__)
        namespace["__file__"] = path
        exec(code, namespace)
        return "section"
    ran = []
    if driver in ("tests", "auto"):
        if any(n.startswith("test") and inspect.isfunction(f) for n, f in vars(module).items()):
            _run_tests(module, notes)
            ran.append("tests")
    if driver == "main" or (driver == "auto" and not any(c["n_launches"] for c in STATE["calls"])):
        code = _main_block(request["module_path"])
        if code is not None:
            exec(code, module.__dict__)
            ran.append("main")
    return "+".join(ran) or "none"


def _resolved_calls() -> list[dict]:
    out = []
    for call in STATE["calls"]:          # parents finish after their children: resolve now
        call = dict(call)
        parent = call.pop("parent_frame")
        call["parent"] = STATE["id_map"].get(parent) if parent is not None else None
        out.append(call)
    return out


def _write_partial() -> None:
    """After each outermost call: what was recorded so far, in case the process dies later."""
    path = STATE.get("partial_path")
    if path:
        with open(path + ".tmp", "w", encoding="utf-8") as fh:
            json.dump({"calls": _resolved_calls(), "signatures": STATE.get("signatures", [])},
                      fh, default=str)
        os.replace(path + ".tmp", path)


def _alarm(signum: int, frame: Any) -> None:
    raise _Deadline()


def main(argv: list[str]) -> int:
    request = json.load(open(argv[0], encoding="utf-8"))
    out_path = argv[1]
    LIMITS["values"] = request.get("values_limit", 4096)
    STATE.update(max_calls=request.get("max_calls", 64),
                 id_map={}, next_frame=0, partial_path=out_path + ".partial")
    started = time.perf_counter()
    result: dict[str, Any] = {"ok": False, "driver": request["driver"], "device": request["device"],
                              "error": None, "error_detail": "", "timed_out": False, "notes": []}
    signal.signal(signal.SIGALRM, _alarm)
    notes: list[str] = []
    try:
        import torch

        if request["device"] == "cpu":
            from tritonforge.runtime import cpu_shim

            cpu_shim.install()
        torch.manual_seed(request.get("seed", 0))
        _install_launch_hooks()
        module = _load_module(request["module_path"], request["module_name"])
        targets = _watchable(module, request.get("wrap"))
        result["signatures"] = STATE["signatures"] = [[n, _signature(o, c)] for n, (o, c) in targets.items()]
        _install_watchers(module, targets)
        signal.alarm(max(1, int(request.get("deadline_s", 120))))   # the test's time, not imports
        result["driver"] = _drive(request, module, notes)
        result["ok"] = True
    except _Deadline:
        result["timed_out"] = True
        result["error"] = f"the test did not finish within {request.get('deadline_s')} s"
    except BaseException as exc:  # noqa: BLE001 - everything becomes data for the parent
        result["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:500]
        result["error_type"] = type(exc).__module__ + "." + type(exc).__name__
        result["error_detail"] = traceback.format_exc()[-6000:]
    finally:
        signal.alarm(0)
    result["calls"] = _resolved_calls()
    result["launches_outside"] = STATE["outside"]
    result["wall_s"] = time.perf_counter() - started
    result["notes"] = notes + STATE.get("watch_errors", [])[:5]
    result["test_errors"] = STATE.get("test_errors", [])[:3]
    with open(out_path, "w", encoding="utf-8") as fh:
        json.dump(result, fh, default=str)
    sys.stdout.flush()
    os._exit(0)          # skip interpreter teardown: user code may leave threads behind


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
