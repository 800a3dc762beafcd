"""A module's dependencies are at its top: an import inside a function is allowed only where it
must be there, and each such (file, module) pair is listed below with the reason. A new import
inside a function fails this test (move it to the top, or add it here with its reason); a listed
pair that is gone fails it too, so the list stays exactly what remains."""

import ast
import os
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "tritonforge"

# (file under src/tritonforge, module as written after `from`/`import`; `from . import x` is ".x")
ALLOWED = frozenset({
    # optional packages (extras), absent on the GPU image and in a plain install
    ("bench/ray_exec.py", "ray"),
    ("cli_progress.py", "rich.console"),
    ("cli_progress.py", "rich.live"),
    ("cli_progress.py", "rich.text"),
    ("llm/openai_client.py", "openai"),
    ("llm/prompts.py", "jinja2"),
    # tritonforge.transforms (and search.dispatch) need libcst, which the GPU image lacks; these
    # search modules must import there
    ("search/config_search.py", "..transforms"),
    ("search/config_search.py", "..transforms.launch_fast"),
    ("search/config_space.py", "..transforms.autotune_widen"),
    ("search/scaled_configs.py", "..transforms"),
    ("search/scaled_configs.py", "..transforms._scale"),
    ("search/scaled_configs.py", "..transforms.heuristic_scale"),
    ("search/scaled_configs.py", "..transforms.launch_fast"),
    ("search/scaled_configs.py", "..transforms.tile_scale"),
    ("search/emit.py", "..transforms"),
    ("search/emit.py", "..transforms.configs"),
    ("search/final_dispatch.py", ".dispatch"),
    ("search/gemm.py", "..transforms.autotune_widen"),
    ("search/gemm.py", "..transforms.configs"),
    ("search/repair_launch.py", "..transforms"),
    ("search/rules.py", "..transforms"),
    ("search/rules.py", "..transforms.autotune_widen"),
    ("search/rules.py", "..transforms.configs"),
    # the CLI's commands import torch (1.2 to 2 s); `--help` and the missing-package check
    # (cli._check_required_packages) run without it
    ("cli.py", ".api"),
    ("cli.py", ".bench"),
    ("cli.py", ".llm.testgen_run"),
    ("cli.py", ".testgen.generate"),
    ("cli_check.py", ".api"),
    ("cli_check.py", ".ci_check"),
    # triton reads TRITON_INTERPRET when imported; processes import these modules before they
    # set it (tests/transforms/conftest.py), and the profile package imports without triton
    ("profile/compile_child.py", "triton.language"),
    # the compile child imports torch and Triton's compiler only when asked to warm up
    # (``--warm``): a child not warmed starts without them
    ("profile/compile_child_main.py", "torch"),
    ("profile/compile_child_main.py", "triton.compiler"),
    ("profile/ptx.py", "triton"),
    ("profile/roofline.py", "torch"),
    ("profile/session.py", "triton.language"),
    ("profile/static.py", "triton"),
    ("profile/static.py", "triton._C.libtriton"),
    ("profile/static.py", "triton.backends.compiler"),
    ("profile/static.py", "triton.backends.nvidia.compiler"),
    ("profile/static.py", "triton.compiler"),
    ("profile/static.py", "triton.language"),
    ("profile/static.py", "triton.runtime.jit"),
    ("runtime/autotune_picks.py", "triton.runtime.autotuner"),
    ("verify/config_variation.py", "triton.runtime.autotuner"),
    ("verify/config_variation.py", "triton.runtime.jit"),
    ("verify/guards.py", "triton"),
    ("verify/guards.py", "triton.runtime.autotuner"),
    ("verify/guards.py", "triton.runtime.interpreter"),
    ("verify/integrity.py", "triton"),
    # process entry points: torch and triton only after main has read TRITON_INTERPRET and
    # installed the CPU shim; the driver imports standalone to read captures, without torch
    ("runtime/standalone.py", "..verify.guards"),
    ("runtime/standalone.py", ".cpu_shim"),
    ("runtime/standalone.py", ".invoke"),
    ("runtime/standalone.py", ".loader"),
    ("runtime/standalone.py", "torch"),
    ("runtime/standalone.py", "triton.runtime.interpreter"),
    ("runtime/standalone.py", "triton.runtime.jit"),
    ("runtime/worker_main.py", "..verify.integrity"),
    ("runtime/worker_main.py", ".cpu_shim"),
    ("runtime/worker_main.py", ".worker_evaluate"),
    ("runtime/worker_main.py", "torch"),
    ("runtime/worker_main.py", "triton"),
    ("testgen/_trace_main.py", "torch"),
    ("testgen/_trace_main.py", "triton.runtime.interpreter"),
    ("testgen/_trace_main.py", "triton.runtime.jit"),
    ("testgen/_trace_main.py", "tritonforge.runtime"),
    ("testgen/_trace_values.py", "torch"),
    # feature probes: an import that fails means "not available", handled where it is called
    ("llm/proposer.py", "..verify"),
    ("testgen/values.py", "..runtime.inputs"),
    ("testgen/values.py", "torch"),
    # the worker's entry point: its protocol and model pull torch, imported once main runs
    ("runtime/worker_main.py", "..model"),
    ("runtime/worker_main.py", ".protocol"),
})


