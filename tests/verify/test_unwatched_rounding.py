"""Rounding forgiven only where the candidate rounds alike watched or not (verify.shipped).

Where the original may round otherwise than in verification (it autotunes; or it leaves the
tolerance at another num_warps), a bare call after timing is held to gross differences only. A
candidate exact under the guards that computes coarsely when it finds none hid there. It must now
agree with its own guarded call on the same inputs: an honest candidate does (the guards change
no arithmetic), whatever its own rounding."""

from __future__ import annotations

import pytest
from conftest import DEVICE
from standin import build
from test_catalogue import FAMILIES, HERE, load

from tritonforge.verify import shipped
from tritonforge.verify.compare import compare_outputs, tolerance_table

# 0.1% off: beyond the fp32 tolerance, well inside the 5% a config's rounding is forgiven
COARSE_WHEN_UNWATCHED = '''
def scale(x, a):
    y = torch.empty_like(x)
    n = x.numel()
    watched = bool(torch.isnan(torch.empty(1)).item())       # the verifier's poison
    scale_kernel[(triton.cdiv(n, 512),)](x, y, a if watched else a * 1.001, n, BLOCK=512)
    return y
'''
COARSE_ALWAYS = COARSE_WHEN_UNWATCHED.replace("a if watched else a * 1.001", "a * 1.001")


def _module(tmp_path, name, wrapper):
    source = (HERE / "scale_ref.py").read_text().split("\ndef scale(")[0] + wrapper
    path = tmp_path / f"{name}.py"
    path.write_text(source)
    return load(path)


def _check(ref, cand, case):
    def compare(r, c, path):
        return compare_outputs(r, c, case_id=case.id, seed=0, tolerance_for=tolerance_table(),
                               path=path)
    return shipped.shipped_after_timing(ref, cand, case, 0, build, DEVICE, compare)


@pytest.mark.parametrize("forgiving", [False, True])
def test_coarse_only_when_unwatched_is_refused_even_where_rounding_is_forgiven(
        tmp_path, monkeypatch, forgiving):
    ref = load(HERE / "scale_ref.py")
    case = FAMILIES["scale"][1][0]
    if forgiving:      # as for an autotuned original: differences up to GROSS_NORM forgiven
        monkeypatch.setattr(shipped, "may_round_otherwise", lambda *m: True)
    cheat = _check(ref, _module(tmp_path, "coarse_unwatched", COARSE_WHEN_UNWATCHED), case)
    assert cheat is not None and cheat.startswith("watched: after the timing runs")
    if forgiving:
        assert "its own call under the verifier's guards" in cheat
    # a candidate that rounds that way watched or not: forgiven as rounding where rounding is,
    # refused where it is not
    always = _check(ref, _module(tmp_path, "coarse_always", COARSE_ALWAYS), case)
    assert (always is None) if forgiving else (always is not None)
    assert _check(ref, load(HERE / "scale_honest_warps.py"), case) is None


def test_the_originals_side_taken_once_judges_every_candidate_alike(tmp_path):
    """The worker takes the original's side of the check once (``original_bare``) and judges
    each timed candidate against it: the same verdicts as taking it for each, with the original
    called for it once instead of once a candidate."""
    ref = load(HERE / "scale_ref.py")
    case = FAMILIES["scale"][1][0]

    def compare(r, c, path):
        return compare_outputs(r, c, case_id=case.id, seed=0, tolerance_for=tolerance_table(),
                               path=path)

    calls = []
    real = ref.scale
    ref.scale = lambda *a, **k: calls.append(1) or real(*a, **k)
    try:
        original = shipped.original_bare(ref, case, 0, build, DEVICE, compare)
        taken = len(calls)
        assert original is not None and taken >= 2
        cands = [_module(tmp_path, "coarse_unwatched", COARSE_WHEN_UNWATCHED),
                 _module(tmp_path, "coarse_always", COARSE_ALWAYS), load(HERE / "scale_honest_warps.py")]
        once = [shipped.shipped_after_timing(ref, c, case, 0, build, DEVICE, compare, original)
                for c in cands]
        judged_once = len(calls) - taken
        calls.clear()
        assert shipped.shipped_after_timing(ref, cands[2], case, 0, build, DEVICE, compare,
                                            original) is None
        assert calls == []                  # an honest candidate: no call of the original
        shipped.original_bare(ref, case, 0, build, DEVICE, compare)
        side = len(calls)                   # the side's calls once its bounds probe is cached
        calls.clear()
        each = [shipped.shipped_after_timing(ref, c, case, 0, build, DEVICE, compare) for c in cands]
        # taken for each candidate, the side costs its calls once a candidate
        assert side >= 2 and len(calls) >= len(cands) * side > judged_once
    finally:
        ref.scale = real
    assert [v is None for v in once] == [v is None for v in each] == [False, False, True]
