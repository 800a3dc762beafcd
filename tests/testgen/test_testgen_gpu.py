"""On a GPU: performance sizes are timed on the original, and time grows with them."""

from pathlib import Path

import pytest

from tritonforge.config import Settings
from tritonforge.testgen.generate import TestgenOptions, generate

HERE = Path(__file__).parent


@pytest.mark.gpu
def test_performance_sizes_are_timed_and_grow(tmp_path):
    result = generate(HERE / "sample_axpy.py", Settings(device="cuda", run_dir=str(tmp_path)), tmp_path,
                      options=TestgenOptions(stability=False), device="cuda")
    assert result.device == "cuda" and not result.perf_by_bytes_only
    perf = {c.case.id: c for c in result.performance}
    first, second = perf["axpy-perf-1"], perf["axpy-perf-2"]
    assert first.median_ms is not None and second.median_ms > first.median_ms
    assert first.bytes >= 0.9 * 64 * 2**20 or "us on the original" in first.note
    assert any(n.startswith("axpy: timed sizes") for n in result.notes)
    assert {c.case.id for c in result.correctness} >= {"t1-trace-1", "t2-odd-x.1-tail"}
