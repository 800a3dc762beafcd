"""Tracing a file's own test in a separate process: calls, writes, launches, drivers, timeouts."""

import textwrap
from pathlib import Path

import pytest

from tritonforge.testgen.model import TracedTensor, TracedValue
from tritonforge.testgen.trace import failure_kind, trace_source

HERE = Path(__file__).parent
EXAMPLE = HERE.parents[1] / "src" / "tritonforge" / "examples" / "sin_block4.py"


@pytest.fixture(scope="module")
def axpy_trace(tmp_path_factory):
    return trace_source(HERE / "sample_axpy.py", work_dir=tmp_path_factory.mktemp("tr"), timeout_s=120)


def test_test_functions_are_traced_with_shapes_scalars_and_writes(axpy_trace):
    trace = axpy_trace
    assert trace.ok and trace.driver == "tests" and trace.device == "cpu"
    axpy = [c for c in trace.calls if c.function == "axpy"]
    assert [c.args[0].shape for c in axpy] == [(100,), (33,)]
    x, y, alpha, out = axpy[0].args
    assert isinstance(alpha, TracedValue) and (alpha.kind, alpha.value) == ("float", 2.0)
    assert isinstance(out, TracedTensor) and out.written and not x.written and not y.written
    assert out.stats.min == out.stats.max == 0.0            # values before the call
    assert x.stats.std == pytest.approx(1.0, abs=0.3) and x.dtype == "float32"
    assert axpy[0].returns.shape == (100,)
    (launch,) = axpy[0].launches
    assert launch.kernel == "axpy_kernel" and dict(launch.constexprs) == {"BLOCK": 64}
    assert dict(launch.args)["n_elements"].value == 100 and launch.grid == (2,)
    logs = [c for c in trace.calls if c.function == "log_rows"]
    assert [c.args[0].shape for c in logs] == [(4, 24), (3, 40)]
    assert logs[0].args[0].stats.min >= 0.5
    assert [p.name for p in trace.signature("axpy")] == ["x", "y", "alpha", "out"]


def test_main_block_and_a_separate_test_file(tmp_path):
    main = trace_source(HERE / "sample_gather.py", work_dir=tmp_path, timeout_s=120)
    assert main.ok and main.driver == "main"
    (c,) = main.calls
    assert c.args[1].dtype == "int64" and c.args[1].stats.max <= 49
    driver = tmp_path / "drive.py"
    driver.write_text(textwrap.dedent("""
        import torch
        from sin_block4 import sin_triton         # the traced module, wrapped
        for n in (10, 10, 7):
            sin_triton(torch.randn(n, device="cuda"))
    """))
    section = trace_source(EXAMPLE, section_path=driver, work_dir=tmp_path, timeout_s=120)
    assert section.ok and [c.args[0].shape for c in section.calls] == [(10,), (7,)]
    assert section.calls[0].repeats == 2                     # identical calls folded


def test_parametrized_tests_are_expanded(tmp_path):
    src = (HERE / "sample_axpy.py").read_text().split("def test_axpy")[0] + textwrap.dedent("""
        import pytest

        @pytest.mark.parametrize("n", [5, 64])
        @pytest.mark.parametrize("dtype", [torch.float32, pytest.param(torch.float16)])
        def test_log(n, dtype):
            log_rows(torch.rand(2, n, device="cuda", dtype=dtype) + 0.1)
    """)
    path = tmp_path / "param_kernels.py"
    path.write_text(src)
    trace = trace_source(path, work_dir=tmp_path, timeout_s=120)
    shapes = sorted((c.args[0].shape, c.args[0].dtype) for c in trace.calls)
    assert shapes == [((2, 5), "float16"), ((2, 5), "float32"), ((2, 64), "float16"), ((2, 64), "float32")]


def test_a_hanging_test_keeps_what_it_recorded(tmp_path):
    src = (HERE / "sample_axpy.py").read_text().split("def test_axpy")[0] + textwrap.dedent("""
        def test_hangs():
            log_rows(torch.rand(2, 8, device="cuda") + 0.1)
            while True:
                pass
    """)
    path = tmp_path / "hang_kernels.py"
    path.write_text(src)
    trace = trace_source(path, work_dir=tmp_path, timeout_s=4)
    assert not trace.ok and trace.timed_out and failure_kind(trace) == "timeout"
    assert [c.args[0].shape for c in trace.calls] == [(2, 8)]


def test_a_crashing_test_is_a_failure_with_its_partial_trace(tmp_path):
    src = (HERE / "sample_axpy.py").read_text().split("def test_axpy")[0] + textwrap.dedent("""
        import os

        def test_crashes():
            log_rows(torch.rand(2, 8, device="cuda") + 0.1)
            os.abort()
    """)
    path = tmp_path / "crash_kernels.py"
    path.write_text(src)
    trace = trace_source(path, work_dir=tmp_path, timeout_s=60)
    assert not trace.ok and trace.died and "SIGABRT" in trace.error
    assert failure_kind(trace) == "interpreter_limitation"      # on the CPU: counted apart
    assert len(trace.calls) == 1
