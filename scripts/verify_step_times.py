"""Where verification time goes: seconds per verification step, from a pass's progress log.

    python scripts/verify_step_times.py PROGRESS_LOG [--top N]

The worker reports each step of a verification (``VerifyOptions.progress``): "verify (first
calls)", "verify (seed S) ... CASE", "verify (recheck) ... CASE", "verify (probe)". A step lasts
until the next line of the same worker. Prints, per task, the seconds in each kind of step, and
the N slowest (task, step, case) of the log. Stamps of a millisecond; a step's figure includes
whatever the worker did before its next report.
"""

from __future__ import annotations

import argparse
import collections
import datetime
import re
import sys

LINE = re.compile(r"^(\d\d:\d\d:\d\d(?:\.\d+)?) pid \d+(/w\d+)? (\S+) "
                  r"\(\d+ variants, time=\w+\): (.*)$")
STEP = re.compile(r"^verify \((first calls|seed \d+|recheck|probe)\) \S+(?: (\S+))?$")


def _seconds(stamp: str) -> float:
    t = datetime.datetime.strptime(stamp, "%H:%M:%S.%f" if "." in stamp else "%H:%M:%S")
    return t.hour * 3600 + t.minute * 60 + t.second + t.microsecond / 1e6


def step_times(lines) -> list[tuple[str, str, str | None, float]]:
    """(task, step kind: first calls | seed | recheck | probe, case id or None, seconds) for
    every verification step of the log that a later line of its worker ends."""
    per_worker: dict[str, list[tuple[float, str, str]]] = collections.defaultdict(list)
    for line in lines:
        m = LINE.match(line.strip())
        if m and m.group(2):
            per_worker[m.group(2)].append((_seconds(m.group(1)), m.group(3), m.group(4)))
    out = []
    for events in per_worker.values():
        for (at, task, what), (after, _, _) in zip(events, events[1:]):
            m = STEP.match(what)
            if m:
                kind = "seed" if m.group(1).startswith("seed") else m.group(1)
                out.append((task, kind, m.group(2), round(after - at, 3)))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("log")
    ap.add_argument("--top", type=int, default=15)
    args = ap.parse_args(argv)
    with open(args.log, encoding="utf-8", errors="replace") as fh:
        steps = step_times(fh)
    kinds = ("first calls", "seed", "recheck", "probe")
    per_task: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for task, kind, _, s in steps:
        per_task[task][kind] += s
    print("| task | " + " | ".join(kinds) + " |")
    print("|---|" + "---|" * len(kinds))
    for task in sorted(per_task, key=lambda t: -sum(per_task[t].values())):
        print(f"| {task} | " + " | ".join(f"{per_task[task][k]:.1f}" for k in kinds) + " |")
    print()
    for task, kind, case, s in sorted(steps, key=lambda x: -x[3])[:args.top]:
        print(f"{s:8.1f} s  {task}  {kind}  {case or ''}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
