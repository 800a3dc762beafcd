"""Static stats: PTX/ptxas parsing on snippets, limits and occupancy, and real sm_90/sm_80 compiles."""

import time
from pathlib import Path

import pytest
import torch

from tritonforge.model import CompileStats
from tritonforge.profile.limits import check_limits, estimate_occupancy, limits_for
from tritonforge.profile.compile_child import CompileChild
from tritonforge.profile.ptx import mma_kind, parse_ptxas_log, widest_global_access
from tritonforge.profile.static import (
    CompileRequest,
    KernelSignature,
    TensorArg,
    compile_many,
    compile_stats,
    load_kernel,
    signature_from_args,
    triton_dtype,
)
from tritonforge.errors import SourceFileError

KERNELS = str(Path(__file__).with_name("static_kernels.py"))


# ---- text parsing --------------------------------------------------------------------------

def test_widest_global_access_reads_vector_loads_stores_and_cp_async():
    assert widest_global_access("\tld.global.b32 { %r1 }, [ %rd1 + 0 ];") == 4
    assert widest_global_access("@%p1 ld.global.v4.b32 { %r1, %r2, %r3, %r4 }, [ %rd1 + 0 ];") == 16
    assert widest_global_access("ld.global.L1::evict_last.v2.b32 {%r1,%r2}, [%rd3];") == 8
    assert widest_global_access("st.global.v2.b64 [%rd1], {%rd2, %rd3};") == 16
    assert widest_global_access("ld.global.b16 %rs1, [%rd1];\nst.global.v2.b16 [%rd2], {%rs1,%rs2};") == 4
    assert widest_global_access("cp.async.cg.shared.global [ %r5 + 0 ], [ %rd9 + 0 ], 16, %r6;") == 16
    assert widest_global_access("ld.shared.v4.b32 {%r1,%r2,%r3,%r4}, [%r9];") is None


def test_mma_kind_tells_wgmma_from_mma_sync():
    assert mma_kind("wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {...}") == "wgmma"
    assert mma_kind("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {...}") == "mma"
    assert mma_kind("fma.rn.f32 %f1, %f2, %f3, %f4;") is None


def test_parse_ptxas_log():
    log = ("ptxas info    : Compiling entry function 'k' for 'sm_90a'\n"
           "ptxas info    : Function properties for k\n"
           "    1632 bytes stack frame, 1804 bytes spill stores, 1796 bytes spill loads\n"
           "ptxas info    : Used 255 registers, used 1 barriers, 416 bytes cmem[0]\n")
    r = parse_ptxas_log(log)
    assert (r.registers, r.stack_bytes, r.spill_stores, r.spill_loads) == (255, 1632, 1804, 1796)


# ---- limits and occupancy ---------------------------------------------------------------------

def _stats(**kw) -> CompileStats:
    base = dict(kernel="k", target="cuda:90", num_warps=4, num_stages=3)
    base.update(kw)
    return CompileStats(**base)


def test_check_limits_flags_shared_memory_and_registers_per_block():
    sm90 = limits_for(90)
    assert sm90.shared_per_block == 227 * 1024
    assert check_limits(_stats(registers=128, shared_bytes=100_000), sm90) == []
    over_smem = check_limits(_stats(shared_bytes=240_000, num_stages=5), sm90)
    assert len(over_smem) == 1 and "240000 B of shared memory" in over_smem[0] and "num_stages" in over_smem[0]
    # 255 registers x 512 threads = 131072 > 65536 registers per block
    over_regs = check_limits(_stats(registers=255, num_warps=16), sm90)
    assert any("registers per block" in p for p in over_regs)
    # sm_86 has less shared memory than sm_90: the same config fits one and not the other
    assert check_limits(_stats(shared_bytes=150_000), limits_for(90)) == []
    assert check_limits(_stats(shared_bytes=150_000), limits_for(86))


def test_estimate_occupancy_matches_ncu_for_the_sin_fixture():
    # ncu (h200_sin_basic_raw.csv): 16 registers, 128 threads -> warps limit 16 blocks, 100%
    occ = estimate_occupancy(_stats(registers=16, num_warps=4), limits_for(90))
    assert (occ.blocks_per_sm, occ.pct, occ.limiter) == (16, 100.0, "warps")
    heavy = estimate_occupancy(_stats(registers=168, num_warps=8), limits_for(90))
    assert heavy.limiter == "registers" and heavy.blocks_per_sm == 1 and heavy.pct == 12.5
    smem = estimate_occupancy(_stats(registers=32, num_warps=4, shared_bytes=100_000), limits_for(90))
    assert smem.limiter == "shared" and smem.blocks_per_sm == 2


