"""Shared sizes of traced calls, odd shapes, index validity and performance scaling (no kernels run)."""

import pytest

from tritonforge.model import TensorSpec
from tritonforge.testgen.cases import (
    Unrepresentable, index_ties, materialize, odd_values, perf_ladder, shrink_hazard,
)
from tritonforge.testgen.dims import build_templates, symbol_values
from tritonforge.testgen.model import (
    KernelLaunch, Parameter, TensorStats, TracedCall, TracedTensor, TracedValue,
)


def t(*shape, dtype="float32", **stats):
    numel = 1
    for d in shape:
        numel *= d
    base = dict(numel=numel, finite=numel, min=-2.0, max=2.0, mean=0.0, std=1.0)
    base.update(stats)
    return TracedTensor(shape=tuple(shape), dtype=dtype, stats=TensorStats(**base))


def i(v):
    return TracedValue("int", v)


def call(fn, args, returns=None, constexprs=(), index=0, runtime=()):
    launch = KernelLaunch("k", args=tuple((n, i(v)) for n, v in runtime), constexprs=tuple(constexprs))
    return TracedCall(function=fn, index=index, parent=None, args=tuple(args), kwargs=(),
                      returns=returns, launches=(launch,), n_launches=1)


def params(*names):
    return tuple(Parameter(n, "positional_or_keyword") for n in names)


def one(calls, names):
    (template,) = build_templates(tuple(calls), {calls[0].function: names})
    return template


def kinds(template):
    return {s.name: s.kind for s in template.symbols}


def test_scalar_equal_to_numel_follows_the_shape():
    c = call("f", [t(8, 24), i(192)], returns=t(8, 24), constexprs=[("BLOCK", 64)])
    tpl = one([c], ("x", "n"))
    assert kinds(tpl) == {"x.0": "free", "x.1": "free"}       # n is derived: x.0 * x.1
    built = materialize(tpl, c, {"x.0": 5, "x.1": 7}, params("x", "n"))
    x, n = built.call.args
    assert x.shape == (5, 7) and n == 35


def test_equal_sizes_merge_and_more_calls_split_them():
    a = call("g", [t(16, 16)], constexprs=[("B", 32)], index=0)
    tpl = one([a], ("x",))
    assert [s.places for s in tpl.symbols] == [("x.0", "x.1")]     # one call: 16 == 16, one size
    b = call("g", [t(16, 40)], constexprs=[("B", 32)], index=1)
    tpl2 = one([a, b], ("x",))
    assert sorted(s.name for s in tpl2.symbols) == ["x.0", "x.1"]   # a second call tells them apart


def test_round_number_coincidence_is_not_a_product():
    # (2, 32) and (2, 1, 16, 32): 32 == 2 * 16 by chance; no int argument, no reshape: not derived
    c = call("lora", [t(2, 32), t(2, 1, 16, 32)], constexprs=[("BLOCK_N", 16)])
    tpl = one([c], ("x", "w"))
    names = {s.name for s in tpl.symbols}
    assert "x.1" in names and kinds(tpl)["w.2"] == "tied"
    built = materialize(tpl, c, {"x.0": 3}, params("x", "w"))
    assert built.call.args[0].shape == (3, 32)


def test_reshape_product_is_derived():
    c = call("flat", [t(2, 6, 32), t(12, 32)])                    # out = x.reshape(-1, 32)
    tpl = one([c], ("x", "out"))
    built = materialize(tpl, c, {"x.0": 3, "x.1": 5}, params("x", "out"))
    assert built.call.args[1].shape == (15, 32)


def test_constexpr_ties_and_following_blocks():
    head = call("attn", [t(2, 4, 96, 64)], constexprs=[("HEAD_DIM", 64)], runtime=[("N_CTX", 96)])
    tpl = one([head], ("q",))
    k = kinds(tpl)
    assert k["q.3"] == "tied" and k["q.2"] == "free" and k["q.0"] == "free"
    assert "N_CTX" in tpl.symbol("q.2").why
    rows = [call("softmax", [t(4, n)], constexprs=[("BLOCK", p)], index=j)
            for j, (n, p) in enumerate([(24, 32), (40, 64)])]
    assert kinds(one(rows, ("x",)))["x.1"] == "block_following"


def test_autotuned_constexprs_are_no_evidence():
    launches = (KernelLaunch("k", constexprs=(("BLOCK_M", 64),)),
                KernelLaunch("k", constexprs=(("BLOCK_M", 128),)))
    c = TracedCall("mm", 0, None, (t(128, 128),), (), launches=launches, n_launches=2)
    assert kinds(one([c], ("a",)))["a.0"] == "free"


def test_lone_integer_is_kept():
    c = call("topk", [t(8, 100), i(5)])
    tpl = one([c], ("x", "k"))
    assert kinds(tpl)["k"] == "lone"
    assert materialize(tpl, c, {"x.0": 3}, params("x", "k")).call.args[1] == 5


