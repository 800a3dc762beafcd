"""A verification says what it does next (``VerifyOptions.progress``): the worker reports each
step and the case it is on, so a slow verification shows where its time goes (one of a KV-cache
copy took 50 s) and a worker that dies names its case."""

from __future__ import annotations

from conftest import DEVICE
from standin import build
from test_catalogue import FAMILIES, HERE, load

from tritonforge.verify import VerifyOptions, verify


def test_each_case_the_recheck_and_the_probe_are_announced():
    ref = load(HERE / "scale_ref.py")
    cases = FAMILIES["scale"][1][:2]
    steps: list[tuple[str, str | None]] = []
    verdict = verify(ref, load(HERE / "scale_honest_warps.py"), cases, build, device=DEVICE,
                     options=VerifyOptions(nonce=7, progress=lambda *s: steps.append(s)))
    assert verdict.passed, verdict.summary(5)
    seeds = [(f"seed {s}", c.id) for c in cases for s in c.seeds]
    assert steps[0] == ("first calls", None)
    assert steps[1:1 + len(seeds)] == seeds
    assert steps[1 + len(seeds):] == [("recheck", c.id) for c in reversed(cases)] + \
        [("probe", None)]
