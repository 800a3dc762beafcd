"""Which originals get the tf32 tolerance for fp32 outputs (verify.differential.uses_dot): those
whose dots may run fp32 operands at tf32 precision. An original whose every dot asks for IEEE
precision keeps the fp32 tolerance, so a candidate that drops the keyword (tf32: about 1e-3 off
in norm) is not passed as equal."""

from __future__ import annotations

import importlib.util
import itertools

import pytest
import torch

from tritonforge.verify import uses_dot
from tritonforge.verify.compare import compare_outputs, tolerance_table

HEAD = "import triton\nimport triton.language as tl\n\n\n@triton.jit\ndef k(a, b, c):\n"
_n = itertools.count()


def _module(tmp_path, body):
    path = tmp_path / f"dots_{next(_n)}.py"
    path.write_text(HEAD + body)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("body, loose", [
    ("    x = tl.dot(a, b)\n", True),                                   # Triton's default: tf32
    ("    x = tl.dot(a, b, allow_tf32=False)\n", False),
    ("    x = tl.dot(a, b, input_precision='ieee')\n", False),
    ("    x = tl.dot(a, b, input_precision='tf32x3')\n", False),
    ("    x = tl.dot(a, b, input_precision='tf32')\n", True),
    ("    x = tl.dot(a, b, allow_tf32=ALLOW)\n", True),                 # decided elsewhere: may
    ("    x = tl.dot(a, b, allow_tf32=False)\n    y = tl.dot(x, c)\n", True),     # one of two
    ("    x = tl.dot_scaled(a, 1, 'e4m3', b, 1, 'e4m3')\n", True),
    ("    x = a + b\n", False),
])
def test_the_tf32_tolerance_goes_with_dots_that_may_run_in_tf32(tmp_path, body, loose):
    assert uses_dot(_module(tmp_path, body)) is loose


def test_a_tf32_result_passes_only_where_the_original_may_run_in_tf32():
    torch.manual_seed(0)
    a, b = torch.randn(64, 256), torch.randn(256, 64)
    exact = a @ b
    def as_tf32(x):       # 10 bits of mantissa, rounded to nearest as the tensor cores do
        return ((x.view(torch.int32) + 0x1000) & ~0x1FFF).view(torch.float32)
    tf32 = as_tf32(a) @ as_tf32(b)
    table = tolerance_table()

    def diffs(dot):
        return compare_outputs(exact, tf32, case_id="c", seed=0, tolerance_for=table,
                               uses_dot=dot)
    assert diffs(True) == [] and diffs(False)