def test_index_range_follows_the_indexed_size():
    idx = t(40, dtype="int64", min=0, max=49, integral=True, unique=30)
    c = call("gather", [t(50, 16), idx], constexprs=[("D", 16)])
    tpl = one([c], ("table", "idx"))
    assert index_ties(tpl) == {("a", 1): "table.0"}
    built = materialize(tpl, c, {"table.0": 77}, params("table", "idx"))
    spec = built.call.args[1]
    assert (spec.init, spec.low, spec.high) == ("randint", 0, 77)
    # the relaxed tie: random indices rarely hit the last row
    loose = t(40, dtype="int64", min=3, max=41, integral=True, unique=30)
    tpl2 = one([call("gather", [t(50, 16), loose], constexprs=[("D", 16)])], ("table", "idx"))
    assert index_ties(tpl2) == {("a", 1): "table.0"}


def test_untied_indices_block_shrinking_the_size_they_may_index():
    idx = t(40, dtype="int64", min=0, max=20, integral=True, unique=18)     # 21 < 0.6 * 50
    c = call("gather", [t(50, 16), idx], constexprs=[("D", 16)])
    tpl = one([c], ("table", "idx"))
    assert index_ties(tpl) == {}
    assert shrink_hazard(tpl, c, "table.0", 1) is not None
    assert shrink_hazard(tpl, c, "table.0", 76) is None


def test_odd_values():
    assert odd_values(128) == [("np2", 193), ("tail", 127), ("one", 1)]
    assert odd_values(2) == [("np2", 5), ("one", 1)]          # 4 is a power of two: 5
    assert all(v & (v - 1) for tag, v in odd_values(1024) if tag == "np2")


def test_ladder_reaches_the_target_and_prefers_free_sizes():
    c = call("softmax", [t(4, 100)], returns=t(4, 100), constexprs=[("BLOCK", 128)])
    rows = call("softmax", [t(3, 60)], returns=t(3, 60), constexprs=[("BLOCK", 64)], index=1)
    tpl = one([c, rows], ("x",))
    assert kinds(tpl) == {"x.0": "free", "x.1": "block_following"}
    ladder = perf_ladder(tpl, c, target_bytes=1 << 20, extra_steps=1)
    assert ladder[-2].bytes >= 0.9 * (1 << 20) or ladder[-1].bytes >= 0.9 * (1 << 20)
    assert all(step == "x.0" for r in ladder[1:] for step in [r.step])   # rows scale, columns kept
    assert dict(ladder[-1].values)["x.1"] == 100
    fixed = perf_ladder(tpl, c, target_bytes=1 << 20, fixed={"x.0": 4})
    assert {r.step for r in fixed[1:]} == {"x.1"}                         # only columns left
    assert all(dict(r.values)["x.1"] <= 16384 for r in fixed)


def test_ladder_stops_when_nothing_scales():
    c = call("f", [t(16, 16)], constexprs=[("B", 16)])
    tpl = one([c], ("x",))
    assert kinds(tpl) == {"x.0": "tied"}
    assert len(perf_ladder(tpl, c, target_bytes=1 << 26)) == 1


def test_symbol_values_per_call():
    a, b = call("f", [t(8)], index=0), call("f", [t(24)], index=1)
    tpl = one([a, b], ("x",))
    assert symbol_values(tpl, a) == {"x.0": 8} and symbol_values(tpl, b) == {"x.0": 24}
    assert isinstance(materialize(tpl, b, {}, params("x")).call.args[0], TensorSpec)


def test_block_size_arguments_are_configuration_not_sizes():
    c = call("f", [t(1024), i(1024)], constexprs=[("BLOCK_SIZE", 1024)])
    tpl = one([c], ("x", "BLOCK_SIZE"))
    assert [s.places for s in tpl.symbols] == [("x.0",)]          # the argument is not a size
    built = materialize(tpl, c, {"x.0": 4096}, params("x", "BLOCK_SIZE"))
    assert built.call.args[0].shape == (4096,) and built.call.args[1] == 1024


def test_an_unwritable_default_is_left_out_and_later_arguments_go_by_name():
    half = TracedValue("dtype", "float16")
    ps = (Parameter("x", "positional_or_keyword"),
          Parameter("dtype", "positional_or_keyword", half, True),
          Parameter("k", "positional_or_keyword", TracedValue("int", 1), True))
    c = TracedCall("f", 0, None, (t(8), half, i(3)), (), n_launches=1)
    built = materialize(one([c], ("x", "dtype", "k")), c, {}, ps)
    assert len(built.call.args) == 1 and dict(built.call.kwargs) == {"k": 3}
    other = TracedCall("f", 0, None, (t(8), TracedValue("dtype", "bfloat16"), i(3)), (), n_launches=1)
    with pytest.raises(Unrepresentable, match="dtype"):
        materialize(one([other], ("x", "dtype", "k")), other, {}, ps)


