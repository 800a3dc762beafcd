"""Transform tests run rewritten kernels through Triton's interpreter on the CPU.

TRITON_INTERPRET must be set before triton is imported. Kernels are loaded from a file written
to a temporary directory (``@triton.jit`` reads its source with ``inspect.getsource``).
Autotuned kernels need a ``do_bench`` under the interpreter; the transforms keep their output
clean for the GPU, so the ``fake_bench`` fixture patches Triton's autotuner instead.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
from pathlib import Path

os.environ["TRITON_INTERPRET"] = "1"
sys.path.insert(0, str(Path(__file__).parent))

import pytest  # noqa: E402


@pytest.fixture
def load(tmp_path):
    """``load(source) -> module``: import a source text as a fresh module."""
    loaded: list[str] = []

    def _load(source: str):
        digest = hashlib.sha256(source.encode()).hexdigest()[:12]
        name = f"tf_test_mod_{digest}_{len(loaded)}"
        path = tmp_path / f"{name}.py"
        path.write_text(source, encoding="utf-8")
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        loaded.append(name)
        spec.loader.exec_module(module)
        return module

    yield _load
    for name in loaded:
        sys.modules.pop(name, None)


@pytest.fixture
def fake_bench(monkeypatch):
    """Make ``@triton.autotune`` run under the interpreter: every config is run once (so that
    restore_value/reset_to_zero matter) and the LAST config tried wins (so that a config other
    than the original is the one whose result is checked). Returns the list of configs run."""
    from triton.runtime.autotuner import Autotuner

    runs: list[int] = []

    def bench(kernel_call, quantiles):
        kernel_call()
        runs.append(1)
        t = 1000.0 - len(runs)
        return [t, t, t]

    monkeypatch.setattr(Autotuner, "do_bench", property(lambda self: bench))
    return runs
