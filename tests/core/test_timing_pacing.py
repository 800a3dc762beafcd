"""Pacing and call-by-call turns in the timing loop, on a fake CUDA clock.

The fake stream keeps one GPU clock: a flush, a sleep and each variant's kernel add their time to
it; an event records the clock when the GPU reaches it, which is never earlier than the host's
clock at the moment the event was issued (the GPU cannot start work it has not been given). The
host clock advances by each variant's host cost. So an unpaced call whose host side is longer
than the flush is timed as host time, and a paced one as GPU time, as on a real GPU.
"""

from __future__ import annotations

import statistics

import pytest

from tritonforge.runtime import timing
from tritonforge.runtime.timing import TimingPlan, time_interleaved_cuda


class FakeCuda:
    """One stream: ``gpu`` is when the GPU finishes the work given so far, ``host`` the host's time."""

    FLUSH_MS = 0.085
    CYCLES_PER_MS = 1_000_000.0

    def __init__(self):
        self.gpu = 0.0
        self.host = 0.0
        self.slept_cycles = []

    def enqueue(self, ms: float) -> None:
        self.gpu = max(self.gpu, self.host) + ms

    def event(self):
        fake = self

        class Event:
            def __init__(self, enable_timing=True):
                self.at = None

            def record(self):
                fake.enqueue(0.0)
                self.at = fake.gpu

            def elapsed_time(self, other):
                return other.at - self.at
        return Event

    def sleep(self, cycles: int) -> None:
        self.slept_cycles.append(cycles)
        self.enqueue(cycles / self.CYCLES_PER_MS)

    def synchronize(self) -> None:
        self.host = max(self.host, self.gpu)


@pytest.fixture
def fake(monkeypatch):
    cuda = FakeCuda()
    monkeypatch.setattr(timing.torch.cuda, "Event", cuda.event())
    monkeypatch.setattr(timing.torch.cuda, "synchronize", cuda.synchronize)
    monkeypatch.setattr(timing.torch.cuda, "_sleep", cuda.sleep, raising=False)
    monkeypatch.setattr(timing, "_CYCLES_PER_MS", [FakeCuda.CYCLES_PER_MS])
    monkeypatch.setattr(timing, "_Flusher", lambda enabled, mode="write": (lambda: cuda.enqueue(FakeCuda.FLUSH_MS)))
    def perf_counter():
        return cuda.host / 1e3
    monkeypatch.setattr(timing.time, "perf_counter", perf_counter)
    return cuda


def call(cuda: FakeCuda, host_ms: float, gpu_ms: float):
    """A wrapper: ``host_ms`` of Python, then one kernel of ``gpu_ms``."""
    def fn():
        cuda.host += host_ms
        cuda.enqueue(gpu_ms)
    return fn


def test_unpaced_events_of_a_host_heavy_call_read_its_host_time(fake):
    """The race the pacer removes: the events see the wrapper's Python, not the kernel."""
    fns = {"a": call(fake, 0.2, 0.005)}
    samples, method = time_interleaved_cuda(fns, TimingPlan(rounds=4, round_ms=1.0, warmup_ms=0.5,
                                                            case_budget_ms=None))
    assert method.value == "cuda-events"
    assert statistics.median(samples["a"]) > 0.1


def test_paced_samples_are_the_longer_of_gpu_and_host_time_for_host_heavier_variants(fake):
    fns = {"light": call(fake, 0.010, 0.050), "heavy": call(fake, 0.200, 0.005)}
    samples, method = time_interleaved_cuda(fns, TimingPlan(rounds=4, round_ms=1.0, warmup_ms=0.5, pace=True,
                                                            abandon_slower=None, case_budget_ms=None))
    assert method.value == "cuda-events-paced"
    # a GPU-bound call: its kernel time exactly, however the flush and the host interleave
    assert statistics.median(samples["light"]) == pytest.approx(0.050)
    # a call with far more host work than the reference's: its host issue time, not its kernel
    assert statistics.median(samples["heavy"]) == pytest.approx(0.200)
    assert fake.slept_cycles and max(fake.slept_cycles) <= timing.PAD_LIMIT_MS * FakeCuda.CYCLES_PER_MS


def _paced_medians(fake, original: tuple[float, float], candidate: tuple[float, float]):
    """Median samples (ms) of an original and a candidate, each (host ms, GPU ms), paced."""
    fns = {"original": call(fake, *original), "candidate": call(fake, *candidate)}
    samples, _ = time_interleaved_cuda(fns, TimingPlan(rounds=4, round_ms=1.0, warmup_ms=0.5, pace=True,
                                                       abandon_slower=None, case_budget_ms=None))
    return statistics.median(samples["original"]), statistics.median(samples["candidate"])


def test_paced_samples_of_host_bound_calls_show_the_kernels_gain(fake):
    """Two wrappers of the same host cost, longer than their kernels: the events see the kernels
    alone (10 us and 5 us), so the candidate's 2x kernel reads 2x faster; neither adds host work,
    so neither is raised to its host time."""
    assert _paced_medians(fake, (0.060, 0.010), (0.060, 0.005)) == (pytest.approx(0.010),
                                                                    pytest.approx(0.005))


