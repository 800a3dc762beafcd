"""A pass's figures, computed only from its ``records.jsonl``: ``LATEST.json`` and Markdown tables.

``LATEST.json`` is written by the bench after each pass (never by hand): small, stable keys,
the same block over all records, over the frozen subset (``bench/results/subset-40.txt``) and
over the others. Failures count as 1.0x in the geomean (BENCHMARK.md). Renderers of a pass
(Markdown here; an HTML one elsewhere) take a ``PassSummary``: ``RENDERERS`` maps a format to
one, so another renderer registers itself without touching this module.
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

from .records import PassRecord


@dataclass(frozen=True)
class Figures:
    """One block of LATEST.json."""

    runnable: int                   # records the pass is over
    optimized: int                  # of them, with a record
    successes: int
    success_rate: float             # over optimized
    mean_speedup_over_successes: float | None
    geomean_all: float | None       # failures as 1.0x
    best: float | None
    median_wall_s: float | None
    max_wall_over_budget: float | None   # the longest wall time / per-kernel budget
    median_candidates: float | None
    median_verified: float | None          # candidates that passed verification, per record
    median_first_verified_s: float | None  # record start to its first verified candidate, over
                                           # the records that had one
    with_generated: int                    # records that gained generated cases
    generated_added: int                   # generated cases, summed over the records
    generated_dropped: int                 # of the generated, dropped: the original fails them
    median_generated_s: float | None         # making them, per record that gained some
    median_generated_verify_s: float | None  # a candidate's request on them
    accepted: int
    reverified: int                 # accepted kernels re-verified after the pass
    wrong_accepted: int             # of those, how many failed


@dataclass(frozen=True)
class PassSummary:
    engine_commit: str
    date: str
    gpu: str
    torch: str
    triton: str
    per_kernel_s: float
    publishable: bool
    why_not_publishable: tuple[str, ...]
    all: Figures
    subset: Figures
    others: Figures
    records: tuple[PassRecord, ...] = field(default=(), repr=False)
    groups: dict[str, Figures] = field(default_factory=dict)   # named lists of records (--group-file)
    subset_names: frozenset[str] = frozenset()     # the subset's record names (for the tables)


def _median(xs: list[float]) -> float | None:
    return round(statistics.median(xs), 3) if xs else None


def figures(records: list[PassRecord], runnable: int) -> Figures:
    """The block over ``records`` (the done ones among ``runnable`` names)."""
    speedups = [r.speedup for r in records]
    wins = [r.speedup for r in records if r.is_success]
    accepted = [r for r in records if r.was_accepted]
    checked = [r for r in accepted if r.reverified is not None]
    n = len(records)
    return Figures(
        runnable=runnable, optimized=n, successes=len(wins),
        success_rate=round(len(wins) / n, 4) if n else 0.0,
        mean_speedup_over_successes=round(statistics.mean(wins), 4) if wins else None,
        geomean_all=round(math.exp(sum(math.log(s) for s in speedups) / n), 4) if n else None,
        best=round(max(speedups), 4) if speedups else None,
        median_wall_s=_median([r.wall_s for r in records]),
        max_wall_over_budget=round(max(r.wall_s / r.per_kernel_s for r in records), 3)
        if records and all(r.per_kernel_s > 0 for r in records) else None,
        median_candidates=_median([float(r.candidates) for r in records]),
        median_verified=_median([float(r.verified) for r in records]),
        median_first_verified_s=_median([r.first_verified_s for r in records
                                         if r.first_verified_s is not None]),
        with_generated=sum(1 for r in records if r.generated_added),
        generated_added=sum(r.generated_added for r in records),
        generated_dropped=sum(r.generated_dropped for r in records),
        median_generated_s=_median([r.generated_s for r in records if r.generated_added]),
        median_generated_verify_s=_median([r.generated_verify_s for r in records
                                           if r.generated_verify_s is not None]),
        accepted=len(accepted), reverified=len(checked),
        wrong_accepted=sum(1 for r in checked if r.reverified is False))


def read_subset(path: str | Path) -> list[str]:
    """Names in a subset file (one a line, ``#`` comments)."""
    p = Path(path)
    if not p.exists():
        return []
    return [ln.split("#")[0].strip() for ln in p.read_text().splitlines()
            if ln.split("#")[0].strip()]


def summarize(records: dict[str, PassRecord], names: list[str], subset: list[str], *,
              date: str, gpu: str, torch: str, triton: str, per_kernel_s: float,
              engine_commit: str, groups: dict[str, list[str]] | None = None) -> PassSummary:
    """The pass's summary over ``names`` (its runnable records), from their records only;
    ``groups``: more blocks, each over the pass's names in a named list."""
    mine = [records[n] for n in names if n in records]
    in_subset = set(subset)
    sub_names = [n for n in names if n in in_subset]
    other_names = [n for n in names if n not in in_subset]
    why = []
    if any(r.redo for r in mine):
        why.append(f"{sum(r.redo for r in mine)} record(s) re-run with --redo (debugging)")
    if any(r.mixed for r in mine):
        why.append(f"{sum(r.mixed for r in mine)} record(s) made by another engine or settings "
                   "(--allow-mixed-engines)")
    if len(mine) < len(names):
        why.append(f"{len(names) - len(mine)} record(s) not optimized yet")
    accepted = [r for r in mine if r.was_accepted]
    if any(r.reverified is None for r in accepted):
        why.append(f"{sum(r.reverified is None for r in accepted)} accepted kernel(s) not "
                   "re-verified yet (bench reverify)")
    return PassSummary(
        engine_commit=engine_commit, date=date, gpu=gpu, torch=torch, triton=triton,
        per_kernel_s=per_kernel_s, publishable=not why, why_not_publishable=tuple(why),
        all=figures(mine, len(names)),
        subset=figures([records[n] for n in sub_names if n in records], len(sub_names)),
        others=figures([records[n] for n in other_names if n in records], len(other_names)),
        records=tuple(mine), subset_names=frozenset(sub_names),
        groups={g: figures([records[n] for n in members if n in records and n in names],
                           sum(1 for n in members if n in names))
                for g, members in (groups or {}).items()})


def latest_json(summary: PassSummary) -> dict:
    """LATEST.json's content: the summary less its records."""
    data = asdict(summary)
    data.pop("records")
    data.pop("subset_names")
    data["why_not_publishable"] = list(summary.why_not_publishable)
    return data


def write_latest(summary: PassSummary, path: str | Path) -> Path:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_suffix(p.suffix + ".tmp")
    tmp.write_text(json.dumps(latest_json(summary), indent=1) + "\n")
    tmp.replace(p)
    return p


# ------------------------------------------------------------------ Markdown tables
def quartile_of(records: list[PassRecord]) -> dict[str, str]:
    """Each record's kernel-length quartile (Q1 shortest ... Q4 longest, by source lines), as the
    paper's Table 1 groups them; records of equal length share a quartile by rank order."""
    ordered = sorted(records, key=lambda r: (r.source_lines, r.name))
    n = len(ordered)
    out = {}
    for i, r in enumerate(ordered):
        out[r.name] = f"Q{min(4, 1 + (4 * i) // max(n, 1))}"
    return out


def _row(label: str, f: Figures) -> tuple:
    def x(v: float | None) -> str:
        return "-" if v is None else f"{v:.2f}x"

    return (label, str(f.optimized), str(f.successes), f"{100 * f.success_rate:.1f}%",
            x(f.mean_speedup_over_successes), x(f.geomean_all), x(f.best),
            "-" if f.median_wall_s is None else f"{f.median_wall_s:.0f} s", str(f.wrong_accepted))


HEAD = ("group", "records", "successes", "success rate", "mean speedup (successes)",
        "geomean (all)", "best", "median wall", "wrong accepted")


def _table(rows: list[tuple]) -> str:
    lines = ["| " + " | ".join(HEAD) + " |", "|" + "---|" * len(HEAD)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def _breadth(blocks: list[tuple[str, Figures]]) -> str:
    """Per block: how widely the search searched and whether the budget held."""
    def n(v: float | None, unit: str = "") -> str:
        return "-" if v is None else f"{v:.0f}{unit}"

    head = ("group", "records", "median candidates", "median verified",
            "median time to first verified", "max wall / budget")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for label, f in blocks:
        lines.append("| " + " | ".join((
            label, str(f.optimized), n(f.median_candidates), n(f.median_verified),
            n(f.median_first_verified_s, " s"),
            "-" if f.max_wall_over_budget is None else f"{f.max_wall_over_budget:.2f}")) + " |")
    return "\n".join(lines)


def _generated(blocks: list[tuple[str, Figures]]) -> str:
    """Per block: what generated cases (testgen.augment) added and cost."""
    def s(v: float | None) -> str:
        return "-" if v is None else f"{v:.1f} s"

    head = ("group", "records", "with generated cases", "added", "dropped (the original fails them)",
            "median time to make them", "median per candidate")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for label, f in blocks:
        lines.append("| " + " | ".join((
            label, str(f.optimized), str(f.with_generated), str(f.generated_added),
            str(f.generated_dropped), s(f.median_generated_s), s(f.median_generated_verify_s)))
            + " |")
    return "\n".join(lines)


def _held_back(blocks: list[tuple[str, list[PassRecord]]]) -> str:
    """Per block: how many records fell short for each reason (``bench.optimize.held_back``),
    most common first. Three of them count the records whose search found a candidate the final
    phase then lost (``bench.optimize.final_phase_loss``: no time left to check it, a size slower,
    anything else): 11 of the 50 records short of a success among the first 62 of the
    c064071456aa pass (four H200s, 2026-11-28), all then under one reason."""
    reasons: dict[str, dict[str, int]] = {}
    for label, recs in blocks:
        for r in recs:
            if r.status != "success" and r.held_back:
                # "accepted, but only 1.029x": one line for every such record
                why = ("accepted, but under the success threshold"
                       if r.held_back.startswith("accepted, but only") else r.held_back)
                reasons.setdefault(why, {}).setdefault(label, 0)
                reasons[why][label] += 1
    labels = [label for label, _ in blocks]
    lines = ["| why | " + " | ".join(labels) + " |", "|" + "---|" * (len(labels) + 1)]
    for why, counts in sorted(reasons.items(), key=lambda kv: (-sum(kv[1].values()), kv[0])):
        lines.append(f"| {why} | " + " | ".join(str(counts.get(label, 0)) for label in labels)
                     + " |")
    return "\n".join(lines)


def render_markdown(summary: PassSummary) -> str:
    """Overall, by category and by kernel-length quartile, from the summary's records."""
    recs = list(summary.records)
    head = [f"# Optimization pass: engine {summary.engine_commit}",
            "",
            f"{summary.date}, {summary.gpu}, torch {summary.torch}, triton {summary.triton}, "
            f"{summary.per_kernel_s:.0f} s per kernel. "
            + ("Publishable: one engine, every record optimized once." if summary.publishable
               else "NOT publishable: " + "; ".join(summary.why_not_publishable) + "."),
            "", "## Overall", "",
            _table([_row("all", summary.all), _row("subset-40", summary.subset),
                    _row("others", summary.others)]
                   + [_row(g, f) for g, f in summary.groups.items()]),
            "", "## Search breadth", "",
            _breadth([("all", summary.all), ("subset-40", summary.subset),
                      ("others", summary.others)] + list(summary.groups.items())),
            "", "## Generated cases", "",
            _generated([("all", summary.all), ("subset-40", summary.subset),
                        ("others", summary.others)])]
    by_cat: dict[str, list[PassRecord]] = {}
    for r in recs:
        by_cat.setdefault(r.category or "(none)", []).append(r)
    cats = [_row(c, figures(rs, len(rs))) for c, rs in sorted(by_cat.items())]
    q = quartile_of(recs)
    quarts = []
    for label in ("Q1", "Q2", "Q3", "Q4"):
        rs = [r for r in recs if q[r.name] == label]
        if rs:
            lo, hi = min(r.source_lines for r in rs), max(r.source_lines for r in rs)
            quarts.append(_row(f"{label} ({lo}-{hi} lines)", figures(rs, len(rs))))
    subset = summary.subset_names
    short = _held_back([("all", recs), ("subset-40", [r for r in recs if r.name in subset]),
                        ("others", [r for r in recs if r.name not in subset])])
    return "\n".join(head + ["", "## Why records fell short", "", short,
                             "", "## By category", "", _table(cats),
                             "", "## By kernel length (quartiles of source lines)", "",
                             _table(quarts), ""])


RENDERERS: dict[str, Callable[[PassSummary], str]] = {"md": render_markdown}
