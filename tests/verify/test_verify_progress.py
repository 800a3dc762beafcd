"""A verification says what it does next (``VerifyOptions.progress``): the worker reports each
step, so a slow verification shows where its time goes (one of a KV-cache copy took 50 s)."""

from __future__ import annotations

from conftest import DEVICE
from standin import build
from test_catalogue import FAMILIES, HERE, load

from tritonforge.verify import VerifyOptions, verify


def test_each_case_the_recheck_and_the_probe_are_announced():
    ref = load(HERE / "scale_ref.py")
    cases = FAMILIES["scale"][1][:2]
    steps: list[str] = []
    verdict = verify(ref, load(HERE / "scale_honest_warps.py"), cases, build, device=DEVICE,
                     options=VerifyOptions(nonce=7, progress=steps.append))
    assert verdict.passed, verdict.summary(5)
    seeds = [f"{c.id} seed {s}" for c in cases for s in c.seeds]
    assert steps[0] == "first calls, bare"
    assert steps[1:1 + len(seeds)] == seeds
    assert steps[1 + len(seeds):] == [f"{c.id} recheck" for c in reversed(cases)] + \
        ["bare-call probe"]