# ---- signatures ---------------------------------------------------------------------------

def test_signature_from_args_specializes_like_the_jit():
    fn = load_kernel(KERNELS, "add_kernel")
    x = torch.empty(1024)
    sig = signature_from_args(fn, (x, x, torch.empty(1024, dtype=torch.bfloat16), 1024), {"BLOCK": 256})
    assert dict(sig.types) == {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*bf16", "n": "i32",
                               "BLOCK": "constexpr"}
    assert dict(sig.constexprs) == {"BLOCK": 256}
    assert set(sig.divisible_by_16) == {"x_ptr", "y_ptr", "out_ptr", "n"}
    odd = signature_from_args(fn, (TensorArg("float16"), TensorArg("fp16"), TensorArg("torch.float16"), 1000),
                              {"BLOCK": 256})
    assert dict(odd.types)["x_ptr"] == "*fp16" and "n" not in odd.divisible_by_16
    one = signature_from_args(fn, (x, x, x, 1), {"BLOCK": 256})      # the JIT makes 1 a constexpr
    assert dict(one.types)["n"] == "constexpr" and dict(one.constexprs)["n"] == 1
    big = signature_from_args(fn, (x, x, x, 2**33), {"BLOCK": 256})
    assert dict(big.types)["n"] == "i64"
    assert triton_dtype("torch.bfloat16") == "bf16"


def test_load_kernel_names_the_kernels_when_the_name_is_wrong():
    with pytest.raises(SourceFileError, match="add_kernel"):
        load_kernel(KERNELS, "no_such_kernel")


# ---- real compiles for sm_90 / sm_80 (no GPU needed) -------------------------------------------

ADD_TYPES = (("x_ptr", "*fp32"), ("y_ptr", "*fp32"), ("out_ptr", "*fp32"), ("n", "i32"), ("BLOCK", "constexpr"))
DOT_TYPES = (("a_ptr", "*fp16"), ("b_ptr", "*fp16"), ("c_ptr", "*fp32"), ("stride_am", "i32"),
             ("stride_bk", "i32"), ("stride_cm", "i32"), ("BM", "constexpr"), ("BN", "constexpr"),
             ("BK", "constexpr"), ("PRECISION", "constexpr"))
DOT32_TYPES = tuple((n, "*fp32" if t == "*fp16" else t) for n, t in DOT_TYPES)
DOT_CONST = (("BM", 64), ("BN", 64), ("BK", 32))
ALL_DIV = ("a_ptr", "b_ptr", "c_ptr", "stride_am", "stride_bk", "stride_cm")


@pytest.fixture(scope="module")
def compiled() -> dict[str, CompileStats]:
    reqs = {
        "add16": CompileRequest(KERNELS, "add_kernel", KernelSignature(
            ADD_TYPES, (("BLOCK", 1024),), ("x_ptr", "y_ptr", "out_ptr", "n")), 4, 3),
        "add_odd": CompileRequest(KERNELS, "add_kernel", KernelSignature(
            ADD_TYPES, (("BLOCK", 1024),), ("x_ptr", "y_ptr", "out_ptr")), 4, 3),
        "dot90": CompileRequest(KERNELS, "dot_kernel", KernelSignature(
            DOT_TYPES, DOT_CONST + (("PRECISION", "tf32"),), ALL_DIV), 4, 2),
        "dot80": CompileRequest(KERNELS, "dot_kernel", KernelSignature(
            DOT_TYPES, DOT_CONST + (("PRECISION", "tf32"),), ALL_DIV), 4, 2, ("cuda", 80, 32)),
        "dot_ieee": CompileRequest(KERNELS, "dot_kernel", KernelSignature(
            DOT32_TYPES, DOT_CONST + (("PRECISION", "ieee"),), ALL_DIV), 4, 2),
        "broken": CompileRequest(KERNELS, "broken_kernel", KernelSignature(
            (("x_ptr", "*i32"), ("BLOCK", "constexpr")), (("BLOCK", 3),), ("x_ptr",)), 4, 3),
    }
    return dict(zip(reqs, compile_many(list(reqs.values()))))


