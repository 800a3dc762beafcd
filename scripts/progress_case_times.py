"""Seconds a pass's verification requests spent running generated cases vs the task's own cases.

    python scripts/progress_case_times.py PROGRESS_LOG

PROGRESS_LOG is the file ``Settings.progress_log`` names ($TRITONFORGE_PROGRESS_LOG; the pass
step of scripts/gpu_session.sh writes it into its session.tgz): one line per stage of every
request, stamped to the second. For each task: how many candidate verification requests there
were, and the seconds between each "run original|candidate CASE" line and the next line of the
same worker, summed over generated cases (ids ``gen-...``) and over the others. The stamps have a
one-second resolution, so a figure is a sum of whole seconds: a rough bound, not a timing.
"""

from __future__ import annotations

import collections
import re
import sys

LINE = re.compile(r"^(\d\d):(\d\d):(\d\d)(?:\.\d+)? pid (\d+)(?:/w\d+)? (\S+) "
                  r"\((\d+) variants, time=(\w+)\): (.*)$")
RUN = re.compile(r"run (original|candidate) (\S+)")


def case_times(lines) -> dict[str, tuple[int, int, int]]:
    """task -> (candidate requests, generated-case seconds, own-case seconds)."""
    per_worker: dict[str, list[tuple[int, str, str, str]]] = collections.defaultdict(list)
    for line in lines:
        m = LINE.match(line.strip())
        if m:
            h, mi, s = (int(x) for x in m.group(1, 2, 3))
            per_worker[m.group(4)].append((h * 3600 + mi * 60 + s, m.group(5), m.group(7), m.group(8)))
    requests: collections.Counter = collections.Counter()
    made: collections.Counter = collections.Counter()
    own: collections.Counter = collections.Counter()
    for events in per_worker.values():
        candidate = False
        for i, (at, task, timed, what) in enumerate(events):
            if what == "sent":
                candidate = False
            if what == "import candidate":
                candidate = True
                requests[task] += 1
            run = RUN.match(what)
            if candidate and timed == "False" and run and i + 1 < len(events):
                (made if run.group(2).startswith("gen-") else own)[task] += events[i + 1][0] - at
    return {t: (requests[t], made[t], own[t]) for t in requests}


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    with open(argv[0], encoding="utf-8") as f:
        times = case_times(f)
    print("| task | candidate requests | generated cases (s) | own cases (s) | generated per candidate (s) |")
    print("|---|---|---|---|---|")
    for task, (n, made, own) in sorted(times.items()):
        print(f"| {task} | {n} | {made} | {own} | {made / n:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
