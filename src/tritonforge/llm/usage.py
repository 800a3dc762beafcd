"""Token and cost accounting for one run: a typed record per request and the budget they draw on.

Every request the LLM proposer or test generator makes is charged to one ``TokenBudget`` shared by
the run. Before a request the budget says how many reply tokens it may ask for (or that it may
not ask at all), so a run stops *before* it overspends rather than after. Each request leaves a
``UsageRecord`` (what for, which round, tokens, cost, outcome) that the run store persists and
the report sums; ``ledger_path`` also appends them as JSON lines next to the transcript.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import threading
from dataclasses import dataclass
from pathlib import Path

from ..model.serialize import register
from .types import Usage

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Pricing:
    """US dollars per million tokens; zeros (the default) for local servers."""

    input_per_mtok: float = 0.0
    output_per_mtok: float = 0.0

    def cost(self, usage: Usage) -> float:
        return (usage.prompt_tokens * self.input_per_mtok
                + usage.completion_tokens * self.output_per_mtok) / 1e6


@dataclass(frozen=True)
class UsageRecord:
    """One request: why it was made, what it cost, and how its reply fared."""

    seq: int                   # order within the run
    purpose: str               # "propose" | "repair" | "testgen"
    model: str
    request_key: str           # types.request_key of the messages: joins the transcript
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float
    round: int | None = None   # optimization round, when the loop gave one
    turn: int = 1              # 1 for the first ask, 2+ for follow-ups after a rejected reply
    outcome: str = ""          # "candidate" | "rejected: <reason>" | "error: <reason>"
    estimated: bool = False    # the server reported no usage; counted from text lengths
    latency_s: float = 0.0
    attempts: int = 1
    replayed: bool = False

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class TokenBudget:
    """The tokens (and optionally dollars) a run may spend on LLM requests.

    ``max_tokens <= 0`` and ``max_cost_usd is None`` mean no limit of that kind. Thread-safe: the
    proposer may be called from several threads.
    """

    def __init__(self, max_tokens: int = 200_000, *, max_cost_usd: float | None = None,
                 pricing: Pricing = Pricing(), ledger_path: str | Path | None = None,
                 min_reply_tokens: int = 1024):
        self.max_tokens = int(max_tokens)
        self.max_cost_usd = max_cost_usd
        self.pricing = pricing
        self.min_reply_tokens = min_reply_tokens
        self.ledger_path = Path(ledger_path) if ledger_path else None
        self._records: list[UsageRecord] = []
        self._used = Usage()
        self._cost = 0.0
        self._stop_reason = ""
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return (f"TokenBudget(used={self._used.total_tokens}, max_tokens={self.max_tokens}, "
                f"cost_usd={self._cost:.4f})")

    @property
    def used(self) -> Usage:
        return self._used

    @property
    def cost_usd(self) -> float:
        return self._cost

    @property
    def records(self) -> tuple[UsageRecord, ...]:
        return tuple(self._records)

    @property
    def remaining_tokens(self) -> int | None:
        if self.max_tokens <= 0:
            return None
        return max(0, self.max_tokens - self._used.total_tokens)

    @property
    def exhausted(self) -> bool:
        return bool(self._stop_reason)

    @property
    def stop_reason(self) -> str:
        """Why the budget refused a request ("" while it has not)."""
        return self._stop_reason

    def plan(self, prompt_tokens: int, want_reply_tokens: int) -> int | None:
        """Reply tokens the next request may ask for, or None when the budget cannot afford it.

        ``prompt_tokens`` is an estimate (``types.estimate_tokens``). A request is refused when
        fewer than ``min_reply_tokens`` would be left for the reply, or when the cost limit is
        already reached; otherwise max_tokens is trimmed to what is left.
        """
        with self._lock:
            if self.max_cost_usd is not None and self._cost >= self.max_cost_usd:
                self._stop_reason = (f"cost budget reached: ${self._cost:.4f} of "
                                     f"${self.max_cost_usd:.4f}")
            left = self.remaining_tokens
            if left is not None and left - prompt_tokens < min(self.min_reply_tokens,
                                                                 want_reply_tokens):
                self._stop_reason = (f"token budget reached: {self._used.total_tokens} of "
                                     f"{self.max_tokens} used, the next request needs about "
                                     f"{prompt_tokens} + {self.min_reply_tokens}")
            if self._stop_reason:
                log.info("LLM budget: %s", self._stop_reason)
                return None
            return want_reply_tokens if left is None else min(want_reply_tokens,
                                                              left - prompt_tokens)

    def charge(self, *, purpose: str, model: str, request_key: str, usage: Usage,
               round: int | None = None, turn: int = 1, outcome: str = "",
               latency_s: float = 0.0, attempts: int = 1, replayed: bool = False) -> UsageRecord:
        """Add one request's usage and return (and keep) its record.

        Called once the reply has been judged, so that ``outcome`` is final in the ledger.
        """
        with self._lock:
            cost = self.pricing.cost(usage)
            record = UsageRecord(seq=len(self._records), purpose=purpose, model=model,
                                 request_key=request_key, prompt_tokens=usage.prompt_tokens,
                                 completion_tokens=usage.completion_tokens,
                                 cost_usd=round_cost(cost), round=round, turn=turn,
                                 outcome=outcome, estimated=usage.estimated,
                                 latency_s=latency_s, attempts=attempts, replayed=replayed)
            self._records.append(record)
            self._used = self._used + usage
            self._cost += cost
            if self.ledger_path is not None:
                self.ledger_path.parent.mkdir(parents=True, exist_ok=True)
                with self.ledger_path.open("a", encoding="utf-8") as fh:
                    fh.write(json.dumps(dataclasses.asdict(record)) + "\n")
            return record


def round_cost(cost: float) -> float:
    return round(cost, 6)


register(UsageRecord)    # the run store keeps them (kind "llm_usage")
