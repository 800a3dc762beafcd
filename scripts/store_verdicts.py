"""How a run store's candidates fared, per record: counts of (purpose, status, reason) over every
evaluation of a candidate (the original's own results left out).

    python scripts/store_verdicts.py STORE.sqlite [STORE.sqlite ...] [--names a,b] [--reason-chars 80]

Reads the ``evaluations`` and ``results`` tables of each store (a pass's lanes keep one each:
``.gpu-store/pass-ENGINE/lanes/gpuN/store.sqlite``) and prints a Markdown table per record, most
frequent first. What a pass's records.jsonl cannot say: whether a record's candidates failed to
compile, crashed, mismatched or were called cheats, and why (a check that refuses honest
candidates shows up here first, as one reason repeated across records).
"""

from __future__ import annotations

import argparse
import collections
import sqlite3
import sys
from pathlib import Path


def verdicts(store: str | Path, names: set[str] | None = None, reason_chars: int = 80
             ) -> dict[str, collections.Counter]:
    """{record: Counter of (purpose, status, reason cut to ``reason_chars``)} for one store."""
    out: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    con = sqlite3.connect(f"file:{Path(store)}?mode=ro", uri=True)
    try:
        rows = con.execute(
            "select e.task, e.purpose, r.status, r.reason from evaluations e "
            "join results r on r.evaluation = e.id "
            "where r.variant not like 'original%' and r.variant != 'incumbent'").fetchall()
    finally:
        con.close()
    for task, purpose, status, reason in rows:
        name = task.split(":")[0]
        if names and name not in names:
            continue
        out[name][(purpose, status, (reason or "").replace("|", "/")[:reason_chars])] += 1
    return out


def render(counts: dict[str, collections.Counter]) -> str:
    lines = []
    for name in sorted(counts):
        lines += [f"## {name}", "", "| count | purpose | status | reason |", "|---|---|---|---|"]
        for (purpose, status, reason), n in counts[name].most_common():
            lines.append(f"| {n} | {purpose} | {status} | {reason} |")
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("stores", nargs="+")
    parser.add_argument("--names", help="comma-separated records (default: all)")
    parser.add_argument("--reason-chars", type=int, default=80)
    args = parser.parse_args(argv)
    names = {n for n in (args.names or "").split(",") if n} or None
    merged: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for store in args.stores:
        for name, c in verdicts(store, names, args.reason_chars).items():
            merged[name].update(c)
    print(render(merged))
    return 0


if __name__ == "__main__":
    sys.exit(main())
