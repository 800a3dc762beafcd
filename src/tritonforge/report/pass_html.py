"""The summary page of a benchmark pass (``bench optimize`` over a suite): success by category, the
speedup distribution, each record's speedup, and the pass's headline figures. Self-contained like
report.html (inline SVG, no script, no network).

``render_pass_html(records, summary)`` takes the per-record results as dicts (e.g. the lines of
``records.jsonl``) or dataclasses, with these fields, all but the name optional:

    name (or task)   the record's name
    category         its category (records without one are grouped as "uncategorized")
    success          bool; else derived from ``outcome``/``status`` ("success"/"ok"), else from
                     speedup >= ``SUCCESS_SPEEDUP``
    speedup          the accepted version's speedup (or ``final.speedup`` of an OptimizeResult
                     whose ``final.accepted``); None or NaN: none
    speedup_low      its lower confidence bound
    wall_s           wall time of the record
    reason           why it ended as it did (shown in the table)

``summary`` is a dict or dataclass of the pass's headline figures (rendered as a table; nested
mappings one level deep are flattened as ``outer.inner``).
"""

from __future__ import annotations

import dataclasses
import html
import math
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from .svg import bars, histogram

SUCCESS_SPEEDUP = 1.05     # BENCHMARK.md: a success is an accepted version at least 5% faster

STYLE = """body{font-family:sans-serif;max-width:1000px;margin:2em auto;color:#222}
table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:3px 6px;font-size:13px}
.empty{color:#777;font-style:italic}figcaption{font-size:13px;color:#555}"""


@dataclass(frozen=True)
class PassRow:
    """One record of a pass, normalised from whatever shape it came in."""

    name: str
    category: str
    success: bool
    speedup: float | None
    speedup_low: float | None
    wall_s: float | None
    reason: str


def _as_mapping(obj: Any) -> Mapping[str, Any]:
    if isinstance(obj, Mapping):
        return obj
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
    return getattr(obj, "__dict__", {})


def _float(x: Any) -> float | None:
    try:
        value = float(x)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def normalise(record: Any) -> PassRow:
    """A ``PassRow`` from a record dict/dataclass (the fields in the module docstring)."""
    rec = _as_mapping(record)
    final = _as_mapping(rec.get("final")) if rec.get("final") is not None else {}
    speedup = _float(rec.get("speedup"))
    low = _float(rec.get("speedup_low"))
    if speedup is None and final and final.get("accepted"):
        speedup, low = _float(final.get("speedup")), _float(final.get("speedup_low"))
    if "success" in rec and rec["success"] is not None:
        success = bool(rec["success"])
    elif isinstance(rec.get("outcome") or rec.get("status"), str):
        success = str(rec.get("outcome") or rec.get("status")).lower() in ("success", "ok")
    else:
        success = speedup is not None and speedup >= SUCCESS_SPEEDUP
    reason = rec.get("reason") or final.get("reason") or rec.get("stop_reason") or ""
    return PassRow(str(rec.get("name") or rec.get("task") or "?"),
                   str(rec.get("category") or "uncategorized"), success, speedup, low,
                   _float(rec.get("wall_s")), str(reason))


def _summary_rows(summary: Any) -> list[tuple[str, str]]:
    rows: list[tuple[str, str]] = []
    for key, value in _as_mapping(summary).items():
        inner = _as_mapping(value) if not isinstance(value, (str, bytes, int, float)) else {}
        if inner and not isinstance(value, (list, tuple)):
            rows += [(f"{key}.{k}", _fmt(v)) for k, v in inner.items()
                     if not isinstance(v, (list, tuple, dict))]
        elif not isinstance(value, (list, tuple, dict)):
            rows.append((str(key), _fmt(value)))
    return rows


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}" if math.isfinite(value) else "-"
    return str(value)


def render_pass_html(records: Iterable[Any], summary: Any, *, title: str = "benchmark pass") -> str:
    """The pass summary page (see the module docstring for the record fields)."""
    rows = [normalise(r) for r in records]
    by_cat: dict[str, list[PassRow]] = defaultdict(list)
    for r in rows:
        by_cat[r.category].append(r)
    cat_rows = [(f"{cat} ({sum(r.success for r in rs)}/{len(rs)})",
                 100.0 * sum(r.success for r in rs) / len(rs), None, None)
                for cat, rs in sorted(by_cat.items())]
    cat_svg = bars("categories", cat_rows, title="success rate by category", unit="%",
                   reference=None) if rows else ""
    speedups = [r.speedup for r in rows if r.speedup is not None]
    dist_svg = histogram("distribution", speedups, title="speedup distribution") if speedups else ""
    per_svg = bars("records", [(r.name, r.speedup, r.speedup_low, None)
                               for r in sorted(rows, key=lambda r: -(r.speedup or 0.0))
                               if r.speedup is not None],
                   title="speedup per record", reference=SUCCESS_SPEEDUP) if speedups else ""
    none = '<p class="empty">No records.</p>'
    head = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>"
                   for k, v in _summary_rows(summary))
    table = "".join(
        f"<tr><td>{html.escape(r.name)}</td><td>{html.escape(r.category)}</td>"
        f"<td>{'yes' if r.success else 'no'}</td>"
        f"<td>{'' if r.speedup is None else f'{r.speedup:.3f}x'}</td>"
        f"<td>{'' if r.speedup_low is None else f'{r.speedup_low:.3f}x'}</td>"
        f"<td>{'' if r.wall_s is None else f'{r.wall_s:.0f} s'}</td>"
        f"<td>{html.escape(r.reason[:160])}</td></tr>" for r in rows)
    n_ok = sum(r.success for r in rows)
    return f"""<!doctype html><html lang="en"><head><meta charset="utf-8">
<title>TritonForge: {html.escape(title)}</title><style>{STYLE}</style></head><body>
<h1>TritonForge: {html.escape(title)}</h1>
<p><b>{n_ok} of {len(rows)} records succeeded</b> (an accepted version at least
{SUCCESS_SPEEDUP:.2f}x as fast as the original; docs/BENCHMARK.md)</p>
<h2>Summary</h2><table>{head}</table>
<h2>Success by category</h2>{cat_svg or none}
<h2>Speedup distribution</h2>{dist_svg or '<p class="empty">No record has a speedup.</p>'}
<h2>Speedup per record</h2>{per_svg or '<p class="empty">No record has a speedup.</p>'}
<h2>Records</h2>
<table><tr><th>record</th><th>category</th><th>success</th><th>speedup</th><th>lower bound</th>
<th>wall</th><th>reason</th></tr>{table}</table>
</body></html>
"""
