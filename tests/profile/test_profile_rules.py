"""Each diagnosis rule on synthetic metric sets: a case where it fires and one where it does not."""

import pytest

from tritonforge.model import Bound, CompileStats, KernelProfile, Metric, Roofline
from tritonforge.profile import rules
from tritonforge.profile.diagnose import Facts, gather_facts


def kp(name="k", **metrics) -> KernelProfile:
    return KernelProfile(name, tuple(Metric(k, float(v)) for k, v in metrics.items()),
                         duration_us=metrics.get("duration_us"))


def st(**kw) -> CompileStats:
    base = dict(kernel="k", target="cuda:90", num_warps=4, num_stages=3, registers=32, spills=0,
                shared_bytes=0, vector_width_bytes=16, constexprs=(("BLOCK_SIZE", 1024),))
    base.update(kw)
    return CompileStats(**base)


def roof(fraction, bound=Bound.MEMORY) -> Roofline:
    return Roofline(1e9, 1e6, 300.0, 3333.0, 0.003, 4300.0, 60.0, fraction, bound)


def facts(metrics=None, stats=None, roofline=None, launches=None, time_us=None) -> Facts:
    kernels = [kp(**metrics)] if metrics else []
    return gather_facts(kernels, [stats] if stats else [], roofline, launches, time_us)


def test_near_roofline():
    fired = rules.near_roofline(facts(roofline=roof(0.86)))
    assert fired and fired.near_roofline and fired.hints[0].kind == "near_roofline"
    assert "86%" in fired.evidence[0]
    assert rules.near_roofline(facts(metrics=dict(dram_throughput_pct=91.0))).near_roofline
    assert rules.near_roofline(facts(roofline=roof(0.5))) is None
    assert rules.near_roofline(facts(metrics=dict(dram_throughput_pct=30.0, fma_pipe_pct=20))) is None
    assert rules.near_roofline(facts()) is None


def test_near_roofline_counts_stores_still_in_l2():
    # the softmax fixture: 32.8 MB read, 10.2 MB of 32.8 MB stored reached DRAM, 16.45 us
    m = dict(dram_bytes_read=32.78e6, dram_bytes_write=10.17e6, dram_bw_gbs=2611.0,
             dram_throughput_pct=54.33, duration_us=16.45, global_st_sectors=1.025e6)
    f = facts(metrics=m)
    eff = f.effective_dram()
    assert eff.pending_write_bytes == pytest.approx(32.8e6 - 10.17e6, rel=1e-2)
    assert eff.pct == pytest.approx(83.0, abs=1.0) and eff.peak_gbs == pytest.approx(4806, rel=1e-2)
    fired = rules.near_roofline(f)
    assert fired and "still in L2" in fired.evidence[0]
    # without the store count, DRAM % alone (54%) is not near the roof
    assert rules.near_roofline(facts(metrics=dict(m, global_st_sectors=0))) is None


def test_near_roofline_is_not_claimed_for_spills_or_a_dot_off_the_tensor_cores():
    busy = dict(dram_throughput_pct=90.0)
    assert rules.near_roofline(facts(metrics=dict(busy, local_ld_sectors=1e6))) is None
    assert rules.near_roofline(facts(metrics=busy, stats=st(spills=64))) is None
    assert rules.near_roofline(facts(roofline=roof(0.9), stats=st(has_dot=True))) is None
    # with a measured roofline too: the spill traffic is counted as if it were work
    # (int8_quantization, H100: "87% of the roofline" while spilling 38 KB per thread)
    assert rules.near_roofline(facts(roofline=roof(0.87), stats=st(spills=38396))) is None
    assert rules.near_roofline(facts(roofline=roof(0.87), metrics=dict(local_st_sectors=1e6))) is None
    assert rules.near_roofline(facts(roofline=roof(0.87), stats=st(spills=0)))
    assert rules.near_roofline(facts(metrics=dict(tensor_pipe_pct=79.0)))          # pipes: from 75%
    assert rules.near_roofline(facts(metrics=dict(tensor_pipe_pct=70.0))) is None


