"""The search's state between rounds, as one typed value (search side).

Each round of ``search.stages`` takes a ``SearchState`` and returns the next one; nothing else
carries the search's knowledge from round to round. The final check (``search.final_check``) reads
the chain, the ranked and split candidates and the runners-up from the last state.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from ..model import Candidate, Diagnosis, HistoryEntry, Task

# (estimated speedup over the original, order among equals, candidate)
Ranked = tuple[float, int, Candidate]


@dataclass(frozen=True)
class SearchState:
    """Where the search stands after a round (``round`` 0: before the first).

    ``task``: the cases that can judge a candidate (the original's failing cases dropped);
    ``search_ids`` the cases timed in the rounds; ``verify_tiers`` the verification cascade's
    tiers (``search.cases.verification_tiers``). ``factor``: the incumbent's estimated speedup
    over the original (the product of the accepted speedups). ``stale``: rounds since the last
    acceptance; the search stops when it reaches ``patience``."""

    task: Task
    original: Candidate
    incumbent: Candidate
    search_ids: tuple[str, ...]
    verify_tiers: tuple[tuple[str, ...], ...]
    diagnosis: Diagnosis | None = None
    round: int = 0
    stale: int = 0
    patience: int = 2
    sliver_cut: bool = False           # the kernels looked a sliver of the profiled case
    config_search: bool = False        # the next round is config search alone (config_search_only)
    config_search_done: bool = False   # a config-search round ran already
    spare_round: bool = False          # the round for time left over ran (loop.SPARE_SHARE)
    open_round_done: bool = False      # a round proposed with every proposer (not config alone)
    branch: Candidate | None = None    # the next round proposes from this near miss (search.branch)
    branched: tuple[str, ...] = ()     # near misses branched from already (hashes)
    factor: float = 1.0
    chain: tuple[Candidate, ...] = ()  # every accepted incumbent, oldest first
    ranked: tuple[Ranked, ...] = ()    # verified and timed, faster or accepted
    split: tuple[Ranked, ...] = ()     # faster overall, vetoed by one size
    runners: tuple[Ranked, ...] = ()   # accepted, beaten in their round
    history: tuple[HistoryEntry, ...] = ()
    notes: tuple[str, ...] = field(default=())
    last_round_s: float = 0.0
    tried: int = 0
    first_verified_s: float | None = None   # search start to the first candidate that passed

    @property
    def verify_ids(self) -> tuple[str, ...]:
        """Every case a candidate is verified on in the rounds, cheapest tier first."""
        return tuple(cid for tier in self.verify_tiers for cid in tier)

    def noted(self, *notes: str) -> "SearchState":
        return replace(self, notes=self.notes + tuple(notes))

    def without_cases(self, unsafe: set[str]) -> "SearchState":
        """The state with the cases in ``unsafe`` gone from the task, the tiers and the timing
        (the timing keeps its cases if none would be left: the final check decides)."""
        if not unsafe:
            return self
        tiers = tuple(t for t in (tuple(c for c in tier if c not in unsafe)
                                  for tier in self.verify_tiers) if t)
        return replace(self, task=replace(self.task, cases=tuple(
            c for c in self.task.cases if c.id not in unsafe)), verify_tiers=tiers,
            search_ids=tuple(i for i in self.search_ids if i not in unsafe) or self.search_ids)
