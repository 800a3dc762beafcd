"""report.html of one optimization: self-contained (inline SVG and CSS, no script, no network),
with plots of the per-case speedup of the accepted version and its confidence bars, the search
history, the roofline position of the original and the accepted kernel, and the diff.

Plots are drawn by ``report.svg``; what the result itself lacks (per-case bounds, round numbers,
roofline) comes from the run store through ``report.gather.ReportExtras``.
"""

from __future__ import annotations

import html
import math

from ..model import Status
from .diff import unified_diff
from .gather import ReportExtras
from .svg import ACCENT, BAD, GOOD, NEUTRAL, bars, roofline, scatter

STYLE = """body{font-family:sans-serif;max-width:1000px;margin:2em auto;color:#222}
table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:3px 6px;font-size:13px}
pre{background:#f6f6f6;padding:1em;overflow:auto;font-size:12px}.add{color:#1a7f37}
.del{color:#b3261e}.empty{color:#777;font-style:italic}figure{margin:1em 0}
figcaption{font-size:13px;color:#555}"""


def _num(x: float | None) -> bool:
    return x is not None and isinstance(x, (int, float)) and math.isfinite(x)


def _speedup_plot(result, extras: ReportExtras) -> str:
    final = result.final
    if extras.case_bounds:
        rows = [(b.case_id, b.speedup, b.low, b.high) for b in extras.case_bounds]
    elif final is not None and final.per_case:
        rows = [(case, ratio, None, None) for case, ratio in final.per_case]
    else:
        return ('<p class="empty">No per-case timings: nothing was accepted, or the run used '
                "the CPU interpreter, whose times are not performance.</p>")
    band = (f"lower bound {final.speedup_low:.2f}x", final.speedup_low) \
        if final is not None and _num(final.speedup_low) else None
    svg = bars("speedup", rows, title="speedup per performance case", band=band)
    why = ("whiskers: 95% bootstrap interval of the median ratio over the final check's samples"
           if extras.case_bounds else "no per-case samples stored: bars without whiskers")
    return f"<figure>{svg}<figcaption>{html.escape(why)}; dashed: as fast as the original; " \
           "dotted: the run's lower confidence bound over all cases</figcaption></figure>"


def _correctness_history(result, decided: dict) -> str:
    """Without timings (CPU interpreter) the history is only verified or not, in order."""
    points = []
    for i, h in enumerate(result.history, start=1):
        ok = h.status is Status.OK
        rd = decided.get(h.candidate)
        color = (ACCENT if rd and rd[1].accepted else GOOD) if ok else BAD
        points.append((i, 1.0 if ok else 0.0, color, f"#{i} {h.description}: {h.status.value}"))
    svg = scatter("history", points, title="search history (correctness only)",
                  x_label="candidate, in the order tried", y_label="verified (1) / failed (0)",
                  reference=None)
    return ("<figure>" + svg + "<figcaption>no timings in this run (the CPU interpreter's say "
            "nothing about speed): each candidate is shown as verified (1) or failed (0); dark: "
            "accepted by correctness</figcaption></figure>")


def _history_plot(result, extras: ReportExtras) -> str:
    decided = {d.candidate: (r, d) for r, d in extras.decisions}
    if result.history and not any(_num(h.speedup) for h in result.history):
        return _correctness_history(result, decided)
    points, steps, factor = [], [(0.0, 1.0)], 1.0
    for i, h in enumerate(result.history, start=1):
        rd = decided.get(h.candidate)
        if h.status is not Status.OK:
            points.append((i, 0.0, BAD, f"#{i} {h.description}: {h.status.value}"))
            continue
        sp = h.speedup if _num(h.speedup) else 1.0
        accepted = rd is not None and rd[1].accepted
        color = ACCENT if accepted else (GOOD if sp >= 1 else NEUTRAL)
        where = f"round {rd[0]}, " if rd else ""
        points.append((i, factor * sp, color, f"#{i} ({where}{'accepted' if accepted else 'kept out'})"
                                              f" {h.description}: {sp:.3f}x over the incumbent"))
        if accepted:
            factor *= sp
            steps.append((float(i), factor))
    if not points:
        return '<p class="empty">No candidate was tried.</p>'
    steps.append((float(len(result.history)), factor))
    svg = scatter("history", points, title="search history", x_label="candidate, in the order tried",
                  y_label="speedup over the original (est.)", steps=steps)
    return ("<figure>" + svg + "<figcaption>each point a candidate (estimated speedup over the "
            "original: its speedup over the incumbent of its round times the incumbent's); red at "
            "0: failed verification; dark: accepted; the line: the incumbent after each accepted "
            "step</figcaption></figure>")


