"""How often each transform applies to a set of kernel modules, and why it does not.

``measure(modules)`` runs every transform's ``applies`` (with its ``example_params``) on each
module and, optionally, ``apply`` where it applies, checking that the result is Python the
analyzer reads again. ``render_markdown`` makes the table of docs/transforms_coverage.md:

    python -m tritonforge.transforms.coverage ../shared/tritonbench_g/kernels.json
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping

from ..analyze import analyze_source
from . import REGISTRY
from .base import Applicability, Transform

SEPARATOR = "#" * 146       # TritonBench-G: kernel module above, test section below
_WORDS = {"kernel", "loop", "site", "grid", "launch", "configs"}   # words of the reasons


@dataclass(frozen=True)
class CoverageRow:
    """One transform over a set of modules."""

    transform: str
    params: str                          # the parameters used, as written
    modules: int
    applies: int                         # modules where applies() said yes
    applied: int                         # of those, where apply() gave re-analyzable Python
    failures: tuple[str, ...] = ()       # "module: error" where apply() failed after a yes
    reasons: tuple[tuple[str, int], ...] = ()   # most common refusals, normalized, with counts


def _normalize(reason: str, names: Iterable[str]) -> str:
    """A refusal with names, numbers and quoted source replaced, so that alike ones count as one."""
    first = reason.split("; ")[0]
    first = re.sub(r"`[^`]*`", "`...`", first)
    first = re.sub(r"'[^']*'", "'...'", first)
    for name in sorted(set(names) - _WORDS, key=len, reverse=True):
        first = re.sub(rf"\b{re.escape(name)}\b", "K", first)
    first = re.sub(r"\b\d+\b(?!-D)", "N", first)
    first = re.sub(r"\[N(, N)*\]", "[N, ...]", first)
    return first


def measure(modules: Iterable[tuple[str, str]], transforms: Mapping[str, Transform],
            apply: bool = True, top: int = 3) -> list[CoverageRow]:
    analyzed = [(name, src, analyze_source(src, filename=name)) for name, src in modules]
    rows = []
    for tname, t in transforms.items():
        yes = done = 0
        failures: list[str] = []
        reasons: Counter[str] = Counter()
        for name, src, a in analyzed:
            params: dict = {}
            verdict = Applicability.no(t.no_example_reason)
            for params in t.examples(a):
                verdict = t.applies(a, **params)
                if verdict.ok:
                    break
            if not verdict.ok:
                reasons[_normalize(verdict.reason, [k.name for k in a.kernels])] += 1
                continue
            yes += 1
            if not apply:
                continue
            try:
                analyze_source(t.apply(src, a, **params))
                done += 1
            except Exception as exc:   # noqa: BLE001 - a failure is data here
                failures.append(f"{name}: {type(exc).__name__}: {exc}")
        params = ", ".join(f"{k}={v!r}" for k, v in t.example_params.items())
        if type(t).examples is not Transform.examples:
            params = "derived per file"
        rows.append(CoverageRow(tname, params, len(analyzed), yes, done if apply else -1,
                                tuple(failures), tuple(reasons.most_common(top))))
    return rows


def render_markdown(rows: list[CoverageRow], title: str, note: str = "") -> str:
    n = rows[0].modules if rows else 0
    lines = [f"# {title}", ""]
    if note:
        lines += [note, ""]
    lines += [f"| transform | parameters | applies (of {n}) | applied cleanly | "
              "most common reasons it does not apply |",
              "|---|---|---|---|---|"]
    for r in rows:
        reasons = "<br>".join(f"{c}x {text}" for text, c in r.reasons) or "-"
        applied = "-" if r.applied < 0 else str(r.applied)
        lines.append(f"| `{r.transform}` | {r.params or '-'} | {r.applies} | {applied} | "
                     f"{reasons.replace('|', '/')} |")
    failed = [f for r in rows for f in r.failures]
    if failed:
        lines += ["", "Failures of apply after applies said yes:", ""]
        lines += [f"- {f}" for f in failed]
    return "\n".join(lines) + "\n"


def tritonbench_modules(path: str | Path) -> list[tuple[str, str]]:
    """(name, kernel module) of every TritonBench-G record in ``kernels.json``."""
    records = json.loads(Path(path).read_text(encoding="utf-8"))
    return [(r["name"], r["source"].split(SEPARATOR)[0]) for r in records]


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        sys.stderr.write("usage: python -m tritonforge.transforms.coverage KERNELS_JSON\n")
        return 2
    rows = measure(tritonbench_modules(args[0]), REGISTRY)
    note = ("Each transform's `applies` run with the parameters shown on every TritonBench-G "
            "kernel module (the part of each record above the test section), then `apply` where "
            "it said yes; \"applied cleanly\" counts results the analyzer reads back. Whether "
            "a rewrite is *faster* is for the timing to decide, and the verifier has the last "
            "word on correctness. Generated by `python -m tritonforge.transforms.coverage "
            "../shared/tritonbench_g/kernels.json`.")
    sys.stdout.write(render_markdown(rows, "Transform coverage on TritonBench-G", note))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
