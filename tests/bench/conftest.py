"""Helpers of the pass tests: copies of the bundled sin example as records, and the
``bench optimize`` command run in a process of its own (interpreter, one round)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

SPEC = '''
entry = "sin_triton"
seeds = 1
[[case]]
id = "c"
args = [{ tensor = [257] }]
'''
ROOT = Path(__file__).resolve().parents[2]
SIN = ROOT / "src" / "tritonforge" / "examples" / "sin_block4.py"


@pytest.fixture
def kernels(tmp_path):
    """``kernels(names)``: --kernel arguments for copies of the sin example, one record each
    (a record is named by its file)."""
    def make(names):
        spec = tmp_path / "spec.toml"
        spec.write_text(SPEC)
        args = []
        for n in names:
            f = tmp_path / f"{n}.py"
            f.write_text(SIN.read_text())
            args += ["--kernel", f"{f}={spec}"]
        return args
    return make


def pass_command(tmp_path, *args):
    return [sys.executable, "-m", "tritonforge", "bench", "optimize", "--device", "cpu",
            "--run-dir", str(tmp_path / "run"), "--records", str(tmp_path / "records.jsonl"),
            "--latest", str(tmp_path / "LATEST.json"), "--jobs", "1", *args]


def pass_env():
    return dict(os.environ, TRITONFORGE_MAX_ROUNDS="1", TRITONFORGE_PATIENCE="1",
                PYTHONPATH=str(ROOT / "src"))


@pytest.fixture
def cli(tmp_path):
    """``cli(*args, timeout=240)``: ``bench optimize`` over tmp_path's records, --out out.json."""
    def run(*args, timeout=240):
        return subprocess.run(pass_command(tmp_path, "--out", str(tmp_path / "out.json"), *args),
                              capture_output=True, text=True, timeout=timeout, env=pass_env())
    return run


@pytest.fixture
def pass_process(tmp_path):
    """``pass_process(*args)``: the ``bench optimize`` command line and environment of ``cli``,
    to start as a process of one's own (to kill it)."""
    return lambda *args: (pass_command(tmp_path, *args), pass_env())


@pytest.fixture
def script():
    """``script(name)``: the module of ``scripts/<name>.py`` (scripts are not a package)."""
    import importlib.util

    def load(name: str):
        spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    return load
