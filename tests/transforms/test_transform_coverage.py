"""Every transform over the 142 TritonBench-G kernel modules (from ../shared, at run time).

``applies`` must never crash and must agree with ``apply``: where it says yes, ``apply`` gives
Python the analyzer reads again. The apply pass over all modules takes about 90 s and runs only
with TRITONFORGE_SLOW_TESTS=1; a sample of the modules runs by default.
"""

import os
from pathlib import Path

import pytest

from tritonforge.transforms import REGISTRY
from tritonforge.transforms.coverage import measure, render_markdown, tritonbench_modules

DATA = Path(__file__).resolve().parents[3] / "shared" / "tritonbench_g" / "kernels.json"

pytestmark = pytest.mark.skipif(not DATA.exists(), reason=f"{DATA} not present")

# Lower bounds (the counts at the time of writing, docs/transforms_coverage.md, minus slack):
# a change that makes a transform apply much less often fails here and must say why.
FLOORS = {"launch_params": 120, "constexpr_override": 35, "param_block_override": 12,
          "autotune": 90, "autotune_widen": 30, "autotune_blocks": 28, "autotune_pin": 28,
          "loop_pipelining": 75, "offset_hints": 65, "cache_hints": 80, "pid_swizzle": 12,
          "persistent_grid": 45, "rows_per_program": 8, "heuristic_scale": 4}


@pytest.fixture(scope="module")
def modules():
    return tritonbench_modules(DATA)


def test_applies_counts(modules):
    rows = measure(modules, REGISTRY, apply=False)
    counts = {r.transform: r.applies for r in rows}
    low = {n: (counts[n], floor) for n, floor in FLOORS.items() if counts[n] < floor}
    assert not low, f"transforms applying less often than before: {low}"
    text = render_markdown(rows, "t")
    assert text.count("\n| `") == len(REGISTRY)


def test_apply_agrees_with_applies_on_a_sample(modules):
    sample = modules[::14]          # 11 modules of all kinds
    rows = measure(sample, REGISTRY, apply=True)
    failures = [f for r in rows for f in r.failures]
    assert not failures, "\n".join(failures)
    assert all(r.applied == r.applies for r in rows)


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("TRITONFORGE_SLOW_TESTS"),
                    reason="about 90 s: set TRITONFORGE_SLOW_TESTS=1")
def test_apply_agrees_with_applies_everywhere(modules):
    rows = measure(modules, REGISTRY, apply=True)
    failures = [f for r in rows for f in r.failures]
    assert not failures, "\n".join(failures)
