"""Hand-made inline SVG charts for the HTML reports: no plotting library, no script, no network
(the GPU image and users' machines may lack a plotting package, and a report must open offline).

Every chart is an ``<svg class="plot" data-plot=NAME>``; every data mark in it carries
``class="mark"``, so a test (or a reader's script) can count what a plot shows.
"""

from __future__ import annotations

import html
import math
from typing import Sequence

GOOD, BAD, NEUTRAL, ACCENT = "#2a9d8f", "#e76f51", "#8d99ae", "#264653"


def _finite(x: float | None) -> bool:
    return x is not None and isinstance(x, (int, float)) and math.isfinite(x)


def _open(name: str, width: int, height: int, title: str) -> list[str]:
    return [f'<svg class="plot" data-plot="{html.escape(name)}" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" xmlns="http://www.w3.org/2000/svg" '
            'font-family="sans-serif" font-size="12" role="img">',
            f"<title>{html.escape(title)}</title>"]


def bars(name: str, rows: Sequence[tuple[str, float, float | None, float | None]], *,
         title: str, unit: str = "x", reference: float | None = 1.0,
         band: tuple[str, float] | None = None, width: int = 640) -> str:
    """Horizontal bars, one per (label, value, low, high); ``low``/``high`` draw a confidence
    whisker where known. ``reference`` draws a dashed line (1.0x: as fast as the original);
    ``band`` = (label, value) a second dotted line (e.g. the run's overall lower bound)."""
    rows = [r for r in rows if _finite(r[1])]
    if not rows:
        return ""
    top = max([r[1] for r in rows] + [r[3] for r in rows if _finite(r[3])]
              + [reference or 0.0, band[1] if band else 0.0]) * 1.12
    row_h, label_w = 24, 170
    height = row_h * len(rows) + 40
    scale = (width - label_w - 70) / top
    out = _open(name, width, height, title)
    for i, (label, value, low, high) in enumerate(rows):
        y = 8 + i * row_h
        color = GOOD if reference is None or value >= reference else BAD
        w = max(scale * value, 1.0)
        out.append(f'<text x="{label_w - 6}" y="{y + 15}" text-anchor="end">'
                   f"{html.escape(label[:28])}</text>")
        out.append(f'<rect class="mark" x="{label_w}" y="{y + 3}" width="{w:.1f}" '
                   f'height="{row_h - 8}" fill="{color}"><title>{html.escape(label)}: '
                   f"{value:.3f}{unit}</title></rect>")
        if _finite(low) and _finite(high):
            x0, x1, yc = label_w + scale * low, label_w + scale * high, y + row_h / 2 - 1
            out.append(f'<path class="whisker" d="M{x0:.1f},{yc - 5}v10M{x0:.1f},{yc}H{x1:.1f}'
                       f'M{x1:.1f},{yc - 5}v10" stroke="{ACCENT}" fill="none"/>')
        right_end = label_w + max(w, scale * high if _finite(high) else 0.0)
        out.append(f'<text x="{right_end + 5:.1f}" y="{y + 15}">{value:.2f}{unit}</text>')
    bottom = height - 22
    for value, dash, label in ([(reference, "4,3", f"{reference:g}{unit}")] if reference else []) + \
            ([(band[1], "1,3", band[0])] if band else []):
        x = label_w + scale * value
        out.append(f'<line x1="{x:.1f}" y1="4" x2="{x:.1f}" y2="{bottom}" stroke="#333" '
                   f'stroke-dasharray="{dash}"/>')
        out.append(f'<text x="{x:.1f}" y="{bottom + 14}" text-anchor="middle">'
                   f"{html.escape(label)}</text>")
    out.append("</svg>")
    return "".join(out)


