"""docs/API.md's example runs as written (CPU interpreter), and its report.html holds a drawn
search-history plot when a browser loads it."""

import contextlib
import io
import json
import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "API.md"


def test_the_api_example_runs(tmp_path, monkeypatch):
    code = re.search(r"```python\n(.*?)```", DOC.read_text(), re.S).group(1)
    out = io.StringIO()
    namespace: dict = {}
    with contextlib.redirect_stdout(out):
        exec(compile(code, str(DOC), "exec"), namespace)
    text = out.getvalue()
    assert "sin_block4: 3 correctness and 2 performance cases" in text
    assert "[baseline r0]" in text and "final check: accepted" in text
    assert "changed: True" in text
    result, paths = namespace["result"], namespace["paths"]
    assert result.rounds >= 1 and result.history
    assert "BLOCK_SIZE = 4\n" not in paths["best"].read_text()

    from report.browser import coloured_pixels, have_browser, load   # tests/report
    from report.samples import PLOT_SCRIPT

    if not have_browser():
        return          # the browser half runs where Chromium is (.ci/run installs it)
    loaded = load(paths["html"], tmp_path / "api.png", PLOT_SCRIPT)
    assert loaded.console == ()
    plots = {p["plot"]: p for p in json.loads(loaded.value)["plots"]}
    assert plots["history"]["marks"] >= 2
    assert coloured_pixels((tmp_path / "api.png").read_bytes(), plots["history"]) > 50
