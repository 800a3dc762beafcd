"""Plain-text tables for the CLI (no third-party dependency: the GPU image may lack rich)."""

from __future__ import annotations

from typing import Sequence


def render_table(headers: Sequence[str], rows: Sequence[Sequence[object]], title: str = "") -> str:
    cells = [[str(h) for h in headers]] + [["" if c is None else str(c) for c in r] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    numeric = [all(_is_number(r[i]) for r in cells[1:] if r[i]) for i in range(len(headers))]

    def fmt(row: list[str]) -> str:
        return "  ".join(c.rjust(w) if num else c.ljust(w)
                         for c, w, num in zip(row, widths, numeric)).rstrip()

    lines = [title] if title else []
    lines.append(fmt(cells[0]))
    lines.append("  ".join("-" * w for w in widths))
    lines += [fmt(r) for r in cells[1:]]
    return "\n".join(lines)


def _is_number(text: str) -> bool:
    try:
        float(text.rstrip("x%"))
        return True
    except ValueError:
        return False


def fmt_ms(value: float | None) -> str:
    if value is None or value != value:
        return "-"
    if value < 1:
        return f"{value * 1000:.1f}us"
    return f"{value:.3f}ms"
