"""The unified diff between the original and the faster file (report.optimize and report.html both
show it; kept here so that neither imports the other)."""

from __future__ import annotations

import difflib


def unified_diff(original: str, best: str, name: str) -> str:
    return "".join(difflib.unified_diff(original.splitlines(keepends=True),
                                        best.splitlines(keepends=True),
                                        f"a/{name}", f"b/{name}"))
