"""The device is resolved once per process: the child process that asks whether a GPU is
visible (it imports torch: seconds) runs the first time only, however many parts ask."""

import pytest

from tritonforge.config import Settings
from tritonforge.errors import EnvironmentProblem
from tritonforge.runtime import hardware
from tritonforge.runtime.hardware import Hardware, resolve_device, resolve_hardware
from tritonforge.runtime.evaluator import Evaluator


@pytest.fixture
def fresh(monkeypatch):
    """A process that has not asked yet, whose probe answers ``visible`` without a child."""
    asked = []

    def install(visible: bool):
        monkeypatch.setattr(hardware, "_visible", None)
        monkeypatch.setattr(hardware, "_probe", lambda: asked.append(1) or visible)
        return asked
    return install


def test_every_part_that_asks_shares_one_probe(fresh, tmp_path):
    asked = fresh(False)
    assert resolve_hardware("auto") == Hardware("cpu") and not Hardware("cpu").gpu
    assert resolve_device("auto") == "cpu"
    for k in range(3):                                   # Evaluators that resolve on their own
        ev = Evaluator(Settings(device="auto", run_dir=str(tmp_path)), tmp_path / f"w{k}")
        assert ev.device == "cpu"
        ev.close()
    assert len(asked) == 1


def test_cpu_asks_nothing_and_cuda_without_a_gpu_says_so(fresh):
    asked = fresh(False)
    assert resolve_device("cpu") == "cpu" and asked == []
    with pytest.raises(EnvironmentProblem, match="--device cpu"):
        resolve_device("cuda")
    with pytest.raises(EnvironmentProblem):
        resolve_device("cuda")
    assert len(asked) == 1


def test_a_visible_gpu_is_resolved_as_cuda(fresh):
    asked = fresh(True)
    assert resolve_hardware("auto").gpu and resolve_device("cuda") == "cuda"
    assert len(asked) == 1


def test_the_real_probe_runs_once(monkeypatch):
    """The child process itself: counted by ``hardware.probes``."""
    monkeypatch.setattr(hardware, "_visible", None)
    before = hardware.probes
    first = hardware.cuda_available()
    assert hardware.cuda_available() == first and resolve_device("auto") in ("cpu", "cuda")
    assert hardware.probes == before + 1
