"""A self-contained HTML report: per-case speedups as an inline SVG bar chart, the history, the diff.

No plotting library (the GPU image and users' machines may lack one): the chart is hand-made SVG.
"""

from __future__ import annotations

import html
import math

from .optimize import unified_diff


def _bars(per_case: tuple[tuple[str, float], ...], width: int = 640) -> str:
    if not per_case:
        return "<p>No per-case timings (CPU interpreter, or nothing accepted).</p>"
    top = max(max(r for _, r in per_case), 1.0) * 1.1
    row, label_w = 22, 160
    height = row * len(per_case) + 30
    scale = (width - label_w - 60) / top
    parts = [f'<svg width="{width}" height="{height}" xmlns="http://www.w3.org/2000/svg" '
             'font-family="sans-serif" font-size="12">']
    x1 = label_w + scale * 1.0
    for i, (case, ratio) in enumerate(per_case):
        y = 10 + i * row
        color = "#2a9d8f" if ratio >= 1.0 else "#e76f51"
        w = max(scale * ratio, 1) if not math.isnan(ratio) else 0
        parts.append(f'<text x="{label_w - 6}" y="{y + 14}" text-anchor="end">{html.escape(case)}</text>')
        parts.append(f'<rect x="{label_w}" y="{y + 3}" width="{w:.1f}" height="{row - 6}" fill="{color}"/>')
        parts.append(f'<text x="{label_w + w + 4:.1f}" y="{y + 14}">{ratio:.2f}x</text>')
    parts.append(f'<line x1="{x1:.1f}" y1="5" x2="{x1:.1f}" y2="{height - 15}" stroke="#333" '
                 'stroke-dasharray="3,3"/>')
    parts.append(f'<text x="{x1:.1f}" y="{height - 2}" text-anchor="middle">1.0x</text></svg>')
    return "".join(parts)


def render_html(result, device: str, file_name: str) -> str:
    final = result.final
    head = (f"{final.speedup:.3f}x (lower bound {final.speedup_low:.3f}x, geomean {final.geomean:.3f}x)"
            if final is not None and final.accepted and final.speedup == final.speedup
            else (final.reason if final is not None else "no candidate beat the original"))
    rows = "".join(
        f"<tr><td>{html.escape(h.origin)}</td><td>{html.escape(h.description)}</td>"
        f"<td>{h.status.value}</td><td>{'' if h.speedup is None or h.speedup != h.speedup else f'{h.speedup:.3f}x'}</td>"
        f"<td>{html.escape(h.reason[:160])}</td></tr>" for h in result.history)
    notes = "".join(f"<li>{html.escape(n)}</li>" for n in result.notes)
    diff = html.escape(unified_diff(result.original.source, result.best.source, file_name)) or "(no change)"
    per_case = final.per_case if final is not None else ()
    return f"""<!doctype html><html><head><meta charset="utf-8">
<title>TritonForge: {html.escape(result.task)}</title>
<style>body{{font-family:sans-serif;max-width:1000px;margin:2em auto}}table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:3px 6px;font-size:13px}}pre{{background:#f6f6f6;padding:1em;overflow:auto}}</style>
</head><body>
<h1>TritonForge: {html.escape(result.task)}</h1>
<p><b>{html.escape(head)}</b></p>
<p>device: {html.escape(device)}; rounds: {result.rounds} ({html.escape(result.stop_reason)});
candidates tried: {result.tried}; wall time {result.wall_s:.1f} s</p>
<h2>Speedup per performance case (final check, fresh process)</h2>
{_bars(tuple(per_case))}
<h2>Notes</h2><ul>{notes}</ul>
<h2>History</h2>
<table><tr><th>origin</th><th>change</th><th>status</th><th>speedup</th><th>reason</th></tr>{rows}</table>
<h2>Diff</h2><pre>{diff}</pre>
</body></html>
"""