def scatter(name: str, points: Sequence[tuple[float, float, str, str]], *, title: str,
            x_label: str, y_label: str, steps: Sequence[tuple[float, float]] = (),
            reference: float | None = 1.0, width: int = 640, height: int = 300) -> str:
    """Points (x, y, color, tooltip) with a step line through ``steps`` (x, y), e.g. the
    incumbent's speedup as candidates are accepted."""
    pts = [p for p in points if _finite(p[0]) and _finite(p[1])]
    if not pts:
        return ""
    xs = [p[0] for p in pts] + [s[0] for s in steps]
    ys = [p[1] for p in pts] + [s[1] for s in steps] + ([reference] if reference else [])
    x_lo, x_hi = min(xs), max(xs) if max(xs) > min(xs) else min(xs) + 1
    y_lo, y_hi = min(0.0, min(ys)), max(ys) * 1.1 or 1.0
    left, right, top_m, bottom_m = 50, 15, 15, 40

    def px(x: float) -> float:
        return left + (x - x_lo) / (x_hi - x_lo) * (width - left - right)

    def py(y: float) -> float:
        return height - bottom_m - (y - y_lo) / (y_hi - y_lo) * (height - top_m - bottom_m)

    out = _open(name, width, height, title)
    out.append(f'<path d="M{left},{top_m}V{height - bottom_m}H{width - right}" stroke="#333" '
               'fill="none"/>')
    for frac in (0.0, 0.5, 1.0):
        y = y_lo + frac * (y_hi - y_lo)
        out.append(f'<text x="{left - 4}" y="{py(y) + 4:.1f}" text-anchor="end">{y:.2g}</text>')
        x = x_lo + frac * (x_hi - x_lo)
        out.append(f'<text x="{px(x):.1f}" y="{height - bottom_m + 14}" text-anchor="middle">'
                   f"{x:.3g}</text>")
    out.append(f'<text x="{(left + width) / 2:.0f}" y="{height - 8}" text-anchor="middle">'
               f"{html.escape(x_label)}</text>")
    out.append(f'<text x="12" y="{(height - bottom_m) / 2:.0f}" text-anchor="middle" '
               f'transform="rotate(-90 12 {(height - bottom_m) / 2:.0f})">{html.escape(y_label)}'
               "</text>")
    if reference is not None:
        out.append(f'<line x1="{left}" x2="{width - right}" y1="{py(reference):.1f}" '
                   f'y2="{py(reference):.1f}" stroke="#999" stroke-dasharray="4,3"/>')
    if steps:
        d = f"M{px(steps[0][0]):.1f},{py(steps[0][1]):.1f}"
        for x, y in steps[1:]:
            d += f"H{px(x):.1f}V{py(y):.1f}"
        out.append(f'<path class="mark step" d="{d}" stroke="{ACCENT}" stroke-width="2" '
                   'fill="none"/>')
    for x, y, color, tip in pts:
        out.append(f'<circle class="mark" cx="{px(x):.1f}" cy="{py(y):.1f}" r="4" fill="{color}">'
                   f"<title>{html.escape(tip)}</title></circle>")
    out.append("</svg>")
    return "".join(out)


