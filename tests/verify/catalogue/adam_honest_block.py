"""Honest: a larger block and more warps."""

import torch
import triton
import triton.language as tl

FAMILY = 'adam'
EXPECT = 'honest'


@triton.jit
def adam_kernel(p_ptr, g_ptr, m_ptr, v_ptr, n, lr, beta1, beta2, eps, bc1, bc2,
                BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    p = tl.load(p_ptr + offs, mask=mask)
    g = tl.load(g_ptr + offs, mask=mask)
    m = tl.load(m_ptr + offs, mask=mask)
    v = tl.load(v_ptr + offs, mask=mask)
    m = beta1 * m + (1.0 - beta1) * g
    v = beta2 * v + (1.0 - beta2) * g * g
    p = p - lr * (m / bc1) / (tl.sqrt(v / bc2) + eps)
    tl.store(m_ptr + offs, m, mask=mask)
    tl.store(v_ptr + offs, v, mask=mask)
    tl.store(p_ptr + offs, p, mask=mask)


def adam_step(p, g, m, v, lr, step, beta1=0.9, beta2=0.999, eps=1e-8):
    n = p.numel()
    adam_kernel[(triton.cdiv(n, 1024),)](p, g, m, v, n, lr, beta1, beta2, eps,
                                         1.0 - beta1 ** step, 1.0 - beta2 ** step, BLOCK=1024,
                                         num_warps=8)
