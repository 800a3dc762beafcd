"""The optimization outputs: faster file, diff, JSON that reads back, Markdown and HTML."""

import json
from html.parser import HTMLParser

from tritonforge.model import Candidate, Decision, HistoryEntry, Status
from tritonforge.model.serialize import from_jsonable
from tritonforge.report.optimize import write_outputs
from tritonforge.search.loop import OptimizeResult


def test_outputs_are_written_and_read_back(tmp_path):
    orig = Candidate("BLOCK = 4\n", "original")
    best = Candidate("BLOCK = 1024\n", "rules:constexpr_override", orig.hash, "BLOCK 4 -> 1024")
    final = Decision(best.hash, True, 9.4, 9.3, 4.5, 0.9, "9.4x faster",
                     (("perf-16M", 17.97), ("perf-1M", 1.12)))
    result = OptimizeResult("k", orig, best, final, 3, "no gain for 2 rounds", 60.0, 1,
                            (HistoryEntry(best.hash, best.origin, best.description, Status.OK, 9.4,
                                          "<accepted>"),), ("perf-16M",), ("a note",))
    paths = write_outputs(result, tmp_path, "k.py", "NVIDIA H200")
    assert paths["best"].read_text() == best.source
    assert "-BLOCK = 4" in paths["diff"].read_text() and "+BLOCK = 1024" in paths["diff"].read_text()
    assert from_jsonable(json.loads(paths["json"].read_text())) == result
    assert "9.417x" in paths["markdown"].read_text() or "9.400x" in paths["markdown"].read_text()
    page = paths["html"].read_text()
    HTMLParser().feed(page)                       # parses
    assert "<svg" in page and "17.97x" in page and "&lt;accepted&gt;" in page