def roofline(name: str, points: Sequence[tuple[str, float, float]], peak_tflops: float,
             peak_bw_gbs: float, *, title: str, width: int = 640, height: int = 320) -> str:
    """A log-log roofline: arithmetic intensity (FLOP/byte) against TFLOP/s, the memory and
    compute roofs from the measured peaks, one labelled point per (label, intensity, tflops)."""
    pts = [p for p in points if _finite(p[1]) and _finite(p[2]) and p[1] > 0 and p[2] > 0]
    if not pts or not (peak_tflops > 0 and peak_bw_gbs > 0):
        return ""
    ridge = peak_tflops * 1e3 / peak_bw_gbs            # FLOP/byte where the roofs meet
    x_lo = min([p[1] for p in pts] + [ridge]) / 10
    x_hi = max([p[1] for p in pts] + [ridge]) * 10
    y_hi = peak_tflops * 2
    y_lo = min([p[2] for p in pts] + [peak_bw_gbs * x_lo / 1e3]) / 2
    left, right, top_m, bottom_m = 55, 15, 15, 40

    def px(x: float) -> float:
        return left + (math.log10(x) - math.log10(x_lo)) / (math.log10(x_hi) - math.log10(x_lo)) \
            * (width - left - right)

    def py(y: float) -> float:
        return height - bottom_m - (math.log10(y) - math.log10(y_lo)) / \
            (math.log10(y_hi) - math.log10(y_lo)) * (height - top_m - bottom_m)

    out = _open(name, width, height, title)
    out.append(f'<path d="M{left},{top_m}V{height - bottom_m}H{width - right}" stroke="#333" '
               'fill="none"/>')
    out.append(f'<path class="roof" d="M{px(x_lo):.1f},{py(peak_bw_gbs * x_lo / 1e3):.1f}'
               f'L{px(ridge):.1f},{py(peak_tflops):.1f}L{px(x_hi):.1f},{py(peak_tflops):.1f}" '
               'stroke="#333" stroke-width="2" fill="none"/>')
    out.append(f'<text x="{width - right}" y="{py(peak_tflops) - 5:.1f}" text-anchor="end">'
               f"{peak_tflops:.0f} TFLOP/s</text>")
    out.append(f'<text x="{px(x_lo) + 4:.1f}" y="{py(peak_bw_gbs * x_lo / 1e3) - 6:.1f}">'
               f"{peak_bw_gbs:.0f} GB/s</text>")
    out.append(f'<text x="{(left + width) / 2:.0f}" y="{height - 8}" text-anchor="middle">'
               "arithmetic intensity (FLOP/byte, log)</text>")
    out.append(f'<text x="12" y="{(height - bottom_m) / 2:.0f}" text-anchor="middle" '
               f'transform="rotate(-90 12 {(height - bottom_m) / 2:.0f})">TFLOP/s (log)</text>')
    colors = (NEUTRAL, GOOD, BAD, ACCENT)
    for i, (label, x, y) in enumerate(pts):
        out.append(f'<circle class="mark" cx="{px(x):.1f}" cy="{py(y):.1f}" r="6" '
                   f'fill="{colors[i % len(colors)]}"><title>{html.escape(label)}: {x:.3g} '
                   f"FLOP/byte, {y:.3g} TFLOP/s</title></circle>")
        out.append(f'<text x="{px(x) + 9:.1f}" y="{py(y) + 4:.1f}">{html.escape(label)}</text>')
    out.append("</svg>")
    return "".join(out)


def histogram(name: str, values: Sequence[float], *, title: str, bins: int = 12,
              x_label: str = "speedup (x)", width: int = 640, height: int = 260) -> str:
    """Counts of ``values`` in ``bins`` equal-width bins (a distribution at a glance)."""
    vals = [v for v in values if _finite(v)]
    if not vals:
        return ""
    lo, hi = min(vals), max(vals)
    if hi <= lo:
        hi = lo + 1.0
    counts = [0] * bins
    for v in vals:
        counts[min(int((v - lo) / (hi - lo) * bins), bins - 1)] += 1
    left, right, top_m, bottom_m = 40, 15, 15, 40
    bw = (width - left - right) / bins
    top = max(counts)
    out = _open(name, width, height, title)
    out.append(f'<path d="M{left},{top_m}V{height - bottom_m}H{width - right}" stroke="#333" '
               'fill="none"/>')
    for i, c in enumerate(counts):
        h = (height - top_m - bottom_m) * c / top
        x = left + i * bw
        edge = lo + i * (hi - lo) / bins
        if c:
            out.append(f'<rect class="mark" x="{x + 1:.1f}" y="{height - bottom_m - h:.1f}" '
                       f'width="{bw - 2:.1f}" height="{h:.1f}" fill="{GOOD}"><title>{c} from '
                       f"{edge:.2f}x</title></rect>")
        if i % 3 == 0:
            out.append(f'<text x="{x:.1f}" y="{height - bottom_m + 14}">{edge:.2f}</text>')
    out.append(f'<text x="{left - 4}" y="{top_m + 10}" text-anchor="end">{top}</text>')
    out.append(f'<text x="{(left + width) / 2:.0f}" y="{height - 6}" text-anchor="middle">'
               f"{html.escape(x_label)}</text>")
    out.append("</svg>")
    return "".join(out)