def _roofline_plot(extras: ReportExtras) -> str:
    if not extras.rooflines:
        return ('<p class="empty">No roofline: it needs a Nsight Compute profile on a GPU '
                "(none in this run's store).</p>")
    peak = extras.rooflines[0][1]
    pts = [(label, r.flops / r.bytes_moved if r.bytes_moved else float("nan"), r.achieved_tflops)
           for label, r in extras.rooflines]
    svg = roofline("roofline", pts, peak.peak_tflops, peak.peak_bw_gbs,
                   title=f"roofline at case {extras.roofline_case}")
    if not svg:
        return '<p class="empty">No roofline: the profile holds no work counts.</p>'
    return (f"<figure>{svg}<figcaption>case {html.escape(str(extras.roofline_case))}; the accepted "
            "kernel's point: the original's bytes and FLOPs over its final-check time"
            "</figcaption></figure>")


def _diff_html(text: str) -> str:
    if not text:
        return '<p class="empty">(no change)</p>'
    lines = []
    for line in text.splitlines():
        cls = "add" if line.startswith("+") and not line.startswith("+++") else \
            "del" if line.startswith("-") and not line.startswith("---") else ""
        esc = html.escape(line)
        lines.append(f'<span class="{cls}">{esc}</span>' if cls else esc)
    return "<pre>" + "\n".join(lines) + "</pre>"


def render_html(result, device: str, file_name: str, *, extras: ReportExtras | None = None,
                rooflines=()) -> str:
    """The page for ``result`` (a ``search.loop.OptimizeResult``)."""
    extras = extras or ReportExtras(rooflines=tuple(rooflines))
    final = result.final
    head = (f"{final.speedup:.3f}x (lower bound {final.speedup_low:.3f}x, geomean {final.geomean:.3f}x)"
            if final is not None and final.accepted and _num(final.speedup)
            else (final.reason if final is not None else "no candidate beat the original"))
    rows = "".join(
        f"<tr><td>{html.escape(h.origin)}</td><td>{html.escape(h.description)}</td>"
        f"<td>{h.status.value}</td><td>{f'{h.speedup:.3f}x' if _num(h.speedup) else ''}</td>"
        f"<td>{html.escape(h.reason[:160])}</td></tr>" for h in result.history)
    notes = "".join(f"<li>{html.escape(n)}</li>" for n in result.notes)
    diff = unified_diff(result.original.source, result.best.source, file_name)
    return f"""<!doctype html><html lang="en"><head><meta charset="utf-8">
<title>TritonForge: {html.escape(result.task)}</title><style>{STYLE}</style>
</head><body>
<h1>TritonForge: {html.escape(result.task)}</h1>
<p><b>{html.escape(head)}</b></p>
<p>device: {html.escape(device)}; rounds: {result.rounds} ({html.escape(result.stop_reason)});
candidates tried: {result.tried}; wall time {result.wall_s:.1f} s</p>
<h2>Speedup per performance case (final check, fresh process)</h2>
{_speedup_plot(result, extras)}
<h2>Search history</h2>
{_history_plot(result, extras)}
<h2>Roofline</h2>
{_roofline_plot(extras)}
<h2>Diff</h2>
{_diff_html(diff)}
<h2>Notes</h2><ul>{notes}</ul>
<h2>Candidates</h2>
<table><tr><th>origin</th><th>change</th><th>status</th><th>speedup</th><th>reason</th></tr>{rows}</table>
</body></html>
"""
