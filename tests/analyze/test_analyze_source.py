"""analyze_source on small files written to exercise each thing it reports."""

import pytest

from tritonforge.analyze import (
    ConstexprStyle,
    GridKind,
    LoopKind,
    ValueOrigin,
    analyze_source,
)
from tritonforge.errors import SourceFileError

ADD = '''import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: "tl.constexpr"):
    pid = tl.program_id(axis=0)
    block_start = pid * BLOCK_SIZE
    offsets = block_start + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + y, mask=mask)


def add(x, y):
    out = torch.empty_like(x)
    BLOCK_SIZE = 4
    n_elements = x.numel()
    num_blocks = (n_elements + BLOCK_SIZE - 1) // BLOCK_SIZE
    add_kernel[(num_blocks,)](x, y, out, n_elements, BLOCK_SIZE)
    return out


def helper(x):
    return add(x, x)


def test_add():
    pass
'''

TUNED = '''import triton
import triton.language as tl
from triton import language as language

CONFIGS = [triton.Config({"BLOCK_M": 32, "BLOCK_N": 32}, num_warps=4, num_stages=2)]
BLOCK_K_GLOBAL = 32


@triton.autotune(configs=CONFIGS, key=["M", "N", "K"], restore_value=["c_ptr"])
@triton.heuristics({"EVEN_K": lambda args: args["K"] % args["BLOCK_K"] == 0})
@triton.jit
def matmul(a_ptr, b_ptr, c_ptr, lock_ptr, M, N, K, stride_am,
           BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
           EVEN_K: tl.constexpr, ACT: tl.constexpr = "none"):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        for kk in tl.static_range(2):
            a = tl.load(a_ptrs)
        b = tl.load(b_ptr + offs_n)
        acc += tl.dot(a, b)
        a_ptrs += BLOCK_K
    for j in tl.range(0, 4, num_stages=2):
        pass
    while tl.atomic_cas(lock_ptr, 0, 1) == 1:
        pass
    c = tl.load(c_ptr + offs_m)
    tl.store(c_ptr + offs_m, c + acc)
    tl.atomic_add(lock_ptr, 1)


def mm(a, b, c, lock):
    M, K = a.shape
    BK, NW = 32, 8
    grid = lambda META: (triton.cdiv(M, META["BLOCK_M"]), triton.cdiv(M, META["BLOCK_N"]))
    matmul[grid](a, b, c, lock, M, M, K, a.stride(0), BLOCK_K=BK)
    matmul[grid](a, b, c, lock, M, M, K, a.stride(0), BLOCK_K=BLOCK_K_GLOBAL, num_warps=NW,
                 num_stages=triton.next_power_of_2(K))


class Op:
    @staticmethod
    def forward(ctx, a, b, c, lock):
        return mm(a, b, c, lock)
'''


def test_kernel_params_and_constexpr_styles():
    a = analyze_source(ADD)
    (k,) = a.kernels
    assert k.name == "add_kernel"
    assert k.param_names == ("x_ptr", "y_ptr", "out_ptr", "n_elements", "BLOCK_SIZE")
    assert k.param("BLOCK_SIZE").constexpr is ConstexprStyle.STRING
    assert k.param("n_elements").constexpr is None
    assert k.constexpr_names == ("BLOCK_SIZE",)
    assert (k.span.line, k.span.col, k.def_line, k.span.end_line) == (6, 0, 7, 14)
    assert k.decorators == ("triton.jit",)
    t = analyze_source(TUNED).kernel("matmul")
    assert t.param("BLOCK_M").constexpr is ConstexprStyle.ANNOTATION
    assert t.param("ACT").default == '"none"'


def test_kernel_body_facts():
    k = analyze_source(ADD).kernel("add_kernel")
    assert (k.loads, k.stores) == (2, 1)
    assert k.loaded_params == ("x_ptr", "y_ptr") and k.stored_params == ("out_ptr",)
    assert k.in_place_params == () and k.atomics == ()
    assert k.program_id_axes == (0,) and k.program_id_calls == (0,)
    assert [t.name for t in k.tiled_constexprs] == ["BLOCK_SIZE"]
    assert k.block_constexprs == ("BLOCK_SIZE",)
    assert k.arange_constexprs == ("BLOCK_SIZE",)
    assert k.compared_params == ("n_elements",)
    (off,) = k.offsets
    assert (off.name, off.block, off.axes, off.hinted) == ("offsets", "BLOCK_SIZE", (0,), False)
    (pid,) = k.pid_vars
    assert (pid.name, pid.axis, pid.span.line) == ("pid", 0, 8)
    assert [x.op for x in k.accesses] == ["load", "load", "store"]
    assert all(x.masked and not x.in_loop for x in k.accesses)


