"""rows_per_program on 2-D tiles: a KV-cache copy moves a [heads, head_dim] tile per token.

The kernels here are written for these tests in the pattern of such copies: one program per
token, offsets built from ``offs_h[:, None]`` / ``offs_d[None, :]``, a destination index loaded
per program, non-power-of-two head counts and head sizes masked to their power-of-two blocks,
and a bare ``return`` at the end. The rewrite makes the token a ``[R, 1, 1]`` column; the copy
must write the same bits, including when the token count is not a multiple of ``R``.
"""

from pathlib import Path

import pytest

import tf_samples as S
from tritonforge.analyze import analyze_source
from tritonforge.transforms import get

R = get("rows_per_program")
DATA = Path(__file__).resolve().parents[3] / "shared" / "tritonbench_g" / "kernels.json"

KV_COPY = '''import torch
import triton
import triton.language as tl


@triton.jit
def copy_kv_kernel(
    src, dest_loc, cache,
    stride_s_t, stride_s_h, stride_s_d,
    stride_c_t, stride_c_h, stride_c_d,
    n_heads, head_dim,
    BLOCK_H: tl.constexpr,
    BLOCK_D: tl.constexpr,
):
    token = tl.program_id(0)
    offs_h = tl.arange(0, BLOCK_H)
    offs_d = tl.arange(0, BLOCK_D)
    dest = tl.load(dest_loc + token)
    in_tile = (offs_h[:, None] < n_heads) & (offs_d[None, :] < head_dim)
    s_ptrs = src + token * stride_s_t + stride_s_h * offs_h[:, None] + stride_s_d * offs_d[None, :]
    c_ptrs = cache + dest * stride_c_t + stride_c_h * offs_h[:, None] + stride_c_d * offs_d[None, :]
    kv = tl.load(s_ptrs, mask=in_tile, other=0.0)
    tl.store(c_ptrs, kv, mask=in_tile)
    return


def copy_kv(src, dest_loc, cache):
    n_tokens, n_heads, head_dim = src.shape
    grid = (n_tokens,)
    copy_kv_kernel[grid](
        src, dest_loc, cache,
        src.stride(0), src.stride(1), src.stride(2),
        cache.stride(0), cache.stride(1), cache.stride(2),
        n_heads, head_dim,
        BLOCK_H=triton.next_power_of_2(n_heads),
        BLOCK_D=triton.next_power_of_2(head_dim),
        num_warps=1,
    )
    return cache
'''

# two row tiles of their own ([1, D] each, from `[None, :]` only), unmasked: the head size is
# a power of two, as in copies of a latent part and a rotary part side by side
TWO_TILES = '''import torch
import triton
import triton.language as tl


@triton.jit
def copy_two_kernel(a, b, dest_loc, out_a, out_b, stride_a, stride_b, stride_oa, stride_ob,
                    DA: tl.constexpr, DB: tl.constexpr):
    cur = tl.program_id(0)
    offs_a = tl.arange(0, DA)
    offs_b = tl.arange(0, DB)
    dest = tl.load(dest_loc + cur)
    va = tl.load(a + cur * stride_a + offs_a[None, :])
    vb = tl.load(b + cur * stride_b + offs_b[None, :])
    tl.store(out_a + dest * stride_oa + offs_a[None, :], va)
    tl.store(out_b + dest * stride_ob + offs_b[None, :], vb)
    return


def copy_two(a, b, dest_loc, out_a, out_b):
    copy_two_kernel[(a.shape[0],)](a, b, dest_loc, out_a, out_b, a.stride(0), b.stride(0),
                                   out_a.stride(0), out_b.stride(0), DA=a.shape[1], DB=b.shape[1])
    return out_a, out_b
'''