def test_resource_limits():
    bad = st(shared_bytes=240_000, warnings=("needs 240000 B of shared memory per block, over the "
                                              "232448 B (227 KiB) sm_90 allows",))
    fired = rules.resource_limits(facts(stats=bad))
    assert fired and fired.hints[0].kind == "fit_device_limits" and "num_stages" in fired.hints[0].knobs
    assert rules.resource_limits(facts(stats=st())) is None


def test_launch_overhead():
    fired = rules.launch_overhead(facts(launches=12, time_us=30.0))
    assert fired and fired.bound is Bound.LAUNCH
    assert {h.kind for h in fired.hints} == {"more_work_per_launch", "fuse_launches"}
    single = rules.launch_overhead(facts(metrics=dict(duration_us=3.0)))
    assert single and [h.kind for h in single.hints] == ["more_work_per_launch"]
    assert rules.launch_overhead(facts(launches=1, time_us=250.0)) is None
    assert rules.launch_overhead(facts()) is None


def test_small_grid():
    fired = rules.small_grid(facts(metrics=dict(grid_size=40, sm_count=132)))
    assert fired and "70%" in fired.evidence[0] and fired.hints[0].kind == "more_programs"
    assert rules.small_grid(facts(metrics=dict(grid_size=4096, sm_count=132))) is None
    # a 2 us kernel: the launch, not the grid, is the story
    assert rules.small_grid(facts(metrics=dict(grid_size=4, sm_count=132, duration_us=2.3))) is None


def test_tiny_programs_from_metrics_and_from_static_stats():
    m = dict(waves_per_sm=7943.76, duration_us=10080.6, dram_throughput_pct=1.08,
             grid_size=16777216, block_size=128)
    fired = rules.tiny_programs(facts(metrics=m))
    assert fired and fired.hints[0].kind == "larger_blocks" and fired.hints[0].priority == 0.9
    static = rules.tiny_programs(facts(stats=st(constexprs=(("BLOCK_SIZE", 4),))))
    assert static and "4 element(s)" in static.evidence[0] and "BLOCK_SIZE" in static.hints[0].knobs
    assert rules.tiny_programs(facts(metrics=dict(m, waves_per_sm=3.0))) is None
    assert rules.tiny_programs(facts(metrics=dict(m, dram_throughput_pct=85.0))) is None
    assert rules.tiny_programs(facts(stats=st())) is None            # BLOCK_SIZE=1024 >= 128 threads


def test_memory_parallelism():
    m = dict(dram_throughput_pct=22.0, stall_long_scoreboard=8.0, stall_wait=1.0, stall_barrier=1.0,
             achieved_occupancy_pct=18.0)
    fired = rules.memory_parallelism(facts(metrics=m, stats=st(constexprs=(("BLOCK_SIZE", 128),))))
    assert fired and "80% of stall cycles" in fired.evidence[0]
    assert set(fired.hints[0].knobs) >= {"BLOCK_SIZE", "num_warps", "num_stages"}
    assert rules.memory_parallelism(facts(metrics=dict(m, dram_throughput_pct=75.0))) is None
    assert rules.memory_parallelism(facts(metrics=dict(m, stall_long_scoreboard=0.5))) is None
    assert rules.memory_parallelism(facts(metrics=dict(dram_throughput_pct=5.0))) is None   # no stalls


def test_register_limited_from_ncu_and_static():
    m = dict(occ_limit_registers=1, occ_limit_warps=8, theoretical_occupancy_pct=12.5,
             registers_per_thread=168)
    fired = rules.register_limited(facts(metrics=m))
    assert fired and "168 registers" in fired.evidence[0] and fired.hints[0].kind == "reduce_registers"
    static = rules.register_limited(facts(stats=st(registers=168, num_warps=8)))
    assert static and "(static)" in static.evidence[0]
    dot = rules.register_limited(facts(stats=st(registers=168, num_warps=8, has_dot=True)))
    assert dot.hints[0].priority < static.hints[0].priority      # normal for matmuls: lower
    assert rules.register_limited(facts(metrics=dict(m, occ_limit_registers=16))) is None
    # one-warp programs: the 32-block limit binds before registers (rowsum fixture)
    assert rules.register_limited(facts(metrics=dict(occ_limit_registers=36, occ_limit_warps=64,
                                                     occ_limit_blocks=32, theoretical_occupancy_pct=50,
                                                     registers_per_thread=51))) is None
    assert rules.register_limited(facts(stats=st(registers=32))) is None


