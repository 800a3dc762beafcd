#!/usr/bin/env python3
"""How big this session's submission is, against the workplace's limits, before it is too late.

A session's commits land only if, together, their diffs (as text, binary files base85-encoded)
add up to at most 256 MiB and they pack to at most 512 MiB; over either, none of them lands.
Session 12 lost all its work that way: it committed a cumulative run store (~20 MiB gzipped)
after each of seven GPU calls, and every store added and later replaced counted twice.

    python3 scripts/submission_size.py [--base REV] [--limit-mib 256] [--warn-mib 150]

BASE defaults to the commit this checkout's branch was created at (the first entry of its
reflog), which is what the session started from. Prints each commit's diff size, the largest
files, the total and the pack size; exits 1 when the diff total passes --warn-mib (default 150,
well under the limit, since a later store commit can double it), 0 otherwise.
"""

from __future__ import annotations

import argparse
import subprocess
import sys

MIB = 1024 * 1024


def _git(*args: str, stdin: bytes | None = None) -> bytes:
    return subprocess.run(("git", *args), input=stdin, capture_output=True, check=True).stdout


def default_base() -> str:
    """The commit the current branch was created at: the oldest entry of its reflog."""
    branch = _git("rev-parse", "--abbrev-ref", "HEAD").decode().strip()
    entries = _git("reflog", "show", "--format=%H", f"refs/heads/{branch}").decode().split()
    if not entries:
        raise SystemExit("no reflog for the branch: pass --base REV (the commit the session "
                         "started from)")
    return entries[-1]


def commit_diff_bytes(commit: str) -> tuple[int, list[tuple[int, str]]]:
    """The commit's diff size as text (with --binary, as a submission is counted) and the size
    of each file's part of it."""
    patch = _git("show", "--binary", "--format=", "--no-renames", commit)
    files: list[tuple[int, str]] = []
    current, size = "", 0
    for line in patch.split(b"\n"):
        if line.startswith(b"diff --git "):
            if current:
                files.append((size, current))
            current, size = line.decode(errors="replace").split(" b/", 1)[-1], 0
        size += len(line) + 1
    if current:
        files.append((size, current))
    return len(patch), files


def pack_bytes(base: str) -> int:
    """Bytes of the objects reachable from HEAD and not from BASE, packed as git sends them."""
    return len(_git("pack-objects", "--revs", "--stdout", "--quiet",
                    stdin=f"HEAD\n^{base}\n".encode()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", default=None, help="the commit the session started from")
    parser.add_argument("--limit-mib", type=float, default=256.0)
    parser.add_argument("--warn-mib", type=float, default=150.0)
    args = parser.parse_args(argv)
    base = args.base or default_base()
    commits = _git("rev-list", "--reverse", f"{base}..HEAD").decode().split()
    total, biggest = 0, []
    for commit in commits:
        size, files = commit_diff_bytes(commit)
        total += size
        biggest += [(s, f"{commit[:8]} {name}") for s, name in files]
        subject = _git("log", "-1", "--format=%s", commit).decode().strip()[:70]
        print(f"{commit[:8]}  {size / MIB:8.2f} MiB  {subject}")
    biggest.sort(reverse=True)
    if biggest:
        print("\nlargest file diffs:")
        for size, label in biggest[:8]:
            print(f"  {size / MIB:8.2f} MiB  {label}")
    packed = pack_bytes(base) if commits else 0
    print(f"\n{len(commits)} commits since {base[:8]}: diffs {total / MIB:.1f} MiB of "
          f"{args.limit_mib:.0f} MiB allowed; packed {packed / MIB:.1f} MiB of 512 MiB")
    if total > args.warn_mib * MIB or packed > 400 * MIB:
        print(f"OVER the warning line ({args.warn_mib:.0f} MiB): commit no more stores; "
              "squash nothing that landed, but drop store commits that a later one replaces",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