def test_the_token_becomes_a_column_of_tokens_over_the_2d_tile():
    assert R.applies(analyze_source(KV_COPY)).ok
    out = R.apply(KV_COPY, elements=256)
    assert "token = (tl.program_id(0) * ROWS_PER_PROGRAM + tl.arange(0, ROWS_PER_PROGRAM))" \
           "[:, None, None]" in out
    assert "dest = tl.load(dest_loc + token, mask=_tf_row_ok)" in out
    assert "kv = tl.load(s_ptrs, mask=(in_tile) & _tf_row_ok, other=0.0)" in out
    assert "tl.store(c_ptrs, kv, mask=(in_tile) & _tf_row_ok)\n    return\n" in out
    # R from the [BLOCK_H, BLOCK_D] tile's size, not its widest side
    rows = "max(1, 256 // ((triton.next_power_of_2(n_heads)) * (triton.next_power_of_2(head_dim))))"
    assert f"copy_kv_kernel[(triton.cdiv(grid[0], {rows}),)](" in out
    assert f"_tf_rows=grid[0],\n        ROWS_PER_PROGRAM={rows},\n    )" in out


def _kv_inputs(tokens: int, heads: int, dim: int, seed: int):
    import torch

    g = torch.Generator().manual_seed(seed)
    src = torch.randn(tokens, heads, dim, generator=g)
    slots = tokens + 7                       # a cache with rows no token writes
    dest = torch.randperm(slots, generator=g)[:tokens].to(torch.int32)   # unique slots
    cache = torch.randn(slots, heads, dim, generator=g)
    return src, dest, cache


@pytest.mark.parametrize("tokens, heads, dim, elements", [
    (13, 3, 24, 256),      # [4, 32] blocks: 2 tokens a program, the last one alone
    (13, 3, 24, 2048),     # 16 a program: one program, 3 tokens past the end
    (1, 5, 8, 1024),       # one token, 16 a program
    (40, 2, 7, 128),       # [2, 8] blocks: 8 a program, 5 programs exactly
    (9, 12, 64, 2048),     # [16, 64] blocks: 2 a program
])
def test_same_bits_as_the_original(load, tokens, heads, dim, elements):
    import torch

    new = R.apply(KV_COPY, elements=elements)
    src, dest, cache = _kv_inputs(tokens, heads, dim, tokens * 100 + heads)
    want = load(KV_COPY).copy_kv(src, dest, cache.clone())
    got = load(new).copy_kv(src, dest, cache.clone())
    assert torch.equal(got, want)
    # and the copy is the copy: rows at `dest` are the tokens', the others untouched
    expect = cache.clone()
    expect[dest.long()] = src
    assert torch.equal(want, expect)


@pytest.mark.parametrize("tokens", [1, 6, 33])
def test_two_tiles_side_by_side(load, tokens):
    import torch

    out = R.apply(TWO_TILES, elements=256)
    assert "ROWS_PER_PROGRAM=max(1, 256 // max((a.shape[1]), (b.shape[1])))" in out
    g = torch.Generator().manual_seed(tokens)
    a, b = torch.randn(tokens, 32, generator=g), torch.randn(tokens, 16, generator=g)
    dest = torch.randperm(tokens + 3, generator=g)[:tokens].to(torch.int32)
    oa, ob = torch.zeros(tokens + 3, 32), torch.zeros(tokens + 3, 16)
    want = load(TWO_TILES).copy_two(a, b, dest, oa.clone(), ob.clone())
    got = load(out).copy_two(a, b, dest, oa.clone(), ob.clone())
    assert all(torch.equal(x, y) for x, y in zip(got, want))
    assert torch.equal(want[0][dest.long()], a) and torch.equal(want[1][dest.long()], b)