def test_paced_samples_hold_through_bursts_of_host_load(fake):
    """The host's cost triples in bursts of calls (other processes taking its cores): unpaced,
    the bursts' calls read host time and the median moves with them; paced, every sample is the
    kernel's time."""
    def bursty(gpu_ms: float):
        count = [0]

        def fn():
            count[0] += 1
            fake.host += 0.150 if (count[0] // 7) % 2 else 0.040
            fake.enqueue(gpu_ms)
        return fn

    plan = dict(rounds=6, round_ms=0.5, warmup_ms=0.3, abandon_slower=None, case_budget_ms=None)
    unpaced, _ = time_interleaved_cuda({"a": bursty(0.006), "b": bursty(0.006)}, TimingPlan(**plan))
    assert max(unpaced["a"]) > 0.05
    paced, _ = time_interleaved_cuda({"a": bursty(0.006), "b": bursty(0.006)},
                                     TimingPlan(pace=True, **plan))
    assert max(paced["a"] + paced["b"]) == pytest.approx(0.006)


def test_a_candidate_that_adds_host_work_keeps_its_host_time(fake):
    """A candidate whose kernel is faster but whose wrapper adds 100 us of host work (an
    autotuner's dispatch) is not hidden by the pacing: its samples are raised to its host time,
    and it reads slower than the original it would be slower than in use."""
    assert _paced_medians(fake, (0.020, 0.010), (0.120, 0.004)) == (pytest.approx(0.010),
                                                                    pytest.approx(0.120))


def test_a_burst_of_host_load_while_a_variant_is_learned_does_not_floor_it(fake):
    """The candidate's wrapper costs what the original's does, but its first calls, when its host
    time is learned, fell in a burst of host load (10x): measured again in turns with the
    original's, it is no heavier, and its samples stay the kernel's."""
    def burst_first(calls: int, host_ms: float, gpu_ms: float):
        count = [0]

        def fn():
            count[0] += 1
            fake.host += host_ms * (10 if count[0] <= calls else 1)
            fake.enqueue(gpu_ms)
        return fn

    plain = call(fake, 0.020, 0.010)
    # the warm-up and the first estimate take its first 11 calls: the burst covers the 9 of the
    # learning, not the turns with the original's calls after them
    fns = {"original": plain, "candidate": burst_first(20, 0.020, 0.005)}
    samples, _ = time_interleaved_cuda(fns, TimingPlan(rounds=4, round_ms=1.0, warmup_ms=0.5, pace=True,
                                                       abandon_slower=None, case_budget_ms=None))
    assert statistics.median(samples["candidate"]) == pytest.approx(0.005)
    # a burst that lasts through the turns too is taken for the variant's own cost (floored)
    fns = {"original": call(fake, 0.020, 0.010), "candidate": burst_first(60, 0.020, 0.005)}
    samples, _ = time_interleaved_cuda(fns, TimingPlan(rounds=4, round_ms=1.0, warmup_ms=0.5, pace=True,
                                                       abandon_slower=None, case_budget_ms=None))
    assert statistics.median(samples["candidate"]) > 0.05


def test_paced_timing_does_not_drop_a_variant_on_an_unpaced_estimate(fake):
    """Two identical host-heavy calls: neither is 'hopeless' however the first estimate fell."""
    fns = {"a": call(fake, 0.3, 0.004), "b": call(fake, 0.3, 0.004)}
    samples, _ = time_interleaved_cuda(fns, TimingPlan(rounds=5, round_ms=2.0, warmup_ms=1.0, pace=True,
                                                       case_budget_ms=None))
    assert len(samples["a"]) == len(samples["b"]) > 1
    ratio = statistics.median(samples["b"]) / statistics.median(samples["a"])
    assert ratio == pytest.approx(1.0)


def test_turns_give_every_variant_the_same_number_of_calls_each_round(fake):
    fns = {"inc": call(fake, 0.01, 0.02), "c0": call(fake, 0.01, 0.03), "c1": call(fake, 0.01, 0.025)}
    samples, _ = time_interleaved_cuda(fns, TimingPlan(rounds=3, round_ms=0.3, warmup_ms=0.1, interleave="call",
                                                       pace=True, abandon_slower=None, case_budget_ms=None))
    counts = {n: len(v) for n, v in samples.items()}
    assert len(set(counts.values())) == 1 and counts["inc"] >= 3
    assert statistics.median(samples["c0"]) == pytest.approx(0.03)
    assert statistics.median(samples["inc"]) == pytest.approx(0.02)


def test_a_bad_flush_mode_is_refused():
    from tritonforge.config import load_settings
    from tritonforge.errors import ConfigError

    with pytest.raises(ConfigError, match="flush_mode"):
        load_settings(overrides={"flush_mode": "bogus"}, env={})
    with pytest.raises(ConfigError, match="timing_interleave"):
        load_settings(overrides={"timing_interleave": "sometimes"}, env={})


def test_every_variant_sleeps_as_long_as_the_longest_learned(fake, monkeypatch):
    """Two copies of one call (an A/A): the first's host time is learned while the host is quiet
    (10 us), the second's under load (100 us); in the turns both cost 200 us. The first's own
    sleep (2 x 10 + 30 us), with the 85 us flush, would end before its kernel is issued and its
    events would read host time; sleeping as long as the longest learned, both read the kernel's
    5 us."""
    learning = [False]
    real_learn = timing._Pacer.learn

    def learn(self, name, fn):
        learning[0] = True
        try:
            real_learn(self, name, fn)
        finally:
            learning[0] = False

    monkeypatch.setattr(timing._Pacer, "learn", learn)

    def learned_at(host_ms: float):
        def fn():
            fake.host += host_ms if learning[0] else 0.200
            fake.enqueue(0.005)
        return fn

    fns = {"a": learned_at(0.010), "b": learned_at(0.100)}
    samples, _ = time_interleaved_cuda(fns, TimingPlan(rounds=4, round_ms=1.0, warmup_ms=0.5, pace=True,
                                                       abandon_slower=None, case_budget_ms=None))
    assert statistics.median(samples["a"]) == pytest.approx(0.005)
    assert statistics.median(samples["b"]) == pytest.approx(0.005)
    assert len(set(fake.slept_cycles[-8:])) == 1