def test_offsets_follow_the_total_and_bytes_count_every_tensor():
    offs = t(3, dtype="int32", min=0, max=12, integral=True, unique=3, sorted=True, values=(0, 5, 12))
    c = call("seg", [t(12, 64), offs])
    tpl = one([c], ("x", "offsets"))
    built = materialize(tpl, c, {"x.0": 100}, params("x", "offsets"))
    x, o = built.call.args
    assert x.shape == (100, 64) and built.bytes == 100 * 64 * 4 + 3 * 4
    assert o.init in ("values", "arange")
    if o.init == "values":
        assert o.values == (0, 50, 100)


def test_ladder_skips_sizes_a_spec_cannot_express(monkeypatch):
    # offsets whose length follows the rows (2) and whose total (10) follows another size: without
    # literal data they are drawn as arange, which cannot end at 10 with more than 11 entries
    import tritonforge.testgen.values as values

    monkeypatch.setattr(values, "values_supported", lambda: False)
    offs = t(2, dtype="int32", min=0, max=10, integral=True, unique=2, sorted=True, values=(0, 10))
    tokens = t(10, dtype="int32", min=0, max=49, integral=True, unique=10)
    c = call("penalty", [t(2, 50), offs, tokens])
    names = ("logits", "offsets", "tokens")
    tpl = one([c], names)
    long = {**symbol_values(tpl, c), "logits.0": 16}
    assert values.learn(offs, (16,)).offsets_total == 10           # learning does not raise
    with pytest.raises(Unrepresentable, match="cannot end at 10"):
        materialize(tpl, c, long, params(*names))

    def valid(v):
        try:
            materialize(tpl, c, v, params(*names))
        except Unrepresentable:
            return False
        return True

    assert not all(valid(dict(r.values)) for r in perf_ladder(tpl, c, target_bytes=1 << 22))
    ladder = perf_ladder(tpl, c, target_bytes=1 << 22, valid=valid)
    assert all(valid(dict(r.values)) for r in ladder)
    assert ladder[-1].bytes >= 0.9 * (1 << 22)                      # another size grew instead
    assert dict(ladder[-1].values)["logits.0"] <= 11


def test_a_call_that_takes_only_integers_is_sized_by_its_launches():
    # load_reduce(M, N) builds its tensors itself: its own arguments hold no bytes, so the
    # largest traced call (the performance case when nothing scales) is told by its launches
    from types import SimpleNamespace

    from tritonforge.testgen.generate import TestgenOptions
    from tritonforge.testgen.model import Trace
    from tritonforge.testgen.perf import choose_perf_cases

    def reduce_call(n, index):
        launch = KernelLaunch("k", args=(("x", t(n, n)), ("y", t(n))))
        return TracedCall(function="load_reduce", index=index, parent=None, args=(i(n), i(n)),
                          kwargs=(), launches=(launch,), n_launches=1)

    calls = (reduce_call(16, 0), reduce_call(128, 1), reduce_call(32, 2))
    templates = build_templates(calls, {"load_reduce": ("m", "n")})
    trace = Trace(ok=True, driver="section", device="cpu", calls=calls,
                  signatures=(("load_reduce", params("m", "n")),))
    choice = choose_perf_cases(templates, ("load_reduce",), SimpleNamespace(trace=trace), None,
                               None, TestgenOptions(), True)
    assert [c.case.recipe.args for c in choice.cases] == [(128, 128)]


def test_a_size_only_the_return_value_has_is_not_scaled_and_follows_the_inputs():
    """fp4_to_bf16 unpacks N bytes into 2N bf16 values: "return.0" is no input's size, so no case
    can set it. Scaling it grew the estimated bytes while the call stayed the same (256 MB "in
    4 us", H100): it is kind ``output``, and the ladder scales the input instead, counting the
    output as growing with it."""
    from tritonforge.testgen.cases import call_bytes

    c = call("unpack", [t(1024, dtype="uint8")], returns=t(2048, dtype="bfloat16"),
             runtime=[("n_elements_in", 1024)])
    tpl = one([c], ("x",))
    assert kinds(tpl) == {"x.0": "free", "return.0": "output"}
    assert call_bytes(tpl, c, {"x.0": 1024}) == 1024 + 4096
    assert call_bytes(tpl, c, {"x.0": 4096}) == 4096 + 4 * 4096      # the output follows 4x
    ladder = perf_ladder(tpl, c, target_bytes=1 << 20, extra_steps=0)
    assert {r.step for r in ladder[1:]} == {"x.0"}
    assert ladder[-1].bytes >= 0.9 * (1 << 20)
