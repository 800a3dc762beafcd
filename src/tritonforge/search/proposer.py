"""The one interface every proposer implements: the rule/search engine and the LLM alike.

A proposer turns what the loop knows (task, incumbent, profile, diagnosis, history) into new
candidate sources; ``repair`` takes a candidate that failed (compile error, crash, mismatch) with
its error text and may return a fixed one. Proposers never evaluate: the loop does, through the
same verifier and arbiter for every origin.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from ..model import Candidate, ProposalContext, RepairRequest


@runtime_checkable
class Proposer(Protocol):
    name: str

    def propose(self, context: ProposalContext) -> list[Candidate]:
        """Up to ``context.budget`` new candidates, best first. An empty list means: no ideas."""
        ...

    def repair(self, request: RepairRequest) -> Candidate | None:
        """A fixed version of ``request.candidate``, or None when this proposer cannot help."""
        ...
