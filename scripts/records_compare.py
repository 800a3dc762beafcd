"""Two passes' records of the same kernels side by side: what an engine change did, record by record.

    python scripts/records_compare.py BEFORE.jsonl AFTER.jsonl [--names a,b,c]

Reads each ``records.jsonl`` (``bench optimize``; the last line of a name wins) and prints a
Markdown table over the records both hold (or ``--names``): status and speedup, candidates
verified and timed, seconds to the first verified candidate, rounds and wall, before -> after;
then the medians and the successes of each side. A development check, not a result: a record run
again is a re-run (BENCHMARK.md), so these figures never go into a pass's tables.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path


def read_records(path: str | Path) -> dict[str, dict]:
    """The last line of each record name in ``path``; torn lines are skipped."""
    out: dict[str, dict] = {}
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict) and "name" in rec:
            out[rec["name"]] = rec
    return out


def _fmt(value, unit: str = "") -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.2f}{unit}" if unit == "x" else f"{value:.0f}{unit}"
    return f"{value}{unit}"


def _pair(a: dict, b: dict, key: str, unit: str = "") -> str:
    return f"{_fmt(a.get(key), unit)} -> {_fmt(b.get(key), unit)}"


def _median(records: list[dict], key: str) -> str:
    values = [r[key] for r in records if isinstance(r.get(key), (int, float))]
    return f"{statistics.median(values):.1f}" if values else "-"


def compare(before: dict[str, dict], after: dict[str, dict], names: list[str] | None = None) -> str:
    """The Markdown comparison of the records in both (or ``names``, those of them in both)."""
    common = [n for n in (names or list(before)) if n in before and n in after]
    if not common:
        raise SystemExit("no record in both files" + (" among --names" if names else ""))
    lines = ["| record | status | speedup | verified | first verified | rounds | wall |",
             "|---|---|---|---|---|---|---|"]
    for n in common:
        a, b = before[n], after[n]
        lines.append(f"| {n} | {a.get('status')} -> {b.get('status')} | {_pair(a, b, 'speedup', 'x')} "
                     f"| {_pair(a, b, 'verified')} | {_pair(a, b, 'first_verified_s', ' s')} "
                     f"| {_pair(a, b, 'rounds')} | {_pair(a, b, 'wall_s', ' s')} |")
    a_recs, b_recs = [before[n] for n in common], [after[n] for n in common]
    lines += ["", "| median / count | before | after |", "|---|---|---|"]
    for key in ("verified", "candidates", "first_verified_s", "wall_s"):
        lines.append(f"| {key} | {_median(a_recs, key)} | {_median(b_recs, key)} |")
    wins = lambda rs: sum(r.get("status") == "success" for r in rs)  # noqa: E731
    lines.append(f"| successes | {wins(a_recs)} of {len(common)} | {wins(b_recs)} of {len(common)} |")
    engines = {r.get("engine_commit") for r in a_recs}, {r.get("engine_commit") for r in b_recs}
    lines.append(f"| engine | {', '.join(sorted(map(str, engines[0])))} "
                 f"| {', '.join(sorted(map(str, engines[1])))} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before")
    parser.add_argument("after")
    parser.add_argument("--names", help="comma-separated records (default: every record in both)")
    args = parser.parse_args(argv)
    names = [n for n in (args.names or "").split(",") if n] or None
    print(compare(read_records(args.before), read_records(args.after), names))
    return 0


if __name__ == "__main__":
    sys.exit(main())
