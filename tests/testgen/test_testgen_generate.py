"""End to end on the CPU interpreter: trace, generate, validate on the original, write the spec."""

import textwrap
from pathlib import Path

import pytest

from tritonforge.cli import main
from tritonforge.config import Settings
from tritonforge.model import CaseRole, TensorSpec
from tritonforge.tasks.loader import task_from_file
from tritonforge.tasks.spec import parse_spec
from tritonforge.testgen.generate import TestgenOptions, generate

HERE = Path(__file__).parent
EXAMPLE = HERE.parents[1] / "src" / "tritonforge" / "examples" / "sin_block4.py"
FAST = TestgenOptions(stability=False)


def settings(tmp: Path) -> Settings:
    return Settings(device="cpu", run_dir=str(tmp), case_timeout_s=120)


@pytest.fixture(scope="module")
def gather(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("gather")
    return generate(HERE / "sample_gather.py", settings(tmp), tmp, options=FAST)


def test_cases_the_original_fails_on_are_dropped_with_the_reason(gather):
    dropped = {d.case_id: d.reason for d in gather.dropped}
    assert {"odd-idx.0-np2", "odd-idx.0-tail", "odd-idx.0-one"} <= set(dropped)
    assert all("multiple of 4" in dropped[c] for c in ("odd-idx.0-np2", "odd-idx.0-one"))
    kept = {c.case.id for c in gather.cases}
    assert not kept & set(dropped)
    assert "odd-idx.0-np2: the original failed" in gather.spec_text
    # the size the original only takes in multiples: probed at its double, then scaled by doubling
    assert "probe-idx.0-x2" in kept
    sym = {s.name: s for _, syms in gather.symbols for s in syms}
    assert sym["idx.0"].kind == "aligned" and sym["table.1"].kind == "tied"


def test_indices_stay_valid_for_every_generated_size(gather):
    assert {"odd-table.0-np2", "odd-table.0-tail", "odd-table.0-one"} <= {c.case.id for c in gather.cases}
    for c in gather.cases:
        table, idx = c.case.recipe.args
        assert idx.init == "randint" and idx.low >= 0 and idx.high == table.shape[0], c.case.id


def test_performance_sizes_scale_what_scales(gather):
    perf = gather.performance
    assert [c.case.id for c in perf] == ["perf-1", "perf-2"]
    assert perf[0].bytes >= 0.9 * 64 * 2**20 and perf[1].bytes > 2 * perf[0].bytes
    for c in perf:
        table, idx = c.case.recipe.args
        assert table.shape[1] == 16 and idx.shape[0] % 4 == 0 and idx.shape[0] > 40
        assert "scaled" in c.note and "bytes only" in c.note and "kept table.1 = 16" in c.note
    assert gather.perf_by_bytes_only


def test_two_entries_outputs_and_positive_inputs(tmp_path):
    result = generate(HERE / "sample_axpy.py", settings(tmp_path), tmp_path,
                      options=TestgenOptions(stability=False, perf=False))
    assert result.entries == ("axpy", "log_rows")
    # both kernels index x as if it were contiguous: the views are dropped, nothing else
    assert {d.case_id for d in result.dropped} == {"t1-var-strided", "t2-var-strided"}, result.dropped
    assert all("non-contiguous" in d.reason for d in result.dropped)
    ids = {c.case.id for c in result.cases}
    assert {"t1-trace-1", "t1-trace-2", "t1-odd-x.0-np2", "t2-odd-x.1-tail", "t2-odd-all"} <= ids
    for c in result.cases:
        if c.case.recipe.entry == "axpy":
            x, y, alpha, out = c.case.recipe.args
            assert out.init == "zeros" and x.shape == out.shape and isinstance(alpha, float)
        else:
            (x,) = c.case.recipe.args
            assert x.init == "rand" and x.low > 0, c.case.id          # log of positives only
    shapes = {c.case.recipe.args[0].shape for c in result.cases if c.case.recipe.entry == "log_rows"}
    assert {(4, 24), (3, 40), (4, 37), (4, 23), (4, 1), (1, 24)} <= shapes


def test_unstable_cases_are_dropped(tmp_path):
    path = tmp_path / "noisy_kernels.py"
    path.write_text(textwrap.dedent('''
        import time
        import torch
        import triton
        import triton.language as tl

        @triton.jit
        def noisy_kernel(x_ptr, out_ptr, n, seed, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            mask = offs < n
            x = tl.load(x_ptr + offs, mask=mask)
            tl.store(out_ptr + offs, x + tl.rand(seed, offs), mask=mask)

        def noisy(x):
            out = torch.empty_like(x)
            seed = time.time_ns() % 1000003          # a different answer on every call
            noisy_kernel[(triton.cdiv(x.numel(), 64),)](x, out, x.numel(), seed, BLOCK=64)
            return out

        def test_noisy():
            noisy(torch.randn(20, device="cuda"))
    '''))
    result = generate(path, settings(tmp_path), tmp_path,
                      options=TestgenOptions(perf=False, seeds=1, max_odd=1))
    assert not result.correctness
    reasons = [d.reason for d in result.dropped]
    assert reasons and all("unstable" in r for r in reasons)


def test_cli_writes_a_spec_that_run_reads_back(tmp_path):
    kernel = tmp_path / "sin_block4.py"
    kernel.write_text(EXAMPLE.read_text())
    driver = tmp_path / "example.py"
    driver.write_text("import torch\nsin_triton(torch.randn(300, device='cuda'))\n")
    out = tmp_path / "cases.toml"
    argv = ["testgen", str(kernel), "--test", str(driver), "--out", str(out), "--device", "cpu",
            "--run-dir", str(tmp_path / "runs"), "--set", "x.0=4096", "--no-stability"]
    assert main(argv) == 0
    doc = parse_spec(out.read_text())
    roles = {c.id: c.role for c in doc.cases}
    assert roles["trace-1"] is CaseRole.CORRECTNESS and roles["perf-1"] is CaseRole.PERFORMANCE
    perf = doc.cases[[c.id for c in doc.cases].index("perf-1")].recipe.args[0]
    assert isinstance(perf, TensorSpec) and perf.shape == (4096,)
    assert "Every case ran on the original." in out.read_text()
    task = task_from_file(kernel, out)
    assert task.entries == ("sin_triton",) and len(task.correctness_cases) >= 4
    assert main(argv) == 2                                   # exists: refused without --force


def test_a_tritonbench_style_file_is_traced_by_its_test_section(tmp_path):
    from tritonforge.api import generate_cases
    from tritonforge.tasks.tritonbench import SEPARATOR

    kernel = tmp_path / "tb_sin.py"
    kernel.write_text(EXAMPLE.read_text() + "\n" + SEPARATOR + "\n"
                      "def test_sin():\n    return sin_triton(torch.randn(70, device='cuda'))\n\n"
                      "result_gold = test_sin()\n")
    result = generate_cases(kernel, settings(tmp_path), out=tmp_path / "tb_sin.toml",
                            options=TestgenOptions(stability=False, perf=False, max_odd=1))
    assert result.trace.driver == "section" and result.entries == ("sin_triton",)
    assert [c.case.recipe.args[0].shape for c in result.cases][:2] == [(70,), (106,)]
    assert parse_spec((tmp_path / "tb_sin.toml").read_text()).entry == "sin_triton"


def test_offsets_and_permutations_stay_valid(tmp_path):
    from tritonforge.testgen.values import values_supported

    result = generate(HERE / "sample_segments.py", settings(tmp_path), tmp_path,
                      options=TestgenOptions(stability=False, perf=False))
    # seg_sum indexes x as if it were contiguous: only its view case is dropped
    assert all(d.case_id == "var-strided" and "non-contiguous" in d.reason for d in result.dropped)
    assert len(result.correctness) >= 2
    for c in result.cases:
        x, offsets, perm = c.case.recipe.args
        if values_supported():
            data = offsets.values
            assert data[0] == 0 and list(data) == sorted(data)
            assert len(data) == 1 or data[-1] == x.shape[0]       # segments cover the rows
            assert sorted(perm.values) == list(range(x.shape[0]))
        else:                    # the worker cannot take literal data: identity, still valid
            assert offsets.init == "arange" and offsets.shape[0] - 1 <= x.shape[0]
            assert perm.init == "arange" and perm.shape == (x.shape[0],)
