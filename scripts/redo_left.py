#!/usr/bin/env python3
"""Which of a call's REDO re-runs stored no new record (scripts/gpu_session.sh calls it after
the optimize step, so a call's log says what the next call must re-run):

    python3 scripts/redo_left.py STORE_SQLITE NAMES SINCE_EPOCH_S
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from tritonforge.bench.redo import redo_left  # noqa: E402
from tritonforge.store import RunStore  # noqa: E402


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    store_path, names, since = argv
    if not Path(store_path).is_file():
        print(f"redo_left: no store at {store_path}", file=sys.stderr)
        return 2
    wanted = [n for n in names.split(",") if n]
    left = redo_left(RunStore(Path(store_path)), wanted, float(since))
    print(f"REDO left ({len(left)} of {len(wanted)}): {','.join(left) if left else '-'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
