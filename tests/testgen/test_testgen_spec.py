"""The spec format's testgen additions: literal values, None, comments per case; a round trip."""

import pytest

from tritonforge.errors import SpecError
from tritonforge.model import Case, CaseRole, SpecCall, TensorSpec
from tritonforge.tasks.spec import parse_spec, write_spec


def test_round_trip_with_values_none_and_comments():
    offsets = TensorSpec((3,), dtype="int32", init="values", values=(0, 5, 9))
    cases = (
        Case("trace-1", CaseRole.CORRECTNESS,
             SpecCall("f", (TensorSpec((4, 5), low=0.5, high=1.5, init="rand"), offsets, None, 2.5e-05),
                      (("flag", True), ("mode", "fast")))),
        Case("perf-1", CaseRole.PERFORMANCE, SpecCall("g", (TensorSpec((1 << 20,), dtype="float16"),))),
    )
    text = write_spec("f", cases, seeds=2, comments=("made by a test", ""),
                      case_comments=(("perf-1", ("64 MB per call; scaled x.0",)),))
    assert "# made by a test" in text and "# 64 MB per call; scaled x.0\n[[case]]" in text
    doc = parse_spec(text)
    assert [c.id for c in doc.cases] == ["trace-1", "perf-1"]
    first = doc.cases[0].recipe
    assert first.args == cases[0].recipe.args
    assert first.args[2] is None and first.args[1].values == (0, 5, 9)
    assert dict(first.kwargs) == {"flag": True, "mode": "fast"}
    assert doc.cases[1].recipe.entry == "g" and doc.cases[1].seeds == (0,)
    assert doc.cases[0].seeds == (0, 1)


def test_values_must_match_the_shape():
    bad = 'entry = "f"\n[[case]]\nargs = [{ tensor = [3], init = "values", values = [1, 2] }]\n'
    with pytest.raises(SpecError, match="3 elements"):
        parse_spec(bad)
    missing = 'entry = "f"\n[[case]]\nargs = [{ tensor = [2], init = "values" }]\n'
    with pytest.raises(SpecError, match="values"):
        parse_spec(missing)
