"""The selfcheck: the original timed against copies of itself in one request (bench.selfcheck)."""

from types import SimpleNamespace

import pytest

from tritonforge.bench.selfcheck import SelfRatio, self_check
from tritonforge.model import Case, CaseRole, Status, Task, Timing, TimingMethod, VariantResult


def _task() -> Task:
    cases = tuple(Case(cid, CaseRole.PERFORMANCE, None) for cid in ("p0", "p1"))
    return Task("k", "x = 1\n", ("f",), cases, "test")


class _Evaluator:
    """Times variant i at ``levels[i]`` ms on every case; remembers the variants asked for."""

    def __init__(self, levels):
        self.levels, self.asked = levels, None

    def evaluate(self, task, variants, **kw):
        self.asked = variants
        results = tuple(
            VariantResult(v.name, v.hash, Status.OK, timings=tuple(
                Timing(c.id, v.name, TimingMethod.CUDA_EVENTS, (self.levels[i],) * 5)
                for c in task.performance_cases))
            for i, v in enumerate(variants))
        return SimpleNamespace(results=results)


def test_two_copies_give_the_ratio_as_before():
    check = self_check(_task(), _Evaluator([2.0, 1.0]))
    assert check.sum_ratio == pytest.approx(2.0)
    assert all(r.medians_ms == () and r.spread == pytest.approx(2.0) for r in check.ratios)


def test_more_copies_show_the_spread_of_levels_within_one_request():
    """matrix_reduction's perf-07 (H100, 2026-11-25): 0.17, 0.28 and 0.38 ms in one request."""
    ev = _Evaluator([0.28, 0.28, 0.17, 0.38])
    check = self_check(_task(), ev, copies=4)
    assert [v.name for v in ev.asked] == ["original", "original-again", "original-3", "original-4"]
    assert len({v.source for v in ev.asked}) == 1
    r = check.ratios[0]
    assert r.ratio == pytest.approx(1.0)                       # A and B alone look alike
    assert r.medians_ms == (0.28, 0.28, 0.17, 0.38)
    assert r.spread == pytest.approx(0.38 / 0.17)


def test_copies_outside_the_range_are_refused():
    with pytest.raises(ValueError):
        self_check(_task(), _Evaluator([1.0]), copies=1)
    with pytest.raises(ValueError):
        self_check(_task(), _Evaluator([1.0] * 9), copies=9)
    assert SelfRatio("c", 1.0, 1.0).spread == pytest.approx(1.0)


def test_the_cli_takes_copies_from_2_to_8(capsys):
    from tritonforge.cli import main

    with pytest.raises(SystemExit):
        main(["bench", "selfcheck", "--names", "add_example", "--copies", "9"])
    assert "from 2 to 8" in capsys.readouterr().err
