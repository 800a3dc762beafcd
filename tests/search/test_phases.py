"""search.phases adds up wall and queued seconds per phase, in the order phases first ran."""

from __future__ import annotations

import pytest

from tritonforge.model.serialize import dumps, loads
from tritonforge.search.phases import PhaseClock, PhaseTime


def test_phases_add_up_over_rounds_and_keep_first_seen_order():
    now, queued = [0.0], [0.0]
    clock = PhaseClock(blocked=lambda: queued[0], clock=lambda: now[0])
    for wall, wait in ((2.0, 0.5), (3.0, 1.0)):
        with clock.phase("verify"):
            now[0] += wall
            queued[0] += wait
        with clock.phase("time"):
            now[0] += 1.0
    assert clock.times() == (PhaseTime("verify", 5.0, 1.5), PhaseTime("time", 2.0, 0.0))


def test_a_phase_that_raises_is_still_counted():
    now = [0.0]
    clock = PhaseClock(blocked=lambda: 0.0, clock=lambda: now[0])
    with pytest.raises(RuntimeError):
        with clock.phase("final check"):
            now[0] += 4.0
            raise RuntimeError("worker died")
    assert clock.times() == (PhaseTime("final check", 4.0, 0.0),)


def test_phase_times_survive_the_store_round_trip():
    times = (PhaseTime("profile", 18.0, 2.5),)
    assert loads(dumps(times)) == times
