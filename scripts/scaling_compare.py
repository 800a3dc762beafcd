"""The same records optimized on one GPU and on two: the wall ratio and the speedups side by side.

    python scripts/scaling_compare.py ONE_GPU_STATE ONE_GPU_RECORDS TWO_GPU_STATE TWO_GPU_RECORDS

Each STATE is the ``--out`` JSON of a ``tritonforge bench optimize`` run (its ``wall_s`` is the
run's wall time), each RECORDS its ``records.jsonl``. Prints a Markdown table: per record, the
speedup on one GPU and on two; then the two walls and their ratio (issue 30 asks for 1.8x or
more with two GPUs) and how many records reached the same success/failure verdict. The step
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
    lines += ["", f"records in both: {len(names)}; wall on 1 GPU {w1:.0f} s, on 2 GPUs {w2:.0f} s: "
                  f"ratio {w1 / w2:.2f}x; same verdict (success or not) on {same} of {len(names)}"]
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
