"""Recorded Nsight Compute reports and the diagnosis each must get.

Adding a fixture: drop the raw CSV (``ncu --csv --page raw``, or ``ncu --import R --csv --page raw``)
into tests/fixtures/ncu/ and add one ``Expected`` row below. ``stats`` names the entry of
``<gpu>_stats.json`` holding the static stats recorded with it (tests/fixtures/ncu/record.py writes
both). Every CSV in that folder must have a row (a test checks), so a fixture is never silently
unused. ``.ncu-rep`` files are read through ncu_report or ncu, so their rows run on the GPU machine.
All of these were recorded on an H200 (torch 2.11, triton 3.6, Nsight Compute 2025.3.1).
"""

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from tritonforge.model import Bound, CompileStats
from tritonforge.profile.diagnose import diagnose
from tritonforge.profile.metrics import parse_raw_csv
from tritonforge.profile.ncu import find_ncu, ncu_report_available, read_ncu_report
from tritonforge.profile.roofline import Peaks, place

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "ncu"


@dataclass(frozen=True)
class Expected:
    file: str
    bound: Bound
    bottleneck: str
    top_hint: str
    kernel: str
    launches: int = 1
    stats: str | None = None            # key in <gpu>_stats.json
    near_roofline: bool = False
    also_hints: tuple[str, ...] = ()
    why: str = ""


SOFTMAX_FULL_WHY = (
    "8192 rows of ~1000 fp32, 128 threads per row: 32.8 MB read, 32.8 MB stored (22.6 MB of it still "
    "in the 60 MB L2 when the kernel ends, so dram__bytes_write shows 10.2 MB) in 16.45 us: 3.99 TB/s "
    "against a 4.8 TB/s peak and the 4.15 TB/s a copy reaches. DRAM % alone (54%) understates it.")

EXPECTED = (
    Expected("h200_sin_basic_raw.csv", Bound.LATENCY, "too little work per program", "larger_blocks",
             "sin_kernel", launches=2,
             why="BLOCK_SIZE=4 with 128 threads: 16.8M programs, 7944 waves of 1.3 us; DRAM at 1.1%, "
                 "SM at 32% of peak. The same run timed BLOCK_SIZE=1024 at 0.256 ms vs 10.08 ms."),
    Expected("h200_softmax_full_raw.csv", Bound.MEMORY, "near the roofline", "near_roofline",
             "softmax_kernel", near_roofline=True, why=SOFTMAX_FULL_WHY),
    Expected("h200_softmax_full.ncu-rep", Bound.MEMORY, "near the roofline", "near_roofline",
             "softmax_kernel", near_roofline=True, why=SOFTMAX_FULL_WHY),
    Expected("h200_copy_raw.csv", Bound.MEMORY, "near the roofline", "near_roofline",
             "add_one_kernel", stats="copy", near_roofline=True,
             why="y = x + 1 over 2^28 fp32, 16-byte accesses: 2.15 GB in 525 us, 85% of peak "
                 "(97% of the measured copy bandwidth)."),
    Expected("h200_matmul_bf16_raw.csv", Bound.COMPUTE, "near the roofline", "near_roofline",
             "matmul_kernel", stats="matmul_bf16", near_roofline=True,
             why="8192^3 bf16 with wgmma, 128x256x64 tiles: tensor pipe 79% busy; timed at 636 "
                 "TFLOP/s, 83% of the 765 TFLOP/s torch's matmul reached on the same GPU."),
    Expected("h200_matmul_ieee_raw.csv", Bound.COMPUTE, "tensor cores idle in a dot kernel",
             "mma_friendly_tiles", "matmul_kernel", stats="matmul_ieee",
             why="fp32 dot with input_precision='ieee' runs on the FMA pipe (68%, tensor pipe 0%): "
                 "45 TFLOP/s, near the FMA roof, but the tensor-core roof is ~8x higher."),
    Expected("h200_rowsum_few_raw.csv", Bound.LATENCY, "too little memory parallelism",
             "more_parallelism", "rowsum_kernel", stats="rowsum_few", also_hints=("more_programs",),
             why="64 one-warp programs stream 2^20 columns each: 64 of 132 SMs busy, 2% achieved "
                 "occupancy, 86% of stalls on memory, DRAM at 11%."),
    Expected("h200_softmax_1warp_raw.csv", Bound.MEMORY, "register spills", "avoid_spills",
             "softmax_kernel", stats="softmax_1warp",
             why="a 16384-wide row held by one warp: 512 values per thread, 15 KB of spills per "
                 "thread; 63M local-memory sectors make DRAM traffic 4.7x the 537 MB needed."),
    Expected("h200_tiny_raw.csv", Bound.LAUNCH, "launch overhead", "more_work_per_launch",
             "add_one_kernel", stats="tiny",
             why="4096 elements: 2.3 us under ncu, 4.2 us per call timed; nothing inside matters."),
)


