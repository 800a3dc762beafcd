"""The verifier's fresh seeds come from one nonce per driver process, sent with every request:
all of a run's workers then build a performance script's inputs for the same fresh seeds, once
per run, instead of each worker for seeds of its own (runtime.evaluator.RUN_NONCE)."""

from pathlib import Path
from types import SimpleNamespace

from tritonforge.config import Settings
from tritonforge.runtime import evaluator as evaluator_module
from tritonforge.runtime.evaluator import RUN_NONCE, Evaluator, original_variant
from tritonforge.runtime.worker_evaluate import _RECHECK_NONCE, _nonce
from tritonforge.tasks.loader import task_from_file

EXAMPLE = Path(__file__).resolve().parents[2] / "src/tritonforge/examples/vector_add.py"


def _evaluator(tmp_path, name, sent):
    ev = Evaluator(Settings(device="cpu"), tmp_path / name, device="cpu")
    ev.worker = SimpleNamespace(evaluate=lambda request, deadline=None: sent.append(request),
                                cut=False, close=lambda: None)
    ev._merge_rejections = lambda task, variants, evaluation, rejected: evaluation
    return ev


def test_every_request_of_every_evaluator_carries_the_run_nonce(tmp_path):
    sent = []
    task = task_from_file(EXAMPLE)
    for name in ("w0", "w1", "final0"):
        _evaluator(tmp_path, name, sent).evaluate(task, (original_variant(task),),
                                                  purpose="verify", time=False)
    assert len(sent) == 3 and {r.nonce for r in sent} == {RUN_NONCE}
    assert RUN_NONCE == evaluator_module.RUN_NONCE


def test_the_worker_uses_the_request_nonce_and_its_own_without_one():
    assert _nonce(SimpleNamespace(nonce=12345)) == 12345
    assert _nonce(SimpleNamespace(nonce=0)) == 0
    assert _nonce(SimpleNamespace(nonce=None)) == _RECHECK_NONCE