def test_vector_width_follows_divisibility(compiled):
    assert compiled["add16"].vector_width_bytes == 16       # n % 16 == 0: ld.global.v4.b32
    assert compiled["add_odd"].vector_width_bytes == 4      # masked tail: scalar accesses
    s = compiled["add16"]
    assert s.error is None and s.registers and 8 <= s.registers <= 64 and s.spills == 0
    assert s.shared_bytes == 0 and not s.has_dot and not s.uses_tensor_cores and s.warnings == ()
    assert s.target == "cuda:90" and dict(s.constexprs) == {"BLOCK": 1024}


def test_tensor_core_path_per_target(compiled):
    assert compiled["dot90"].mma_kind == "wgmma" and compiled["dot90"].uses_tensor_cores
    assert compiled["dot80"].mma_kind == "mma" and compiled["dot80"].target == "cuda:80"
    assert compiled["dot90"].has_dot and compiled["dot90"].shared_bytes > 0
    ieee = compiled["dot_ieee"]
    assert ieee.has_dot and not ieee.uses_tensor_cores and ieee.mma_kind is None


def test_compile_failure_is_data(compiled):
    broken = compiled["broken"]
    assert broken.error is not None and "power of 2" in broken.error
    assert broken.registers is None


def test_compile_stats_takes_a_plain_signature_mapping():
    s = compile_stats(KERNELS, "row_sum_kernel", {"x_ptr": "*fp32", "out_ptr": "*fp32",
                      "n_cols": "i32", "stride": "i32"}, {"BLOCK": 256}, num_warps=2, num_stages=1,
                      isolate=True)                  # also exercises the child-process path
    assert s.error is None, s.error
    assert s.num_warps == 2 and s.registers is not None and s.kernel == "row_sum_kernel"


def test_children_started_ahead_compile_and_are_closed():
    """Children started before the requests are known (``CompileChild``, warmed) compile them,
    in order, and are stopped afterwards."""
    div = ("x_ptr", "y_ptr", "out_ptr", "n")
    reqs = [CompileRequest(KERNELS, "add_kernel", KernelSignature(ADD_TYPES, (("BLOCK", b),), div), 4, 2)
            for b in (256, 512, 1024)]
    children = [CompileChild(), CompileChild()]
    out = compile_many(reqs, workers=2, children=children)
    assert [dict(s.constexprs)["BLOCK"] for s in out] == [256, 512, 1024]
    assert all(s.error is None and s.registers for s in out)
    assert all(c._proc.poll() is not None for c in children)
    with pytest.raises(RuntimeError, match="one list"):
        children[0].compile(reqs[:1])


def test_a_compile_given_a_child_is_bounded_even_for_one_request(tmp_path):
    """One request with a child started ahead compiles in that child, where the timeout holds:
    a kernel file whose import hangs gives error stats after the bound, not a hung profile
    (in this process no bound could hold)."""
    slow = tmp_path / "slow_kernels.py"
    slow.write_text(Path(KERNELS).read_text() + "\nimport time\ntime.sleep(120)\n")
    div = ("x_ptr", "y_ptr", "out_ptr", "n")
    req = CompileRequest(str(slow), "add_kernel", KernelSignature(ADD_TYPES, (("BLOCK", 256),), div), 4, 2)
    child = CompileChild()
    started = time.monotonic()
    [stats] = compile_many([req], isolate=False, timeout_s=4.0, children=[child])
    assert time.monotonic() - started < 30
    assert stats.error and "timed out after 4 s" in stats.error
    assert child._proc.poll() is not None
    assert compile_many([], children=[CompileChild(warm=False)]) == []


def test_compile_many_in_parallel_children_keeps_the_order():
    div = ("x_ptr", "y_ptr", "out_ptr", "n")
    reqs = [CompileRequest(KERNELS, "add_kernel", KernelSignature(ADD_TYPES, (("BLOCK", b),), div), w, 2)
            for b, w in ((256, 1), (512, 2), (2048, 8))]
    out = compile_many(reqs, workers=2)
    assert [dict(s.constexprs)["BLOCK"] for s in out] == [256, 512, 2048]
    assert [s.num_warps for s in out] == [1, 2, 8] and all(s.error is None for s in out)
