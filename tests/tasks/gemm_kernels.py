"""A small fp16 GEMM in the TritonBench-G record layout (kernel module, separator, test section)
and wrong rewrites of it that its one test call (128x64x128: K a multiple of every block size)
cannot tell from the original: a GEMM record tested at 256x128x256, at half the size so that the
interpreter runs it in seconds.

Written for these tests (not taken from TritonBench). ``module(variant)`` is the kernel module;
``TEST_SECTION`` is the record's test: one call.
"""

SEPARATOR = "#" * 146

_KERNEL = '''
import torch
import triton
import triton.language as tl


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=ACC)
    for k in range(0, LOOP):
        kk = k * BLOCK_K + rk
        a = tl.load(a_ptr + rm[:, None] * sam + kk[None, :] * sak,
                    mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
        b = tl.load(b_ptr + kk[:, None] * sbk + rn[None, :] * sbn,
                    mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += DOT
    tl.store(c_ptr + rm[:, None] * scm + rn[None, :] * scn, acc.to(tl.float16),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


def matmul(a, b):
    M, K = a.shape
    _, N = b.shape
    LIBRARY
    c = torch.empty((M, N), device=a.device, dtype=torch.float16)
    grid = (triton.cdiv(M, 64), triton.cdiv(N, 64))
    matmul_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                        c.stride(0), c.stride(1), BLOCK_M=64, BLOCK_N=64, BLOCK_K=32)
    return c
'''

TEST_SECTION = '''
import torch


def test_matmul():
    torch.manual_seed(0)
    a = torch.randn(128, 64, device="cuda", dtype=torch.float16)
    b = torch.randn(64, 128, device="cuda", dtype=torch.float16)
    return {"c": matmul(a, b)}


result_gold = test_matmul()
'''

_HONEST = dict(ACC="tl.float32", LOOP="tl.cdiv(K, BLOCK_K)", DOT="tl.dot(a, b)", LIBRARY="pass")

VARIANTS = {
    "original": {},
    # honest rewrites: the same sums, reordered (the loop written as a while over offsets)
    "honest_loop": dict(LOOP="(K + BLOCK_K - 1) // BLOCK_K"),
    # wrong: the last partial K tile is dropped (exact whenever K is a multiple of BLOCK_K)
    "k_tail_drop": dict(LOOP="K // BLOCK_K"),
    # wrong: partial sums kept in fp16 (close on short reductions, off on long ones)
    "fp16_accumulator": dict(ACC="tl.float16", DOT="tl.dot(a, b, out_dtype=tl.float16)"),
    # wrong: not a Triton kernel above a size (the library call is right, but not the work)
    "library_above_512": dict(LIBRARY="if M >= 512:\n        return torch.matmul(a, b)"),
}


def module(variant: str = "original") -> str:
    text = _KERNEL
    for key, value in {**_HONEST, **VARIANTS[variant]}.items():
        text = text.replace(key, value)
    return text


def record_source() -> str:
    return module() + "\n" + SEPARATOR + "\n" + TEST_SECTION
