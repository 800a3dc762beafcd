"""Where a pass's records spent their wall time, phase by phase, from its records.jsonl.

    python scripts/pass_phases.py RECORDS [GROUP_FILE ...]

Each record of ``bench optimize`` carries ``phases`` (seconds by phase: baseline, profile, cases,
propose, verify, repair, time, final check) beside ``wall_s``. Prints a Markdown table per group
(every record, then the records named in each GROUP_FILE, one name a line, ``#`` comments): per
phase, the records that ran it, the median and the largest seconds, and the share of the group's
summed wall time; then the share of the wall in no phase (generated cases made before the search,
the setup between phases). Issue 29 asks where a 120 s budget goes before the first candidate is
verified; records written before phases were recorded are left out.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path


def read_records(path: str) -> list[dict]:
    """The last line of each record name in ``path`` (a resumed pass appends)."""
    out: dict[str, dict] = {}
    for line in Path(path).read_text().splitlines():
        line = line.strip()
        if not line:
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:      # a line cut by a killed call
            continue
        out[rec["name"]] = rec
    return list(out.values())


def read_names(path: str) -> list[str]:
    return [ln.strip() for ln in Path(path).read_text().splitlines()
            if ln.strip() and not ln.lstrip().startswith("#")]


def phase_table(records: list[dict], title: str) -> str:
    """The Markdown table of one group (see the module docstring)."""
    timed = [r for r in records if r.get("phases")]
    lines = [f"### {title} ({len(timed)} record(s) with phases)", ""]
    if not timed:
        return "\n".join(lines + ["no record with phase times", ""])
    order: list[str] = []
    for r in timed:
        order += [p for p in r["phases"] if p not in order]
    wall = sum(r["wall_s"] for r in timed)
    lines += ["| phase | records | median s | largest s | share of wall |", "|---|---|---|---|---|"]
    in_phases = 0.0
    for p in order:
        secs = [r["phases"][p] for r in timed if p in r["phases"]]
        in_phases += sum(secs)
        lines.append(f"| {p} | {len(secs)} | {statistics.median(secs):.1f} | {max(secs):.1f} | "
                     f"{100 * sum(secs) / wall:.0f}% |" if wall > 0 else
                     f"| {p} | {len(secs)} | {statistics.median(secs):.1f} | {max(secs):.1f} | - |")
    if wall > 0:
        lines.append(f"| (no phase) | {len(timed)} | - | - | {100 * max(wall - in_phases, 0) / wall:.0f}% |")
    return "\n".join(lines + [""])


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    records = read_records(argv[0])
    out = [phase_table(records, "all")]
    for group in argv[1:]:
        names = set(read_names(group))
        out.append(phase_table([r for r in records if r["name"] in names], Path(group).stem))
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