def in_function_imports(package: Path) -> set[tuple[str, str]]:
    """(file, module) of every import statement whose parents include a function (or lambda)."""
    found: set[tuple[str, str]] = set()
    for path in sorted(package.rglob("*.py")):
        name = path.relative_to(package).as_posix()

        def walk(node: ast.AST, in_function: bool) -> None:
            for child in ast.iter_child_nodes(node):
                if in_function and isinstance(child, ast.Import):
                    found.update((name, a.name) for a in child.names)
                elif in_function and isinstance(child, ast.ImportFrom):
                    base = "." * child.level + (child.module or "")
                    if child.module is None:
                        found.update((name, base + a.name) for a in child.names)
                    else:
                        found.add((name, base))
                walk(child, in_function or isinstance(
                    child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

        walk(ast.parse(path.read_text(encoding="utf-8"), str(path)), False)
    return found


def test_no_import_inside_a_function_beyond_the_listed_ones():
    new = sorted(in_function_imports(PACKAGE) - ALLOWED)
    assert not new, ("imports inside functions: move them to the module's top, or list them in "
                     f"ALLOWED with the reason they must stay: {new}")


def test_every_listed_import_is_still_there():
    gone = sorted(ALLOWED - in_function_imports(PACKAGE))
    assert not gone, f"listed in ALLOWED but no longer inside a function (remove them): {gone}"


def test_the_walk_finds_an_import_nested_in_a_method(tmp_path):
    """The walk sees imports under methods, nested blocks and nested functions, not top ones."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "m.py").write_text(
        "import os\n"
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from .x import Y\n"
        "class C:\n    def f(self):\n        if True:\n            from .a import b\n"
        "def g():\n    def h():\n        import json\n    from . import z\n")
    assert in_function_imports(pkg) == {("m.py", ".a"), ("m.py", "json"), ("m.py", ".z")}


def _python(code: str) -> subprocess.CompletedProcess:
    path = f"{PACKAGE.parent}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"
    env = {**os.environ, "PYTHONPATH": path}
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=300)


def test_the_cli_module_imports_without_torch():
    """The reason the CLI's commands import api and bench inside functions: ``--help`` and the
    missing-package check run before torch is imported."""
    done = _python("import sys, tritonforge.cli\n"
                   "print(sorted(m for m in ('torch', 'triton') if m in sys.modules))")
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"


def test_every_module_imports_without_the_optional_packages():
    """The reason for the optional-package and libcst entries of ALLOWED: with libcst, openai,
    pydantic, ray, rich and jinja2 unimportable (the GPU image), every module imports but
    ``transforms`` (which needs libcst) and ``search.dispatch`` (built on it)."""
    modules = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__main__":
            continue
        if parts[-1] == "__init__":
            parts = parts[:-1]
        name = ".".join(parts)
        if not (name.startswith("tritonforge.transforms") or name == "tritonforge.search.dispatch"):
            modules.append(name)
    code = ("import importlib, sys\n"
            "ABSENT = {'libcst', 'openai', 'pydantic', 'ray', 'rich', 'jinja2'}\n"
            "class Block:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name.split('.')[0] in ABSENT:\n"
            "            raise ImportError('blocked: ' + name)\n"
            "sys.meta_path.insert(0, Block())\n"
            "bad = []\n"
            f"for m in {modules!r}:\n"
            "    try:\n"
            "        importlib.import_module(m)\n"
            "    except Exception as exc:\n"
            "        bad.append(f'{m}: {exc}')\n"
            "print('\\n'.join(bad))\n")
    done = _python(code)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "", done.stdout