def test_spills():
    fired = rules.spills(facts(stats=st(spills=3600)))
    assert fired and "3600 bytes" in fired.evidence[0] and fired.hints[0].kind == "avoid_spills"
    assert rules.spills(facts(metrics=dict(local_ld_sectors=1e6, local_st_sectors=5e5)))
    assert rules.spills(facts(stats=st(spills=0), metrics=dict(local_ld_sectors=0))) is None


def test_narrow_accesses():
    narrow = rules.narrow_accesses(facts(stats=st(vector_width_bytes=4)))
    assert narrow and "4 bytes" in narrow.evidence[0] and narrow.hints[0].kind == "vectorize_accesses"
    unco = rules.narrow_accesses(facts(metrics=dict(global_ld_requests=1e6, global_ld_sectors=3.2e7)))
    assert unco and "32.0 sectors" in unco.evidence[0]
    assert rules.narrow_accesses(facts(stats=st(vector_width_bytes=16))) is None
    assert rules.narrow_accesses(facts(stats=st(vector_width_bytes=4),
                                       roofline=roof(0.7, Bound.COMPUTE))) is None
    assert rules.narrow_accesses(facts(metrics=dict(global_ld_requests=1e6, global_ld_sectors=1.6e7),
                                       stats=st(vector_width_bytes=16))) is None


def test_tensor_cores():
    no_mma = rules.tensor_cores(facts(stats=st(has_dot=True, uses_tensor_cores=False)))
    assert no_mma and no_mma.hints[0].kind == "mma_friendly_tiles" and no_mma.hints[0].priority == 0.85
    idle = rules.tensor_cores(facts(stats=st(has_dot=True, uses_tensor_cores=True, mma_kind="wgmma"),
                                    metrics=dict(tensor_pipe_pct=3.0, fma_pipe_pct=55.0)))
    assert idle and "tensor pipe at 3.0%" in idle.evidence[0]
    old = rules.tensor_cores(facts(stats=st(has_dot=True, uses_tensor_cores=True, mma_kind="mma")))
    assert old and "wgmma" in old.evidence[0]
    assert rules.tensor_cores(facts(stats=st(has_dot=True, uses_tensor_cores=True, mma_kind="wgmma"),
                                    metrics=dict(tensor_pipe_pct=70.0, fma_pipe_pct=10.0))) is None
    assert rules.tensor_cores(facts(stats=st())) is None
    fma_only = rules.tensor_cores(facts(metrics=dict(tensor_pipe_pct=0.0, fma_pipe_pct=68.0,
                                                     sm_throughput_pct=78.0)))
    assert fma_only and fma_only.hints[0].priority == 0.5 and "if this is matrix math" in fma_only.evidence[0]


def test_l2_locality():
    m = dict(l2_hit_rate_pct=35.0, dram_throughput_pct=70.0)
    fired = rules.l2_locality(facts(metrics=m, stats=st(has_dot=True, uses_tensor_cores=True)))
    assert fired and fired.hints[0].kind == "swizzle_program_ids"
    assert rules.l2_locality(facts(metrics=m, stats=st())) is None              # not a dot kernel
    assert rules.l2_locality(facts(metrics=dict(m, l2_hit_rate_pct=80.0),
                                   stats=st(has_dot=True))) is None


def test_tail_effect():
    fired = rules.tail_effect(facts(metrics=dict(waves_per_sm=1.1)))
    assert fired and "55%" in fired.evidence[0]
    assert rules.tail_effect(facts(metrics=dict(waves_per_sm=1.95))) is None
    assert rules.tail_effect(facts(metrics=dict(waves_per_sm=40.2))) is None


def test_barrier_stalls():
    fired = rules.barrier_stalls(facts(metrics=dict(stall_barrier=5.0, stall_long_scoreboard=5.0)))
    assert fired and "50%" in fired.evidence[0]
    assert rules.barrier_stalls(facts(metrics=dict(stall_barrier=1.0, stall_long_scoreboard=9.0))) is None


