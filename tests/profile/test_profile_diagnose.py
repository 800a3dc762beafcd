"""The diagnosis as a whole: bound classification, ordering, the no-ncu path."""

from tritonforge.model import Bound, CompileStats, Hint, KernelProfile, Metric
from tritonforge.profile.diagnose import Finding, Thresholds, classify_bound, diagnose, gather_facts


def kp(name, duration, **metrics):
    ms = tuple(Metric(k, float(v)) for k, v in dict(metrics, duration_us=duration).items())
    return KernelProfile(name, ms, duration_us=duration)


def test_dominant_kernel_is_the_one_with_most_time():
    f = gather_facts([kp("a", 10.0, dram_throughput_pct=10), kp("b", 80.0, dram_throughput_pct=70),
                      kp("b", 90.0, dram_throughput_pct=90)], [], None, None, None)
    assert f.kernel == "b" and f.launches_profiled == 2
    assert f.metrics["dram_throughput_pct"] == 80.0          # averaged over b's launches
    assert round(f.share, 3) == round(170 / 180, 3)


def test_static_stats_are_matched_by_kernel_name():
    stats = [CompileStats("a", "cuda:80", 4, 3), CompileStats("b", "cuda:80", 8, 2)]
    f = gather_facts([kp("b", 50.0)], stats, None, None, None)
    assert f.stats.kernel == "b" and f.limits.arch == 80


def test_bound_from_speed_of_light():
    mem = gather_facts([kp("k", 500.0, mem_throughput_pct=88, dram_throughput_pct=85,
                           sm_throughput_pct=20)], [], None, None, None)
    assert classify_bound(mem)[0] is Bound.MEMORY
    comp = gather_facts([kp("k", 500.0, mem_throughput_pct=30, sm_throughput_pct=75)], [], None, None, None)
    assert classify_bound(comp)[0] is Bound.COMPUTE
    short = gather_facts([kp("k", 3.0, mem_throughput_pct=5, sm_throughput_pct=5)], [], None, None, None)
    assert classify_bound(short)[0] is Bound.LAUNCH
    assert classify_bound(gather_facts([], [], None, None, None))[0] is Bound.UNKNOWN


def test_diagnosis_orders_hints_and_keeps_the_best_per_kind():
    def r1(f):
        return Finding("first", ("e1",), (Hint("a", "e1", (), 0.3), Hint("b", "e1", (), 0.9)))

    def r2(f):
        return Finding("second", ("e2",), (Hint("a", "e2", (), 0.95),))

    def broken(f):
        raise RuntimeError("a rule bug must not hide the others")

    d = diagnose([kp("k", 100.0)], [], None, None, None, rules=[r1, broken, r2])
    assert d.bottleneck == "second"
    assert [(h.kind, h.priority) for h in d.hints] == [("a", 0.95), ("b", 0.9)]
    assert "e1" in d.evidence and "e2" in d.evidence


def test_static_and_timing_only_diagnosis_says_so():
    stats = CompileStats("k", "cuda:90", 8, 3, registers=168, spills=240, shared_bytes=0,
                         vector_width_bytes=16, constexprs=(("BLOCK", 1024),))
    d = diagnose([], [stats], None, 1, 900.0)
    assert d.evidence[0].startswith("no Nsight Compute metrics: diagnosis from static stats + timing")
    kinds = [h.kind for h in d.hints]
    assert kinds[0] == "avoid_spills" and "reduce_registers" in kinds
    assert d.bottleneck == "register spills"


def test_launch_bound_from_timing_alone():
    d = diagnose([], [], None, 20, 60.0)
    assert d.bound is Bound.LAUNCH and d.bottleneck == "launch overhead"
    assert d.hints[0].kind == "fuse_launches"


def test_thresholds_are_tunable():
    m = kp("k", 100.0, waves_per_sm=1.3)
    strict = diagnose([m], [], None, None, None, thresholds=Thresholds(wave_efficiency=0.5))
    loose = diagnose([m], [], None, None, None, thresholds=Thresholds(wave_efficiency=0.9))
    assert all(h.kind != "balance_waves" for h in strict.hints)
    assert any(h.kind == "balance_waves" for h in loose.hints)
