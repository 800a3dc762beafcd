"""The same records optimized on one GPU and on two: the wall ratio and the speedups side by side.

    python scripts/scaling_compare.py ONE_GPU_STATE ONE_GPU_RECORDS TWO_GPU_STATE TWO_GPU_RECORDS

Each STATE is the ``--out`` JSON of a ``tritonforge bench optimize`` run (its ``wall_s`` is the
run's wall time), each RECORDS its ``records.jsonl``. Prints a Markdown table: per record, the
speedup on one GPU and on two; then the two walls and their ratio (issue 30 asks for 1.8x or
more with two GPUs) and how many records reached the same success/failure verdict. The wall
ratio only where both runs finished the same records; otherwise the ratio of records a second. The step
``scaling`` of scripts/gpu_session.sh makes both runs in one device call.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def _records(path: str) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for line in Path(path).read_text().splitlines():
        line = line.strip()
        if line:
            rec = json.loads(line)
            out[rec["name"]] = rec
    return out


def compare(one_state: dict, one: dict[str, dict], two_state: dict, two: dict[str, dict]) -> str:
    """The Markdown comparison (see the module docstring)."""
    names = [n for n in one if n in two]
    lines = ["| record | speedup, 1 GPU | speedup, 2 GPUs | status, 1 GPU | status, 2 GPUs |",
             "|---|---|---|---|---|"]
    for n in names:
        a, b = one[n], two[n]
        lines.append(f"| {n} | {a['speedup']:.3f}x | {b['speedup']:.3f}x | {a['status']} | "
                     f"{b['status']} |")
    w1, w2 = float(one_state["wall_s"]), float(two_state["wall_s"])
    same = sum(1 for n in names if (one[n]["status"] == "success") == (two[n]["status"] == "success"))
    verdicts = f"same verdict (success or not) on {same} of {len(names)}"
    if set(one) == set(two) and one_state.get("finished", True) and two_state.get("finished", True):
        lines += ["", f"records in both: {len(names)}; wall on 1 GPU {w1:.0f} s, on 2 GPUs "
                      f"{w2:.0f} s: ratio {w1 / w2:.2f}x; {verdicts}"]
    else:
        # two runs that stopped at their budgets wrote different records: their walls are not
        # the same work (on two H200s, 6 records in 299 s against 8 in 184 s read as "1.62x")
        rate1, rate2 = len(one) / w1 if w1 else 0.0, len(two) / w2 if w2 else 0.0
        lines += ["", f"not the same records (a run stopped at its budget): 1 GPU wrote "
                      f"{len(one)} in {w1:.0f} s, 2 GPUs {len(two)} in {w2:.0f} s; no wall ratio. "
                      f"Records a second, 2 GPUs over 1: "
                      f"{rate2 / rate1 if rate1 else float('nan'):.2f}x; {verdicts}"]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    if len(argv) != 4:
        print("usage: scaling_compare.py ONE_GPU_STATE ONE_GPU_RECORDS TWO_GPU_STATE "
              "TWO_GPU_RECORDS", file=sys.stderr)
        return 2
    one_state, two_state = (json.loads(Path(p).read_text()) for p in (argv[0], argv[2]))
    print(compare(one_state, _records(argv[1]), two_state, _records(argv[3])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
