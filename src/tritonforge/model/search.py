"""What the optimization loop passes around: candidates, proposals, decisions and history."""

from __future__ import annotations

from dataclasses import dataclass, field

from .evaluation import Status
from .profile import Diagnosis, Profile
from .task import Task, content_hash


@dataclass(frozen=True)
class Candidate:
    """A version of the task's source, content-addressed, with where it came from.

    ``origin`` names the proposer and what it did, e.g. "original", "rules:autotune",
    "llm:gpt-4o", "repair:rules:smaller-tiles".
    """

    source: str
    origin: str
    parent: str | None = None
    description: str = ""

    @property
    def hash(self) -> str:
        return content_hash(self.source)


@dataclass(frozen=True)
class HistoryEntry:
    """One tried candidate, as proposers (and the LLM prompt) see the history."""

    candidate: str          # hash
    origin: str
    description: str
    status: Status
    speedup: float | None = None
    reason: str = ""


@dataclass(frozen=True)
class HardwareInfo:
    name: str
    interpreted: bool
    peak_bw_gbs: float | None = None
    peak_tflops: float | None = None
    sm_count: int = 0
    capability: str = ""        # "9.0" (DeviceInfo.capability); "" unknown: the search assumes sm_90


@dataclass(frozen=True)
class ProposalContext:
    """Everything a proposer may use to suggest the next candidates."""

    task: Task
    incumbent: Candidate
    round: int
    hardware: HardwareInfo
    profile: Profile | None = None
    diagnosis: Diagnosis | None = None
    history: tuple[HistoryEntry, ...] = ()
    budget: int = 8         # how many candidates the loop wants at most this round
    # a near-roofline stop: the loop runs one round of the config search (search.config_search)
    # and nothing else; proposers that are not a config search may return nothing
    config_search_only: bool = False
    # the incumbent is a near miss the search branches from (search.branch), not the accepted
    # incumbent: what a proposer remembers proposing from the incumbent does not hold for it
    branch: bool = False


@dataclass(frozen=True)
class RepairRequest:
    """A failed candidate sent back to a proposer with what went wrong."""

    context: ProposalContext
    candidate: Candidate
    status: Status
    error: str              # compile/run error text or the verifier's mismatch report
    attempt: int


@dataclass(frozen=True)
class Decision:
    """The arbiter's answer on one verified candidate."""

    candidate: str
    accepted: bool
    speedup: float                      # sum of incumbent medians / sum of candidate medians
    speedup_low: float                  # lower confidence bound
    geomean: float
    worst_case_ratio: float             # the slowest case's candidate/incumbent time ratio
    reason: str
    per_case: tuple[tuple[str, float], ...] = field(default=())
