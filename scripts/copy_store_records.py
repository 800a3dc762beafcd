#!/usr/bin/env python3
"""Copy finished optimize records from one run store into another, by name.

    python scripts/copy_store_records.py FROM.sqlite INTO.sqlite NAME[,NAME...]

Used when a later call forgot a record (``--redo``) and its re-run did not finish: the earlier
record goes back so that the table covers every record, and the results README says so. Only the
``optimize`` record rows move (the table reads those); the evaluations of the unfinished re-run
stay in INTO. Exits non-zero, naming it, if a record is missing from FROM.
"""

from __future__ import annotations

import sqlite3
import sys


def main(src: str, dst: str, names: list[str]) -> int:
    with sqlite3.connect(src) as a, sqlite3.connect(dst) as b:
        for name in names:
            row = a.execute("SELECT kind, key, body, created FROM records WHERE kind = 'optimize' "
                            "AND key = ?", (name,)).fetchone()
            if row is None:
                print(f"{src}: no optimize record for {name}", file=sys.stderr)
                return 1
            b.execute("INSERT OR REPLACE INTO records (kind, key, body, created) VALUES (?, ?, ?, ?)", row)
            print(f"copied {name}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 4:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1], sys.argv[2], sys.argv[3].split(",")))
