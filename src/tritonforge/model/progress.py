"""Progress of a long run, as the library reports it and a front end (the CLI's live display,
plain log lines, a notebook) shows it. The library never prints: it hands events to a sink."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class ProgressEvent:
    """Where an optimization run stands. Counts are cumulative over the run; ``None`` means not
    known yet (no timing so far, no budget set)."""

    phase: str                         # "baseline", "profile", "propose", "compile", "verify",
                                       # "time", "repair", "final-check", "done"
    round: int = 0
    compiled: int = 0
    verified: int = 0                  # candidates that passed verification
    timed: int = 0
    failed: int = 0
    best_speedup: float | None = None  # of the incumbent over the original, on the search cases
    best_low: float | None = None      # its lower confidence bound
    budget_left_s: float | None = None
    elapsed_s: float = 0.0
    message: str = ""


ProgressSink = Callable[[ProgressEvent], None]


def no_progress(event: ProgressEvent) -> None:
    """The default sink: drop every event."""
