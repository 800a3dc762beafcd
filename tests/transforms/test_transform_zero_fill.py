"""drop_zero_fill: torch.zeros -> torch.empty only where a kernel writes the buffer first."""

from pathlib import Path

import pytest

from tritonforge.analyze import analyze_source
from tritonforge.errors import TransformError
from tritonforge.transforms import get

CATALOGUE = Path(__file__).parents[1] / "verify" / "catalogue"

KERNEL = '''
import torch
import triton
import triton.language as tl


@triton.jit
def write_k(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)


@triton.jit
def accumulate_k(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    old = tl.load(out_ptr + offs, mask=offs < n)
    tl.store(out_ptr + offs, old + tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)
'''


def _apply(body: str) -> str:
    source = KERNEL + body
    return get("drop_zero_fill").apply(source, analyze_source(source))


def _refusal(body: str) -> str:
    source = KERNEL + body
    verdict = get("drop_zero_fill").applies(analyze_source(source))
    assert not verdict.ok
    return verdict.reason


def test_a_buffer_the_kernel_only_writes_is_allocated_empty():
    out = _apply('''
def double(x):
    out = torch.zeros_like(x)  # 出力 (a comment with non-ASCII text before the change)
    n = out.numel()
    write_k[(triton.cdiv(n, 128),)](x, out, n, BLOCK=128)
    return out
''')
    assert "out = torch.empty_like(x)  # 出力" in out and "zeros" not in out.split("def double")[1]


def test_the_catalogue_original_becomes_its_honest_variant():
    ref = (CATALOGUE / "rowloss_ref.py").read_text()
    out = get("drop_zero_fill").apply(ref, analyze_source(ref))
    honest = (CATALOGUE / "rowloss_empty_buffer.py").read_text()
    body = lambda s: s[s.index("def row_loss"):]      # noqa: E731
    assert body(out) == body(honest)


def test_a_launch_inside_a_with_block_still_counts():
    out = _apply('''
def double(x):
    out = torch.zeros(x.shape, device=x.device, dtype=x.dtype)
    with torch.cuda.device(x.device.index):
        write_k[(4,)](x, out, x.numel(), BLOCK=128)
    return out
''')
    assert "out = torch.empty(x.shape, device=x.device, dtype=x.dtype)" in out


def test_an_accumulator_keeps_its_zeros():
    assert "reads out_ptr" in _refusal('''
def add_into(x):
    out = torch.zeros_like(x)
    accumulate_k[(4,)](x, out, x.numel(), BLOCK=128)
    return out
''')
    rowsum = (CATALOGUE / "rowsum_ref.py").read_text()       # tl.atomic_add into the zeros
    assert "reads out_ptr" in get("drop_zero_fill").applies(analyze_source(rowsum)).reason


@pytest.mark.parametrize("body, why", [
    ('''
def f(x, flag):
    out = torch.zeros_like(x)
    if flag:
        write_k[(4,)](x, out, x.numel(), BLOCK=128)
    return out
''', "may not run"),
    ('''
def f(x):
    out = torch.zeros_like(x)
    out += x
    write_k[(4,)](x, out, x.numel(), BLOCK=128)
    return out
''', "zeros buffer passed"),        # assigned twice (+=): not a plain zero fill
    ('''
def f(x):
    out = torch.zeros_like(x)
    y = out + 1
    write_k[(4,)](x, out, x.numel(), BLOCK=128)
    return out, y
''', "is used before the launch"),
    ('''
def f(x):
    out = torch.zeros_like(x)
    if x.numel() == 0:
        return out
    write_k[(4,)](x, out, x.numel(), BLOCK=128)
    return out
''', "may return before the launch"),
    ('''
def f(x):
    out = buf = torch.zeros_like(x)
    y = buf + 1
    write_k[(4,)](x, out, x.numel(), BLOCK=128)
    return out, y
''', "zeros buffer passed"),        # a second name for the same buffer
])
def test_a_zero_fill_that_may_be_seen_is_kept(body, why):
    assert why in _refusal(body)


def test_a_splat_that_reads_only_the_buffers_metadata_keeps_the_change():
    """A buffer passed before a ``*args`` splat keeps its parameter; the splat reading only
    ``out.stride()`` hides no other use of it."""
    out = _apply('''
def double(x):
    out = torch.zeros_like(x)
    write_k[(4,)](x, out, *out.stride()[:1], BLOCK=128)
    return out
''')
    assert "out = torch.empty_like(x)" in out


@pytest.mark.parametrize("call, why", [
    ("write_k[(4,)](x, out, *[out.numel() if out.sum() == 0 else 0], BLOCK=128)",
     "passes `out` in a *args splat"),
    ("write_k[(4,)](x, out, **{'n': x.numel(), 'BLOCK': 128})", "passes **kwargs"),
    ("write_k[(4,)](*[x, out], x.numel(), BLOCK=128)", "zeros buffer passed"),   # param unknown
    # a splat that reads only metadata leaves the other checks to judge: an accumulator keeps it
    ("accumulate_k[(4,)](x, out, *out.shape, BLOCK=128)", "reads out_ptr"),
])
def test_a_splat_that_may_use_the_buffer_keeps_its_zeros(call, why):
    assert why in _refusal(f'''
def double(x):
    out = torch.zeros_like(x)
    {call}
    return out
''')


def test_nothing_to_do_without_a_zero_fill():
    assert "no torch.zeros buffer" in _refusal('''
def double(x):
    out = torch.empty_like(x)
    write_k[(4,)](x, out, x.numel(), BLOCK=128)
    return out
''')
    with pytest.raises(TransformError):
        _apply('''
def double(x):
    out = torch.empty_like(x)
    write_k[(4,)](x, out, x.numel(), BLOCK=128)
    return out
''')