@pytest.mark.parametrize("rule", rules.RULES, ids=lambda r: r.__name__)
def test_every_rule_is_silent_without_data(rule):
    assert rule(facts()) is None


def test_outside_kernels_names_the_wrappers_share():
    # matrix_reduction (H100, 2026-11-25): a 2.8 us kernel in a 581 us case
    fired = rules.outside_kernels(facts(metrics=dict(duration_us=2.8), launches=1, time_us=581.0))
    assert fired is not None and fired.hints[0].kind == "outside_kernels"
    assert "2.8 us of the case's 581.0 us (0%)" in fired.evidence[0]
    assert "at most 1.00x faster" in fired.evidence[0]
    assert fired.priority == pytest.approx(0.9)          # the bottleneck, ahead of kernel rules
    # max_reduction: 49 of 239 us, a 1.26x cap
    mid = rules.outside_kernels(facts(metrics=dict(duration_us=49.0), launches=1, time_us=239.0))
    assert mid is not None and "at most 1.26x" in mid.evidence[0] and mid.priority == pytest.approx(0.9)
    # 40%: named, but behind what the kernel rules find
    low = rules.outside_kernels(facts(metrics=dict(duration_us=40.0), launches=1, time_us=100.0))
    assert low is not None and low.priority < 0.5


def test_outside_kernels_stays_silent_where_the_kernels_are_the_time_or_unknown():
    assert rules.outside_kernels(facts(metrics=dict(duration_us=95.0), launches=1, time_us=100.0)) is None
    # ncu's sum stood in for the time (no caller's measurement): nothing to compare
    assert rules.outside_kernels(facts(metrics=dict(duration_us=95.0), launches=1)) is None
    assert rules.outside_kernels(facts(time_us=100.0)) is None          # no kernel profiled
    assert rules.outside_kernels(facts(metrics=dict(dram_throughput_pct=50.0), time_us=100.0)) is None


def test_outside_kernels_scales_to_the_launches_of_one_call():
    # ncu capped at 2 profiled launches of a call that makes 8: 4 x (2 x 10 us) = 80 of 100 us
    two = [kp(duration_us=10.0), kp(duration_us=10.0)]
    f = gather_facts(two, [], None, 8, 100.0)
    assert f.kernel_us_per_call() == pytest.approx(80.0)
    assert rules.outside_kernels(f) is None
    # the same launches in a call that makes 2: 20 of 100 us
    fired = rules.outside_kernels(gather_facts(two, [], None, 2, 100.0))
    assert fired is not None and "20.0 us of the case's 100.0 us (20%)" in fired.evidence[0]
    # two kernels count together
    mixed = [kp("a", duration_us=10.0), kp("b", duration_us=30.0)]
    assert gather_facts(mixed, [], None, 2, 100.0).kernel_us_per_call() == pytest.approx(40.0)


def test_outside_kernels_leads_the_diagnosis_when_the_kernel_is_a_sliver():
    from tritonforge.profile.diagnose import diagnose

    d = diagnose([kp(duration_us=2.8, dram_throughput_pct=1.0, sm_throughput_pct=1.0)], [], None,
                 1, 581.0)
    assert d.bottleneck == "time outside the Triton kernels"
    assert d.hints[0].kind == "outside_kernels"


def test_kernel_share_of_a_stored_profile():
    from tritonforge.model import Profile
    from tritonforge.profile.diagnose import kernel_share

    rl = Roofline(1e9, 1e6, 581.0, 3333.0, 0.003, 4300.0, 60.0, 0.1, Bound.MEMORY)
    p = Profile("t", "perf-03", "ncu", kernels=(kp(duration_us=2.8),), roofline=rl)
    assert kernel_share(p) == pytest.approx(2.8 / 581.0)
    assert kernel_share(Profile("t", "perf-03", "ncu", kernels=(kp(duration_us=2.8),))) is None
    assert kernel_share(Profile("t", "perf-03", "static-only", roofline=rl)) is None
