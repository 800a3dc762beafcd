"""hoist_namedtuple: a wrapper's namedtuple class built once at import, the results unchanged."""

import types

import pytest

from tritonforge.analyze import analyze_source
from tritonforge.transforms import get

SOURCE = '''
import math
from collections import namedtuple

import torch


@torch.no_grad()
def max_dim(inp, dim=0):
    n = math.prod(inp.shape)  # 最大 (non-ASCII text before the change)
    Max_out = namedtuple(
        "max", ["values", "indices"])
    values, indices = inp.max(dim=dim)
    return Max_out(values=values, indices=indices)


def min_dim(inp, dim=0):
    Min_out = namedtuple("min", ("values", "indices"), defaults=(None, None))
    values, indices = inp.min(dim=dim)
    return Min_out(values, indices)
'''


def _module(source: str) -> types.ModuleType:
    mod = types.ModuleType("hoisted")
    exec(compile(source, "<hoisted>", "exec"), mod.__dict__)
    return mod


def test_the_classes_are_built_once_and_the_results_are_the_same():
    out = get("hoist_namedtuple").apply(SOURCE, analyze_source(SOURCE))
    assert "_tf_max_dim_Max_out = namedtuple(\n        \"max\", [\"values\", \"indices\"])" in out
    assert "    Max_out = _tf_max_dim_Max_out\n" in out and "    Min_out = _tf_min_dim_Min_out\n" in out
    before, after = _module(SOURCE), _module(out)
    x = __import__("torch").tensor([[1.0, 5.0], [3.0, 2.0]])
    for name in ("max_dim", "min_dim"):
        a, b = getattr(before, name)(x), getattr(after, name)(x)
        assert all((p == q).all() for p, q in zip(a, b))
        assert a._fields == b._fields and type(a).__name__ == type(b).__name__
    assert type(after.max_dim(x)) is type(after.max_dim(x))      # one class, not one per call
    assert type(before.max_dim(x)) is not type(before.max_dim(x))


@pytest.mark.parametrize("source", [
    # a field list computed at run time
    "from collections import namedtuple\n\ndef f(names):\n    T = namedtuple('t', names)\n    return T(*names)\n",
    # namedtuple not bound at module level
    "def f():\n    from collections import namedtuple\n    T = namedtuple('t', ['a'])\n    return T(1)\n",
    # the name is assigned twice
    "from collections import namedtuple\n\ndef f(x):\n    T = namedtuple('t', ['a'])\n    if x:\n        T = tuple\n    return T([1])\n",
    # inside a nested block: built only on some calls
    "from collections import namedtuple\n\ndef f(x):\n    if x:\n        T = namedtuple('t', ['a'])\n        return T(1)\n",
])
def test_what_may_differ_is_left_alone(source):
    assert not get("hoist_namedtuple").applies(analyze_source(source)).ok


def test_collections_namedtuple_through_the_module():
    source = "import collections\n\ndef f():\n    T = collections.namedtuple('t', ['a'])\n    return T(1)\n"
    out = get("hoist_namedtuple").apply(source, analyze_source(source))
    assert out.startswith("import collections\n\n_tf_f_T = collections.namedtuple('t', ['a'])")
    assert _module(out).f() == (1,)
