"""The timing worker's record of what ``@triton.autotune`` chose, per kernel and key."""

import importlib.util
import os
import sys

os.environ.setdefault("TRITON_INTERPRET", "1")

import torch  # noqa: E402

from tritonforge.runtime.autotune_picks import autotune_picks  # noqa: E402

SOURCE = '''import torch
import triton
import triton.language as tl


@triton.autotune(configs=[triton.Config({"BLOCK": 32}, num_warps=4),
                          triton.Config({"BLOCK": 64}, num_warps=2, num_stages=2)], key=["n"])
@triton.jit
def double_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, 2 * tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


def double(x):
    out = torch.empty_like(x)
    n = x.numel()
    double_kernel[lambda META: (triton.cdiv(n, META["BLOCK"]),)](x, out, n)
    return out


NOT_A_KERNEL = 3
'''


def _load(tmp_path):
    path = tmp_path / "picks_mod.py"
    path.write_text(SOURCE)
    spec = importlib.util.spec_from_file_location("picks_mod", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["picks_mod"] = module
    spec.loader.exec_module(module)
    return module


def test_picks_name_the_kernel_the_key_and_the_config(tmp_path, monkeypatch):
    from triton.runtime.autotuner import Autotuner

    timings = iter([5.0, 1.0, 1.0, 5.0])       # first key: the second config; second: the first

    def bench(kernel_call, quantiles):
        kernel_call()
        t = next(timings)
        return [t, t, t]

    monkeypatch.setattr(Autotuner, "do_bench", property(lambda self: bench))
    module = _load(tmp_path)
    try:
        assert autotune_picks(module, "original") == []          # nothing tuned yet
        module.double(torch.randn(100))
        module.double(torch.randn(40))
        module.double(torch.randn(100))                          # cached: no new line
        lines = autotune_picks(module, "c0")
    finally:
        sys.modules.pop("picks_mod", None)
    assert len(lines) == 2
    assert lines[0].startswith("autotune pick c0: double_kernel (100, 'torch.float32'")
    assert "BLOCK=64, num_warps=2, num_stages=2" in lines[0]
    assert lines[1].startswith("autotune pick c0: double_kernel (40, ")
    assert "BLOCK=32, num_warps=4" in lines[1]


def test_an_autotuner_under_heuristics_is_found_and_its_lines_parse_for_the_budget(tmp_path,
                                                                                   monkeypatch):
    """``@triton.heuristics`` above ``@triton.autotune`` leaves a Heuristics object at the module
    level: its autotuner's picks are read through it, and the budget counts its keys."""
    from triton.runtime.autotuner import Autotuner

    from tritonforge.search.budget import tuned_keys

    monkeypatch.setattr(Autotuner, "do_bench", property(lambda self: (
        lambda kernel_call, quantiles: (kernel_call(), [1.0, 1.0, 1.0])[1])))
    global SOURCE
    saved = SOURCE
    SOURCE = SOURCE.replace('@triton.autotune(', '@triton.heuristics({"EVEN": lambda a: a["n"] % 2 == 0})\n'
                                                  '@triton.autotune(') \
        .replace("n, BLOCK: tl.constexpr)", "n, EVEN: tl.constexpr, BLOCK: tl.constexpr)")
    try:
        module = _load(tmp_path)
        module.double(torch.randn(100))
        module.double(torch.randn(40))
        lines = autotune_picks(module, "original")
    finally:
        SOURCE = saved
        sys.modules.pop("picks_mod", None)
    assert len(lines) == 2 and all(x.startswith("autotune pick original: double_kernel") for x in lines)
    assert tuned_keys(lines, 64) == {"double_kernel": 2}