@pytest.mark.parametrize("source, reason", [
    # an early exit in the middle: a return anywhere but at the very end
    (KV_COPY.replace("    dest = tl.load(dest_loc + token)\n",
                     "    dest = tl.load(dest_loc + token)\n    return\n"), "returns before its end"),
    (KV_COPY.replace("    return\n\n\ndef", "    return 0\n\n\ndef"), "returns before its end"),
    (KV_COPY.replace("    kv = tl.load(s_ptrs, mask=in_tile, other=0.0)\n",
                     "    kv = tl.load(s_ptrs, mask=in_tile, other=0.0)\n"
                     "    kv = kv / tl.sum(kv, axis=0)\n"), "reduces (line 23) beside 2-D tiles"),
    (KV_COPY.replace("offs_h[:, None] < n_heads", "offs_h[:, None, None] < n_heads"),
     "an index other than [None, :] or [:, None]"),
    (KV_COPY.replace("(offs_d[None, :] < head_dim)", "(offs_d[:, None] < head_dim)"),
     "tiles of widths BLOCK_H and BLOCK_D meet"),
    (KV_COPY.replace("    kv = tl.load(s_ptrs, mask=in_tile, other=0.0)\n",
                     "    kv = tl.load(s_ptrs, mask=in_tile, other=0.0)\n    kv = kv.T\n"),
     "`.T` of a tile"),
    (KV_COPY.replace("dest * stride_c_t", "dest[:, None] * stride_c_t"),
     "an index of a tile that depends on the row"),
])
def test_refusals_say_why(source, reason):
    v = R.applies(analyze_source(source))
    assert not v.ok and reason in v.reason, v.reason


# ---------------------------------------------------------------- sm_90, no GPU

def _compiles(tmp_path: Path, source: str, kernel: str, signature: dict, constexprs: dict) -> None:
    """Compile ``kernel`` of ``source`` for sm_90 (the interpreter runs 3-D numpy arrays whatever
    the compiler would say)."""
    S.assert_compiles_for_sm90(tmp_path / f"{kernel}_rows.py", source, kernel, signature,
                               constexprs)


def test_own_kernel_compiles_for_sm90(tmp_path):
    sig = {"src": "*fp16", "dest_loc": "*i32", "cache": "*fp16"}
    sig |= {n: "i32" for n in ("stride_s_t", "stride_s_h", "stride_s_d", "stride_c_t",
                               "stride_c_h", "stride_c_d", "n_heads", "head_dim", "_tf_rows")}
    sig |= {"BLOCK_H": "constexpr", "BLOCK_D": "constexpr", "ROWS_PER_PROGRAM": "constexpr"}
    _compiles(tmp_path, R.apply(KV_COPY, elements=2048), "copy_kv_kernel", sig,
              {"BLOCK_H": 16, "BLOCK_D": 64, "ROWS_PER_PROGRAM": 2})


@pytest.mark.skipif(not DATA.exists(), reason=f"{DATA} not present")
def test_tritonbench_destindex_copy_applies_and_compiles_for_sm90(tmp_path):
    """The TritonBench-G record this extension is for (read at run time, not copied here)."""
    import json

    from tritonforge.transforms.coverage import SEPARATOR

    records = {r["name"]: r for r in json.loads(DATA.read_text(encoding="utf-8"))}
    if "destindex_copy" not in records:
        pytest.skip("no destindex_copy record")
    source = records["destindex_copy"]["source"].split(SEPARATOR)[0]
    verdict = R.applies(analyze_source(source))
    assert verdict.ok, verdict.reason
    out = R.apply(source, elements=2048)
    assert "[:, None, None]" in out and "_tf_rows=grid[0]" in out
    kernel = verdict.targets[0]
    k = analyze_source(out).kernel(kernel)
    sig: dict[str, str] = {}
    for p in k.params:
        if p.name in k.constexpr_names:
            sig[p.name] = "constexpr"
        elif p.name == "Dest_loc":
            sig[p.name] = "*i32"
        elif p.name[:1].isupper():          # the tensors: KV_nope, O_rope, ...
            sig[p.name] = "*fp16"
        else:
            sig[p.name] = "i32"
    # the performance script's sizes: head_dim 64 for both parts, 2048 // 64 = 32 tokens a program
    consts = {n: 64 for n in k.constexpr_names if n != "ROWS_PER_PROGRAM"}
    consts["ROWS_PER_PROGRAM"] = 32
    _compiles(tmp_path, out, kernel, sig, consts)