def _stats(key: str | None) -> list[CompileStats]:
    if key is None:
        return []
    data = json.loads((FIXTURES / "h200_stats.json").read_text())[key]
    known = {f.name for f in dataclasses.fields(CompileStats)}
    values = {k: v for k, v in data.items() if k in known}
    values["constexprs"] = tuple(tuple(c) for c in values["constexprs"])
    values["warnings"] = tuple(values["warnings"])
    return [CompileStats(**values)]


def _kernels(e: Expected):
    path = FIXTURES / e.file
    if path.suffix == ".csv":
        return parse_raw_csv(path.read_text())
    return read_ncu_report(str(path))


def _params():
    for e in EXPECTED:
        marks = [pytest.mark.gpu] if e.file.endswith(".ncu-rep") else []
        yield pytest.param(e, id=e.file, marks=marks)


@pytest.mark.parametrize("e", list(_params()))
def test_recorded_report_diagnosis(e: Expected):
    if e.file.endswith(".ncu-rep") and not ncu_report_available() and find_ncu() is None:
        pytest.skip("no ncu_report module or ncu here")
    kernels = _kernels(e)
    assert len(kernels) == e.launches and {k.kernel for k in kernels} == {e.kernel}
    d = diagnose(kernels, _stats(e.stats), None, None, None)
    assert (d.bound, d.bottleneck) == (e.bound, e.bottleneck), d.evidence
    kinds = [h.kind for h in d.hints]
    assert kinds and kinds[0] == e.top_hint, d.hints
    assert set(e.also_hints) <= set(kinds)
    assert d.near_roofline == e.near_roofline


def test_static_stats_recorded_match_what_the_driver_loaded():
    data = json.loads((FIXTURES / "h200_stats.json").read_text())
    for name, entry in data.items():
        assert entry["registers"] == entry["driver_n_regs"], name      # ptxas -v == cuFuncGetAttribute
        assert (entry["spills"] > 0) == (entry["driver_n_spills"] > 0), name


def test_recorded_runs_on_the_roofline():
    """The record run's timings against the peaks measured in the same session."""
    peaks = Peaks(**next(iter(json.loads((FIXTURES / "h200_peaks.json").read_text()).values())))
    timed = json.loads((FIXTURES / "h200_stats.json").read_text())
    copy = place(8 * 2**28, 2**28, timed["copy"]["time_us"], peaks)
    assert copy.bound is Bound.MEMORY and copy.fraction_of_peak > 0.9
    mm = place(3 * 8192**2 * 2, 2 * 8192**3, timed["matmul_bf16"]["time_us"], peaks, compute="bf16")
    assert mm.bound is Bound.COMPUTE and 0.7 < mm.fraction_of_peak < 1.0
    spill = place(8 * 4096 * 16384, 4 * 4096 * 16384, timed["softmax_1warp"]["time_us"], peaks)
    assert spill.bound is Bound.LATENCY and spill.fraction_of_peak < 0.3
    tiny = place(8 * 4096, 4096, timed["tiny"]["time_us"], peaks)
    assert tiny.bound is Bound.LAUNCH


def test_every_recorded_csv_has_an_expected_diagnosis():
    listed = {e.file for e in EXPECTED}
    recorded = {p.name for p in FIXTURES.glob("*.csv")} | {p.name for p in FIXTURES.glob("*.ncu-rep")}
    assert recorded == listed, "add an Expected row for each fixture (or remove the file)"