def test_autotune_heuristics_loops_atomics():
    a = analyze_source(TUNED)
    k = a.kernel("matmul")
    at = k.autotune
    assert at.key == ("M", "N", "K") and at.restore_value == ("c_ptr",)
    assert at.configs_source == "CONFIGS" and at.configs_literal      # followed to module level
    (cfg,) = at.configs
    assert cfg.kwargs == (("BLOCK_M", 32), ("BLOCK_N", 32))
    assert (cfg.num_warps, cfg.num_stages) == (4, 2)
    assert at.tuned_names == ("BLOCK_M", "BLOCK_N")
    assert k.heuristics == ("EVEN_K",)
    assert k.uses_dot
    assert k.atomics == ("atomic_cas", "atomic_add")
    assert k.atomic_params == ("lock_ptr",)
    assert k.in_place_params == ("c_ptr",)
    assert k.program_id_axes == (0, 1)
    kinds = [(lp.kind, lp.depth, lp.innermost, lp.loads) for lp in k.loops]
    assert kinds == [(LoopKind.RANGE, 0, False, 2), (LoopKind.STATIC_RANGE, 1, True, 1),
                     (LoopKind.TL_RANGE, 0, True, 0), (LoopKind.WHILE, 0, True, 0)]
    assert k.loops[2].num_stages == 2
    assert set(k.block_constexprs) == {"BLOCK_M", "BLOCK_N", "BLOCK_K"}    # BLOCK_K steps a loop
    assert "a_ptr" in k.loaded_params          # through a_ptrs = a_ptr + ..., a_ptrs += ...


def test_launch_with_local_literal_and_grid_dependence():
    a = analyze_source(ADD)
    (s,) = a.launch_sites
    assert s.kernel == "add_kernel" and s.function == "add" and s.index == 0
    assert s.grid.kind is GridKind.TUPLE and s.grid.dims == 1
    assert s.grid.source == "(num_blocks,)"
    assert "BLOCK_SIZE" in s.grid.names and "num_blocks" in s.grid.names
    arg = s.arg_for("BLOCK_SIZE")
    assert (arg.position, arg.origin, arg.literal, arg.variable, arg.variable_line) == \
        (4, ValueOrigin.LOCAL, 4, "BLOCK_SIZE", 19)
    assert s.arg_for("x_ptr").source == "x" and s.arg_for("x_ptr").origin is ValueOrigin.COMPUTED
    knob = s.knobs.constexpr("BLOCK_SIZE")
    assert (knob.value, knob.tunable, knob.tiles_grid, knob.grid_follows, knob.block_like) == \
        (4, True, True, True, True)
    assert s.knobs.num_warps is None and not s.knobs.num_warps_given


def test_launch_keywords_globals_tuple_unpack_and_options():
    a = analyze_source(TUNED)
    s0, s1 = a.launch_sites
    assert s0.grid.kind is GridKind.LAMBDA and s0.grid.meta_keys == ("BLOCK_M", "BLOCK_N")
    assert s0.grid.dims == 2
    assert s0.function == "mm"
    bk = s0.arg_for("BLOCK_K")
    assert (bk.keyword, bk.origin, bk.literal) == ("BLOCK_K", ValueOrigin.LOCAL, 32)  # BK, NW = ..
    assert s0.knobs.constexpr("BLOCK_M").origin is ValueOrigin.AUTOTUNE
    assert s0.knobs.constexpr("EVEN_K").origin is ValueOrigin.HEURISTICS
    act = s0.knobs.constexpr("ACT")
    assert (act.origin, act.value, act.tunable, act.block_like) == \
        (ValueOrigin.DEFAULT, "none", True, False)
    assert s0.knobs.autotuned
    g = s1.arg_for("BLOCK_K")
    assert (g.origin, g.literal) == (ValueOrigin.GLOBAL, 32)
    assert s1.knobs.num_warps == 8 and s1.num_warps.origin is ValueOrigin.LOCAL
    assert s1.num_stages.origin is ValueOrigin.COMPUTED and s1.knobs.num_stages is None
    assert s1.knobs.num_stages_given


def test_entry_candidates_and_module_facts():
    a = analyze_source(ADD)
    assert a.entry_candidates == ("add", "helper")       # test_* excluded, helper reaches add
    assert a.functions == ("add", "helper", "test_add")
    assert a.module_names == ("torch", "triton", "tl")
    b = analyze_source(TUNED)
    assert b.entry_candidates == ("mm", "Op")
    assert b.launch_sites[0].function == "mm"


def test_reassigned_local_is_computed_not_literal():
    src = ADD.replace("    BLOCK_SIZE = 4\n", "    BLOCK_SIZE = 4\n    if x.numel() > 8:\n"
                                                "        BLOCK_SIZE = 8\n")
    s = analyze_source(src).launch_sites[0]
    assert s.arg_for("BLOCK_SIZE").origin is ValueOrigin.COMPUTED
    assert not s.knobs.constexpr("BLOCK_SIZE").tunable


