"""Profile assembly (source, notes, fallback) and the plain-text rendering."""

from tritonforge.model import Bound, CompileStats
from tritonforge.profile.build import build_profile
from tritonforge.profile.metrics import parse_raw_csv
from tritonforge.profile.ncu import NcuResult, NcuStatus, PERMISSION_FIX
from tritonforge.profile.render import hints_for_prompt, render_profile
from tritonforge.profile.roofline import Peaks, place

STATS = CompileStats("sin_kernel", "cuda:90", 4, 3, registers=16, spills=0, shared_bytes=0,
                     vector_width_bytes=4, constexprs=(("BLOCK_SIZE", 4),))
PEAKS = Peaks("NVIDIA H200", "2.11.0", 4300.0, 790.0, 790.0, 50.0)


def test_permission_falls_back_to_timing_and_says_why():
    ncu = NcuResult(NcuStatus.PERMISSION, PERMISSION_FIX)
    roof = place(2 * 2**28, 2**26, 10_080.0, PEAKS)
    p = build_profile("sin", "perf-0", ncu=ncu, stats=[STATS], roofline=roof, time_us=10_080.0,
                      launches_per_call=1)
    assert p.source == "timing-only" and p.kernels == ()
    assert any("permission" in n and "NVreg_RestrictProfilingToAdminUsers=0" in n for n in p.notes)
    assert any("fell back" in n for n in p.notes)
    d = p.diagnosis
    assert d.bound is Bound.LATENCY and d.bottleneck == "too little work per program"
    assert d.evidence[0].startswith("no Nsight Compute metrics")
    assert d.hints[0].kind == "larger_blocks" and "BLOCK_SIZE" in d.hints[0].knobs


def test_static_only_when_nothing_was_timed():
    p = build_profile("t", None, stats=[STATS])
    assert p.source == "static-only" and "not run" in p.notes[0]


def test_ncu_profile_and_rendering(fixtures_dir):
    kernels = parse_raw_csv((fixtures_dir / "h200_sin_basic_raw.csv").read_text())
    ncu = NcuResult(NcuStatus.OK, "profiled", tuple(kernels))
    failed = CompileStats("sin_kernel", "cuda:80", 4, 3, error="CompilationError: boom\nmore")
    p = build_profile("sin", "perf-0", ncu=ncu, stats=[STATS, failed], time_us=10_080.0)
    assert p.source == "ncu" and len(p.kernels) == 2
    assert any("compile failed" in n and "boom" in n for n in p.notes)
    text = render_profile(p)
    for part in ("profile of sin, case perf-0 (source: ncu)", "bound: latency",
                 "too little work per program", "kernel sin_kernel (launch 0)", "grid_size",
                 "16,777,216", "static stats:", "widest global access 4 B", "compile failed"):
        assert part in text, part
    prompt = hints_for_prompt(p.diagnosis)
    assert prompt.startswith("Bound: latency. Bottleneck: too little work per program.")
    assert "Hint [larger_blocks] (knobs: BLOCK_SIZE, num_warps)" in prompt
