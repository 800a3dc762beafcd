"""A candidate that patches a timer is charged for it, and an honest candidate evaluated after it in
the same worker is not (the worker undoes the patch). The static policy would refuse such source
before import; the Worker is called directly here to test the line behind it."""

from pathlib import Path

from tritonforge.model import Status, Variant, content_hash
from tritonforge.runtime.worker_client import Worker
from tritonforge.runtime.protocol import EvaluateRequest
from tritonforge.tasks.loader import task_from_file

EXAMPLE = Path(__file__).resolve().parents[2] / "src" / "tritonforge" / "examples" / "sin_block4.py"
SPEC = 'entry = "sin_triton"\nseeds = 1\n[[case]]\nid = "c"\nargs = [{ tensor = [64] }]\n'


def _v(name, src):
    return Variant(name, src, content_hash(src))


def test_patch_is_charged_to_the_patcher_only(tmp_path):
    spec = tmp_path / "s.toml"
    spec.write_text(SPEC)
    task = task_from_file(EXAMPLE, spec)
    patcher = task.source.replace(
        "    out = torch.empty_like(x)",
        "    import time as _t\n    setattr(_t, 'perf_counter', lambda: 0.0)\n    out = torch.empty_like(x)")
    honest = task.source.replace("BLOCK_SIZE = 4", "BLOCK_SIZE = 64")
    with Worker("cpu", tmp_path / "w", timeout_s=120) as worker:
        ev = worker.evaluate(EvaluateRequest(
            task, (_v("original", task.source), _v("patcher", patcher), _v("honest", honest)),
            verify=True, time=False))
    assert ev.result("patcher").status is Status.CHEAT
    assert "perf_counter" in ev.result("patcher").failure.reason
    assert ev.result("honest").status is Status.OK, ev.result("honest")
