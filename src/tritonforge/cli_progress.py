"""The CLI's view of a long run: a live status panel on a terminal, plain lines elsewhere.

The library hands ``model.progress.ProgressEvent``s to a sink; this module (CLI side, never
imported by the library) turns them into output on stderr. On a terminal with ``rich`` installed
the status (phase, round, candidates compiled / verified / timed, best speedup with its lower
bound, budget left) is one live panel and the run's notes scroll above it. Without a terminal, or
without rich (the GPU image has none), each change of phase and each note is one plain line, so
logs stay readable and greppable.
"""

from __future__ import annotations

import sys
from typing import TextIO

from .model.progress import ProgressEvent


def status_text(event: ProgressEvent) -> str:
    """One line that says where a run stands, e.g.
    ``round 2 time | 5 compiled, 4 verified, 3 timed, 1 failed | best 1.31x (>= 1.22x) | 84 s left``."""
    where = event.phase if not event.round else f"round {event.round} {event.phase}"
    counts = (f"{event.compiled} compiled, {event.verified} verified, {event.timed} timed, "
              f"{event.failed} failed")
    parts = [where, counts]
    if event.best_speedup is not None:
        low = f" (>= {event.best_low:.2f}x)" if event.best_low is not None else ""
        parts.append(f"best {event.best_speedup:.2f}x{low}")
    if event.budget_left_s is not None:
        parts.append(f"{event.budget_left_s:.0f} s left")
    parts.append(f"{event.elapsed_s:.0f} s")
    return " | ".join(parts)


class PlainProgress:
    """Plain lines: one per change of phase or round, and one per note."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self._last: tuple[str, int] | None = None

    def __call__(self, event: ProgressEvent) -> None:
        key = (event.phase, event.round)
        if key != self._last:
            self._last = key
            print(f"[{status_text(event)}]", file=self.stream, flush=True)
        if event.message:
            print(f"  {event.message}", file=self.stream, flush=True)

    def close(self) -> None:
        pass


class LiveProgress:
    """A rich live panel holding the latest status; notes are printed above it."""

    def __init__(self, stream: TextIO) -> None:
        from rich.console import Console   # optional (the ui extra); the GPU image has none
        from rich.live import Live
        from rich.text import Text

        self._text = Text
        self.console = Console(file=stream)
        self.live = Live(Text("starting"), console=self.console, refresh_per_second=4,
                         transient=False)
        self.live.start()

    def __call__(self, event: ProgressEvent) -> None:
        if event.message:
            self.console.print(event.message, markup=False, highlight=False)
        self.live.update(self._text(status_text(event), style="bold"))

    def close(self) -> None:
        self.live.stop()


def progress_display(stream: TextIO | None = None, *, live: bool | None = None):
    """The sink the CLI passes to ``api.optimize``: live on a terminal when rich is importable,
    else plain lines. ``live`` forces the choice (tests). Call ``.close()`` when the run ends."""
    stream = stream or sys.stderr
    if live is None:
        live = bool(getattr(stream, "isatty", lambda: False)())
    if live:
        try:
            return LiveProgress(stream)
        except ImportError:
            pass
    return PlainProgress(stream)
