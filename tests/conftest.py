"""Shared test setup: GPU-marked tests skip themselves when no CUDA device is visible; ``load``
imports a source text as a module and ``fake_bench`` runs ``@triton.autotune`` under the
interpreter (transform and search tests)."""

import hashlib
import importlib.util
import sys

import pytest


def _has_cuda() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except Exception:  # noqa: BLE001 - no torch, no GPU
        return False


@pytest.fixture(autouse=True)
def _gpu_lock_of_its_own(monkeypatch):
    """A session on a (fake) GPU sets its own lock in the environment (runtime.gpu_lock.
    lock_one_gpu): each test starts and ends without one, as the suite was started."""
    from tritonforge.runtime import gpu_lock

    monkeypatch.delenv(gpu_lock.GPU_LOCK_ENV, raising=False)
    monkeypatch.delenv(gpu_lock.GPU_LOCK_SCOPE_ENV, raising=False)
    monkeypatch.setattr(gpu_lock, "_owned", None)


def pytest_collection_modifyitems(config, items):
    if _has_cuda():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


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