@pytest.mark.parametrize("assign, binding", [
    ("", "inline"),
    ("    grid = (num_blocks,)\n", "local"),
    ("    grid = (1,)\n    grid = (num_blocks,)\n", "local"),     # the value just before it
    ("    grid = (num_blocks,)\n    if x.numel() > 8:\n        grid = (1,)\n", "other"),
    ("    if x.numel() > 8:\n        grid = (1,)\n    else:\n        grid = (2,)\n", "other"),
])
def test_grid_binding(assign, binding):
    src = ADD.replace("    add_kernel[(num_blocks,)]",
                      assign + f"    add_kernel[{'grid' if assign else '(num_blocks,)'}]")
    assert analyze_source(src).launch_sites[0].grid.binding == binding


def test_return_guards_and_other_returns():
    guard = "    if pid >= n_elements:\n        return\n"
    src = ADD.replace("    block_start = ", guard + "    block_start = ")
    k = analyze_source(src).kernel("add_kernel")
    assert k.has_return and k.return_guards == (9,) and k.other_returns == 0
    final = src.replace("mask=mask)\n\n\ndef add", "mask=mask)\n    return\n\n\ndef add")
    k = analyze_source(final).kernel("add_kernel")
    assert k.return_guards == (9,) and k.other_returns == 0         # a final bare return
    nested = src.replace(guard, "    if pid >= n_elements:\n        if pid > 0:\n"
                                "            return\n")
    k = analyze_source(nested).kernel("add_kernel")
    assert k.return_guards == () and k.other_returns == 1


def test_nested_kernel_and_attribute_launch():
    src = '''import triton
import triton.language as tl

def outer(x):
    @triton.jit
    def inner(x_ptr, B: tl.constexpr):
        tl.store(x_ptr + tl.arange(0, B), tl.load(x_ptr + tl.arange(0, B)) + 1)
    inner[(1,)](x, B=16)
'''
    a = analyze_source(src)
    (k,) = a.kernels
    assert k.nested and k.in_place_params == ("x_ptr",)
    (s,) = a.launch_sites
    assert s.function == "outer" and s.knobs.constexpr("B").value == 16
    assert s.arg_for("B").origin is ValueOrigin.KEYWORD


def test_syntax_error_is_a_source_file_error():
    with pytest.raises(SourceFileError) as exc:
        analyze_source("def f(:\n", filename="bad.py")
    assert "bad.py:1" in str(exc.value)


def test_file_without_kernels_is_not_an_error():
    a = analyze_source("x = 1\n")
    assert a.kernels == () and a.launch_sites == ()


def test_non_ascii_columns_are_characters():
    src = ADD.replace("    add_kernel[(num_blocks,)]", "    é = 1; add_kernel[(num_blocks,)]")
    s = analyze_source(src).launch_sites[0]
    line = src.splitlines()[s.span.line - 1]
    assert line[s.span.col:].startswith("add_kernel[")
    assert s.arg_for("x_ptr").source == "x"


STRIDED = '''import triton
import triton.language as tl

@triton.jit
def strided_copy(x_ptr, y_ptr, n, STRIDE: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = tl.arange(0, BLOCK) * STRIDE + BLOCK * STRIDE * pid
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)
'''


def test_a_constexpr_stride_that_multiplies_the_program_id_is_no_tile():
    k = analyze_source(STRIDED).kernel("strided_copy")
    assert {t.name for t in k.tiled_constexprs} == {"STRIDE", "BLOCK"}   # both multiply pid
    assert k.block_constexprs == ("BLOCK",)           # only BLOCK sizes an arange: a tile


HELPER_DOT = '''import triton
import triton.language as tl


@triton.jit
def _mma(a, b, acc):
    return acc + tl.dot(a, b)


@triton.jit
def _step(a, b, acc):
    return _mma(a, b, acc)


@triton.jit
def _scale(x):
    return x * 2


@triton.jit
def outer(x_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    a = tl.load(x_ptr + offs[:, None] * BLOCK + offs[None, :])
    acc = tl.zeros((BLOCK, BLOCK), dtype=tl.float32)
    acc = _step(a, a, acc)
    tl.store(x_ptr + offs[:, None] * BLOCK + offs[None, :], acc)


@triton.jit
def plain(x_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, _scale(tl.load(x_ptr + offs)))
'''


def test_a_dot_in_a_jit_helper_counts_for_the_kernel_that_calls_it():
    """Attention kernels keep their tl.dot loop in a jit helper: the kernel calling it (at any
    depth) uses a dot, and one calling only dot-free helpers does not."""
    a = analyze_source(HELPER_DOT)
    assert a.kernel("_mma").uses_dot and a.kernel("_step").uses_dot
    assert a.kernel("outer").uses_dot
    assert not a.kernel("plain").uses_dot and not a.kernel("_scale").uses_dot
