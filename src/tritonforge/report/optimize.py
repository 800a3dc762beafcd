"""What an optimization leaves behind: the faster file, a unified diff, JSON and Markdown reports."""

from __future__ import annotations

import json
import math
from pathlib import Path

from ..model.serialize import to_jsonable
from .diff import unified_diff
from .html import render_html
from .tables import render_table

__all__ = ["markdown", "unified_diff", "write_outputs"]


def _fmt(x: float | None, suffix: str = "x") -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.3f}{suffix}"


def markdown(result, device: str) -> str:
    final = result.final
    lines = [f"# TritonForge: {result.task}", "",
             f"- device: {device}",
             f"- rounds: {result.rounds} ({result.stop_reason}); candidates tried: {result.tried}; "
             f"wall time {result.wall_s:.1f} s",
             f"- search cases: {', '.join(result.search_cases)}"]
    if final is not None:
        lines += [f"- final check (fresh process, all performance cases): "
                  f"{'ACCEPTED' if final.accepted else 'rejected'}: {final.reason}",
                  f"- speedup {_fmt(final.speedup)} (lower bound {_fmt(final.speedup_low)}), "
                  f"geomean {_fmt(final.geomean)}"]
    else:
        lines.append("- no candidate beat the original")
    lines += [f"- note: {n}" for n in result.notes]
    rows = [(h.origin, h.description[:60], h.status.value, _fmt(h.speedup), h.reason[:70])
            for h in result.history]
    lines += ["", "## History", "", "```", render_table(("origin", "change", "status", "speedup",
                                                          "reason"), rows), "```"]
    return "\n".join(lines) + "\n"


def write_outputs(result, out_dir: str | Path, file_name: str, device: str, *,
                  extras=None) -> dict[str, Path]:
    """Write the faster file, the diff, report.json, report.md and report.html into ``out_dir``.
    ``extras``: ``report.gather.ReportExtras`` (from the run store) for report.html's plots."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"best": out / file_name, "diff": out / f"{Path(file_name).stem}.diff",
             "json": out / "report.json", "markdown": out / "report.md", "html": out / "report.html"}
    paths["best"].write_text(result.best.source)
    paths["diff"].write_text(unified_diff(result.original.source, result.best.source, file_name))
    paths["json"].write_text(json.dumps(to_jsonable(result), indent=1))
    paths["markdown"].write_text(markdown(result, device))
    paths["html"].write_text(render_html(result, device, file_name, extras=extras))
    return paths
