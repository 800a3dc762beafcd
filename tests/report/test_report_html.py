"""report.html and the pass summary page: self-contained pages whose plots show marks, checked in
the markup and, where Chromium is installed, in a real headless browser (console clean, no
network, every plot drawn with coloured pixels in the screenshot)."""

import json
import re
from html.parser import HTMLParser

from tritonforge.report.gather import median_ratio_bounds
from tritonforge.report.html import render_html
from tritonforge.report.optimize import write_outputs
from tritonforge.report.pass_html import normalise, render_pass_html

from .browser import coloured_pixels, load
from .samples import PLOT_SCRIPT, sample_result


def _marks(page: str) -> dict[str, int]:
    out = {}
    for m in re.finditer(r'<svg class="plot" data-plot="(\w+)".*?</svg>', page, re.S):
        out[m.group(1)] = m.group(0).count('class="mark')
    return out


def _self_contained(page: str) -> None:
    assert "<script" not in page and "<link" not in page and "@import" not in page
    urls = set(re.findall(r"https?://[^\s\"'<>]+", page))
    assert urls <= {"http://www.w3.org/2000/svg"}, urls


def test_report_plots_speedup_history_and_roofline():
    result, extras = sample_result()
    page = render_html(result, "NVIDIA H100", "k.py", extras=extras)
    HTMLParser().feed(page)
    _self_contained(page)
    marks = _marks(page)
    assert marks["speedup"] == 3 and page.count('class="whisker"') == 3
    assert marks["history"] == 4 + 1          # four candidates and the incumbent's step line
    assert marks["roofline"] == 2
    assert '<span class="add">+BLOCK = 1024</span>' in page


def test_report_without_extras_says_what_is_missing():
    result, _ = sample_result()
    page = render_html(result, "cpu", "k.py")
    assert _marks(page)["speedup"] == 3 and 'class="whisker"' not in page
    assert "No roofline" in page and "history" in _marks(page)


def test_unchanged_result_has_no_speedup_plot():
    result, _ = sample_result()
    from dataclasses import replace
    page = render_html(replace(result, best=result.original, final=None, history=()), "cpu", "k.py")
    assert _marks(page) == {} and "(no change)" in page and "No candidate was tried" in page


def test_bootstrap_bounds_bracket_the_ratio():
    original = tuple(2.0 + 0.01 * (i % 7) for i in range(60))
    best = tuple(1.0 + 0.01 * (i % 5) for i in range(60))
    ratio, low, high = median_ratio_bounds(original, best)
    assert low <= ratio <= high and 1.9 < low and high < 2.1


def test_report_cycle_is_broken():
    import ast
    from pathlib import Path

    import tritonforge.report.html as h
    tree = ast.parse(Path(h.__file__).read_text())
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert "optimize" not in imported


RECORDS = [
    {"name": "softmax", "category": "reduction", "success": True, "speedup": 2.4, "speedup_low": 2.2},
    {"name": "layernorm", "category": "reduction", "success": False, "speedup": 1.01},
    {"name": "add", "category": "elementwise", "outcome": "success", "speedup": 1.3},
    {"name": "gemm", "category": "matmul", "speedup": None, "reason": "no transform applied"},
]


def test_pass_page_from_dicts_and_dataclasses():
    result, _ = sample_result()
    rows = [normalise(r) for r in RECORDS + [result]]
    assert [r.success for r in rows] == [True, False, True, False, True]
    assert rows[-1].name == "k" and rows[-1].speedup == 9.4 and rows[-1].category == "uncategorized"
    page = render_pass_html(RECORDS + [result], {"headline": {"success_rate": 0.6}, "kernels": 5})
    HTMLParser().feed(page)
    _self_contained(page)
    marks = _marks(page)
    assert marks["categories"] == 4 and marks["records"] == 4 and marks["distribution"] >= 2
    assert "headline.success_rate" in page and "3 of 5 records succeeded" in page


def _browser_check(page_path, tmp_path, expected):
    shot = tmp_path / "shot.png"
    loaded = load(page_path, shot, PLOT_SCRIPT)
    assert loaded.console == (), loaded.console
    info = json.loads(loaded.value)
    assert info["resources"] == 0 and info["scripts"] == 0
    plots = {p["plot"]: p for p in info["plots"]}
    assert set(plots) == set(expected)
    data = shot.read_bytes()
    for name, plot in plots.items():
        assert plot["marks"] >= expected[name] and plot["width"] > 100 and plot["height"] > 50
        assert coloured_pixels(data, plot) > 50, f"plot {name} looks empty in the screenshot"
    return shot


def test_report_html_in_a_browser(tmp_path):
    result, extras = sample_result()
    paths = write_outputs(result, tmp_path / "out", "k.py", "NVIDIA H100", extras=extras)
    shot = _browser_check(paths["html"], tmp_path, {"speedup": 3, "history": 5, "roofline": 2})
    assert shot.stat().st_size > 10_000


def test_pass_page_in_a_browser(tmp_path):
    page = tmp_path / "pass.html"
    page.write_text(render_pass_html(RECORDS, {"kernels": 4}))
    _browser_check(page, tmp_path, {"categories": 3, "distribution": 2, "records": 3})


def test_the_browser_check_sees_a_console_error(tmp_path):
    page = tmp_path / "bad.html"
    page.write_text("<!doctype html><p>x</p><script>console.error('deliberate')</script>")
    assert load(page, tmp_path / "s.png").console == ("deliberate",)


def test_history_without_timings_shows_verified_or_failed():
    from dataclasses import replace

    result, extras = sample_result()
    untimed = replace(result, history=tuple(replace(h, speedup=None) for h in result.history))
    page = render_html(untimed, "cpu", "k.py", extras=extras)
    assert "search history (correctness only)" in page and _marks(page)["history"] == 4
    assert "speedup over the original" not in page
