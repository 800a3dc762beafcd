"""An in-place Adam step in the TritonBench-G record layout, whose test section asserts its
tensors are on CUDA and compares only the updated parameters, and rewrites of it.

Written for these tests (not taken from TritonBench).
"""

SEPARATOR = "#" * 146

_KERNEL = '''
import torch
import triton
import triton.language as tl


@triton.jit
def adam_kernel(p_ptr, g_ptr, m_ptr, v_ptr, n, lr, b1, b2, eps, bc1, bc2, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = MASK
    p = tl.load(p_ptr + offs, mask=mask)
    g = tl.load(g_ptr + offs, mask=mask)
    m = tl.load(m_ptr + offs, mask=mask)
    v = tl.load(v_ptr + offs, mask=mask)
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g * g
    p = p - lr * (m / bc1) / (tl.sqrt(v / bc2) + eps)
    tl.store(p_ptr + offs, p, mask=mask)
    tl.store(m_ptr + offs, m, mask=mask)
    STORE_V


def adam_update(p, g, m, v, lr=1e-3, b1=0.9, b2=0.999, eps=1e-8, step=1):
    n = p.numel()
    grid = (triton.cdiv(n, BLOCK_SIZE),)
    adam_kernel[grid](p, g, m, v, n, lr, b1, b2, eps, 1 - b1 ** step, 1 - b2 ** step,
                      BLOCK=BLOCK_SIZE)
'''

TEST_SECTION = '''
import torch


def test_adam():
    torch.manual_seed(0)
    p = torch.randn(4096, device="cuda")
    g = torch.randn(4096, device="cuda")
    m = torch.randn(4096, device="cuda") * 0.1
    v = torch.rand(4096, device="cuda") * 0.01
    assert p.is_cuda and g.device.type == "cuda"
    adam_update(p, g, m, v, step=3)
    return {"p": p}


result_gold = test_adam()
'''

_HONEST = dict(MASK="offs < n", STORE_V="tl.store(v_ptr + offs, v, mask=mask)", BLOCK_SIZE="1024")

VARIANTS = {
    "original": {},
    # honest: another block size, the same arithmetic per element
    "honest_block": dict(BLOCK_SIZE="512"),
    # wrong: the second moment is never written back (the test compares only p)
    "skips_state_update": dict(STORE_V="pass"),
    # wrong: elements whose gradient is exactly zero are left alone (their moments still decay)
    "skips_zero_grads": dict(MASK="(offs < n) & (tl.load(g_ptr + offs, mask=offs < n, other=0.0) != 0)"),
}


def module(variant: str = "original") -> str:
    text = _KERNEL
    for key, value in {**_HONEST, **VARIANTS[variant]}.items():
        text = text.replace(key, value)
    return text


def record_source() -> str:
    return module() + "\n" + SEPARATOR + "\n" + TEST_SECTION
