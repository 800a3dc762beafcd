"""The request's switches for the checks of a candidate as a whole reach the worker's
verification (runtime.protocol.EvaluateRequest, runtime.worker_evaluate): with ``first_calls``
off, a candidate that latches into honesty once it sees the verifier's poison passes; on, its
first bare calls give it away."""

from pathlib import Path

from tritonforge.config import Settings
from tritonforge.model import Status, Variant
from tritonforge.runtime.evaluator import Evaluator, original_variant
from tritonforge.tasks.loader import task_from_file

EXAMPLE = Path(__file__).resolve().parents[2] / "src" / "tritonforge" / "examples" / "sin_block4.py"
SPEC = ('entry = "sin_triton"\nseeds = 1\n[[case]]\nid = "c"\nargs = [{ tensor = [300] }]\n'
        '[[case]]\nid = "d"\nargs = [{ tensor = [77] }]\n')

LATCH = '''
def sin_triton(x: torch.Tensor) -> torch.Tensor:
    seen = torch.empty(1).item()
    if seen != seen:                       # NaN: the verifier's poison
        sin_triton.watched = True
    out = torch.empty_like(x)
    n_elements = x.numel()
    grid = (triton.cdiv(n_elements, 4),)
    sin_kernel[grid](x, out, n_elements, BLOCK_SIZE=4)
    if not sin_triton.__dict__.get("watched", False):
        out.copy_(x)                       # unwatched: the input back, unchanged
    return out
'''


def test_first_calls_reach_the_worker(tmp_path):
    spec = tmp_path / "s.toml"
    spec.write_text(SPEC)
    task = task_from_file(EXAMPLE, spec)
    head = task.source[:task.source.index("def sin_triton")]
    latch = head + LATCH
    with Evaluator(Settings(device="cpu"), tmp_path / "w", device="cpu") as ev:
        off = ev.evaluate(task, (original_variant(task), Variant("latch", latch, "latch1")),
                          purpose="t", verify=True, time=False, use_store=False,
                          first_calls=False)
        on = ev.evaluate(task, (original_variant(task), Variant("latch", latch + "\n", "latch2")),
                         purpose="t", verify=True, time=False, use_store=False)
    assert off.result("latch").status is Status.OK
    got = on.result("latch")
    assert got.status is not Status.OK
    assert "watched" in (got.verdict.summary(5) if got.verdict else got.failure.one_line())
