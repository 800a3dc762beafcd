"""Roofline placement, and the peaks cache (measurement itself is GPU-only)."""

import json

import pytest

from tritonforge.model import Bound
from tritonforge.profile.roofline import Peaks, load_cached, measure_peaks, place, ridge_point, store_cached

# numbers seen on an H200 here (KINDS.md): 4.3 TB/s copy, about 790 TFLOP/s bf16
H200 = Peaks(gpu="NVIDIA H200", torch_version="2.11.0", dram_bw_gbs=4300.0, bf16_tflops=790.0,
             fp16_tflops=790.0, fp32_tflops=50.0, tf32_tflops=400.0)


def test_memory_bound_copy_near_peak():
    # 1 GiB read + 1 GiB written in 560 us = 3.83 TB/s = 89% of 4.3 TB/s
    r = place(2 * 2**30, 0.0, 560.0, H200)
    assert r.bound is Bound.MEMORY and r.fraction_of_peak == pytest.approx(2 * 2**30 / 560e-6 / 4.3e12)
    assert r.achieved_bw_gbs == pytest.approx(3834.5, rel=1e-3) and r.peak_tflops == 50.0


def test_compute_bound_matmul_uses_the_tensor_roof():
    flops = 2 * 8192**3
    r = place(3 * 8192 * 8192 * 2, flops, 1800.0, H200, compute="bf16")
    assert r.bound is Bound.COMPUTE and r.peak_tflops == 790.0
    assert r.achieved_tflops == pytest.approx(flops / 1.8e-3 / 1e12)
    on_fma = place(3 * 8192 * 8192 * 2, flops, 1800.0, H200, compute="fp32")
    assert on_fma.fraction_of_peak > 1.0          # impossible on the FMA pipe: the caller chose wrong


def test_latency_and_launch_bound():
    # the sin fixture: 2 x 256 MiB moved in 10.08 ms = 53 GB/s: far from both roofs
    slow = place(2 * 2**28, 2**26, 10_080.0, H200)
    assert slow.bound is Bound.LATENCY and slow.fraction_of_peak < 0.02
    tiny = place(2 * 4096 * 4, 4096, 4.0, H200)
    assert tiny.bound is Bound.LAUNCH
    several = place(2 * 4096 * 4 * 10, 4096, 40.0, H200, launches=10)
    assert several.bound is Bound.LAUNCH
    with pytest.raises(ValueError):
        place(1, 1, 0.0, H200)


def test_ridge_point():
    assert ridge_point(H200, "bf16") == pytest.approx(790e12 / 4300e9)
    with pytest.raises(ValueError):
        H200.tflops("int4")


def test_cache_round_trip_is_keyed_by_gpu_and_torch(tmp_path):
    path = tmp_path / "peaks.json"
    store_cached(H200, path)
    other = Peaks(gpu="NVIDIA H100 80GB HBM3", torch_version="2.11.0", dram_bw_gbs=3000.0,
                  bf16_tflops=798.0, fp16_tflops=798.0, fp32_tflops=50.0)
    store_cached(other, path)
    assert load_cached("NVIDIA H200", "2.11.0", path) == H200
    assert load_cached("NVIDIA H100 80GB HBM3", "2.11.0", path).dram_bw_gbs == 3000.0
    assert load_cached("NVIDIA H200", "2.12.0", path) is None
    assert len(json.loads(path.read_text())) == 2
    path.write_text("not json")
    assert load_cached("NVIDIA H200", "2.11.0", path) is None


@pytest.mark.gpu
def test_measure_peaks_on_the_gpu(tmp_path):
    path = tmp_path / "peaks.json"
    peaks = measure_peaks(path=path, copy_bytes=1 << 28, matmul_n=4096)
    assert 500 < peaks.dram_bw_gbs < 10_000
    assert 50 < peaks.bf16_tflops < 3000 and 5 < peaks.fp32_tflops < peaks.bf16_tflops
    again = measure_peaks(path=path)
    assert again == peaks                      # the second call comes from the cache
