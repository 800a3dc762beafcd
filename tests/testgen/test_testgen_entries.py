"""Entry selection: a wrapper whose arguments a spec cannot express (a module object) gives way to
the watched calls under it that launch kernels (an autograd Function, an inner wrapper)."""

from tritonforge.testgen.generate import descend_inexpressible, expressible, select_entries
from tritonforge.testgen.model import (
    KernelLaunch, Parameter, TensorStats, Trace, TracedCall, TracedTensor, TracedValue,
)


def t(*shape):
    n = 1
    for d in shape:
        n *= d
    return TracedTensor(shape=shape, dtype="float32",
                        stats=TensorStats(numel=n, finite=n, min=-2.0, max=2.0, mean=0.0, std=1.0))


def c(fn, index, parent, args, launches=1):
    launch = (KernelLaunch("k"),) if launches else ()
    return TracedCall(function=fn, index=index, parent=parent, args=tuple(args), kwargs=(),
                      launches=launch, n_launches=launches)


def p(*names):
    return tuple(Parameter(n, "positional_or_keyword") for n in names)


MODULE = TracedValue("other", None, "SimpleNorm")
SIGS = (("norm", p("layer", "x")), ("NormFn", p("x", "w", "eps")), ("helper", p("n")))


def trace(calls):
    return Trace(ok=True, driver="section", device="cpu", calls=tuple(calls), signatures=SIGS)


def test_a_wrapper_taking_a_module_gives_way_to_the_function_it_calls():
    calls = [c("norm", 0, None, [MODULE, t(4, 8)]), c("helper", 1, 0, [TracedValue("int", 8)], launches=0),
             c("NormFn", 2, 0, [t(4, 8), t(8), TracedValue("float", 1e-5)]),
             c("norm", 3, None, [MODULE, t(2, 8)]), c("NormFn", 4, 3, [t(2, 8), t(8), TracedValue("float", 1e-5)])]
    tr = trace(calls)
    entries, top, _ = select_entries(tr, ())
    assert entries == ("norm",)
    assert not expressible(top[0], tr.signature("norm"))
    assert expressible(calls[2], tr.signature("NormFn"))
    entries, used, notes = descend_inexpressible(tr, entries, top)
    assert entries == ("NormFn",) and [u.index for u in used] == [2, 4]   # not the launch-free helper
    assert notes and "NormFn" in notes[0]


def test_expressible_entries_and_dead_ends_are_kept():
    ok = [c("NormFn", 0, None, [t(4, 8), t(8), TracedValue("float", 1e-5)])]
    assert descend_inexpressible(trace(ok), ("NormFn",), ok)[:2] == (("NormFn",), ok)
    alone = [c("norm", 0, None, [MODULE, t(4, 8)])]                        # nothing under it
    entries, used, notes = descend_inexpressible(trace(alone), ("norm",), alone)
    assert entries == ("norm",) and used == alone and not notes
