"""The LLM proposer: asks any chat model for faster variants and for repairs of failed ones.

It implements ``search.proposer.Proposer`` and is optional: the rule engine works without it.
Every reply goes through the same gate before it becomes a ``Candidate``:

    reply ─► parse.extract_source (one ```python block, valid Python, kernels and entries kept,
             not unchanged) ─► static policy (verify.policy.check_source) ─► not a duplicate

A reply refused at the gate is sent back once more with the reason (a follow-up turn, up to
``max_turns`` per candidate). Nothing here imports or runs the code; the loop evaluates accepted
candidates in the isolated worker. Each request is charged to the run's ``TokenBudget`` with a
``UsageRecord``; when the budget cannot afford the next request the proposer stops asking
(``propose`` returns fewer or no candidates, ``stop_reason`` says why).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from ..model import Candidate, ProposalContext, RepairRequest
from .errors import LLMConfigError, LLMError, ReplayMiss
from .parse import extract_source
from .prompts import PromptSet
from .types import ChatClient, Message, estimate_tokens, request_key
from .usage import TokenBudget

log = logging.getLogger(__name__)

PolicyCheck = Callable[[str], Any]   # returns an object with .ok and .reasons (or .reason)


@dataclass(frozen=True)
class Rejection:
    """A reply that did not become a candidate, and why."""

    purpose: str          # "propose" | "repair"
    round: int
    turn: int
    kind: str             # "format" | "policy" | "duplicate" | "error" | "budget"
    reason: str
    request_key: str = ""


def _policy_reasons(result: Any) -> str:
    for attr in ("reasons", "violations", "reason", "message"):
        value = getattr(result, attr, None)
        if value:
            return "; ".join(str(v) for v in value) if isinstance(value, (list, tuple)) \
                else str(value)
    return "refused by the static policy"


class LLMProposer:
    """Propose and repair Triton kernel files with a chat model behind ``ChatClient``.

    ``policy_check``: True uses ``tritonforge.verify.policy.check_source`` (imported on first
    use; if that module is missing the check is SKIPPED with a warning and ``policy_active`` is
    False), False disables it, or pass a callable ``check(source) -> result with .ok``.
    """

    def __init__(self, client: ChatClient, templates_dir: str | Path | None = None, *,
                 budget: TokenBudget, policy_check: bool | PolicyCheck = True,
                 max_reply_tokens: int = 8192, temperature: float = 0.2,
                 candidates_per_round: int = 2, max_turns: int = 3,
                 prompts: PromptSet | None = None):
        self.client = client
        self.model = getattr(client, "model", "") or "llm"
        self.name = f"llm:{self.model}"
        self.budget = budget
        self.prompts = prompts or PromptSet(templates_dir)
        self.max_reply_tokens = max_reply_tokens
        self.temperature = temperature
        self.candidates_per_round = max(1, candidates_per_round)
        self.max_turns = max(1, max_turns)
        self._policy_setting = policy_check
        self._policy: PolicyCheck | None = None
        self._policy_module: Any = None
        self._policy_resolved = False
        self._rejections: list[Rejection] = []

    def __repr__(self) -> str:
        return f"LLMProposer({self.client!r}, budget={self.budget!r})"

    # ------------------------------------------------------------------ public
    @property
    def rejections(self) -> tuple[Rejection, ...]:
        return tuple(self._rejections)

    @property
    def stop_reason(self) -> str:
        return self.budget.stop_reason

    @property
    def policy_active(self) -> bool:
        """Whether replies are checked by a static policy (False if it was skipped)."""
        return self._policy_checker() is not None

    def propose(self, context: ProposalContext) -> list[Candidate]:
        count = min(context.budget, self.candidates_per_round)
        seen = {h.candidate: h.origin for h in context.history}
        seen[context.incumbent.hash] = context.incumbent.origin
        out: list[Candidate] = []
        for index in range(1, count + 1):
            if self.budget.exhausted:
                break
            messages = self.prompts.propose(context, index=index, count=count,
                                            earlier=[c.description for c in out])
            cand = self._converse(messages, purpose="propose", round=context.round,
                                  entries=context.task.entries,
                                  given_source=context.incumbent.source,
                                  original=context.task.source, seen=seen,
                                  origin=self.name, parent=context.incumbent.hash)
            if cand is not None:
                seen[cand.hash] = cand.origin
                out.append(cand)
        return out

    def repair(self, request: RepairRequest) -> Candidate | None:
        ctx = request.context
        seen = {h.candidate: h.origin for h in ctx.history}
        seen[ctx.incumbent.hash] = ctx.incumbent.origin     # handing back the incumbent is no fix
        seen[request.candidate.hash] = request.candidate.origin
        return self._converse(self.prompts.repair(request), purpose="repair", round=ctx.round,
                              entries=ctx.task.entries, given_source=request.candidate.source,
                              original=ctx.task.source, seen=seen, origin=f"repair:{self.name}",
                              parent=request.candidate.hash)

    # ------------------------------------------------------------------ internals
    def _policy_checker(self) -> PolicyCheck | None:
        if not self._policy_resolved:
            self._policy_resolved = True
            if callable(self._policy_setting):
                self._policy = self._policy_setting
            elif self._policy_setting:
                try:
                    from ..verify import policy   # inside: if absent, replies go unchecked
                except ImportError:
                    log.warning("POLICY CHECK SKIPPED: tritonforge.verify.policy is not "
                                "available, so LLM replies are not statically checked before "
                                "the worker imports them")
                else:
                    self._policy = policy.check_source
                    self._policy_module = policy
        return self._policy

    def _check_policy(self, source: str, original: str) -> Any:
        """Run the policy; the real one also allows what the task's original file imports."""
        check = self._policy_checker()
        module = self._policy_module
        if module is not None and hasattr(module, "imports_of") \
                and hasattr(module, "DEFAULT_ALLOWED_IMPORTS"):
            allowed = module.DEFAULT_ALLOWED_IMPORTS | module.imports_of(original)
            return module.check_source(source, allowed_imports=allowed)
        return check(source)

    def _reject(self, purpose: str, round: int, turn: int, kind: str, reason: str,
                key: str = "") -> None:
        log.info("%s %s reply rejected (turn %d, %s): %s", self.name, purpose, turn, kind, reason)
        self._rejections.append(Rejection(purpose, round, turn, kind, reason, key))

    def _judge(self, text: str, entries: Sequence[str], given_source: str, original: str,
               seen: dict[str, str]) -> tuple[str, str, str, str]:
        """(kind, reason, source, explanation); kind "" means accepted."""
        parsed = extract_source(text, required_entries=entries, original_source=given_source)
        if not parsed.ok:
            return "format", parsed.reason, "", parsed.explanation
        if self._policy_checker() is not None:
            result = self._check_policy(parsed.source, original)
            if not getattr(result, "ok", False):
                return "policy", _policy_reasons(result), "", parsed.explanation
        h = Candidate(parsed.source, "").hash
        if h in seen:
            return ("duplicate", f"this file is identical to a candidate already tried "
                                 f"({seen[h]}); propose a different change", "",
                    parsed.explanation)
        return "", "", parsed.source, parsed.explanation

    def _converse(self, messages: list[Message], *, purpose: str, round: int,
                  entries: Sequence[str], given_source: str, original: str,
                  seen: dict[str, str], origin: str, parent: str) -> Candidate | None:
        for turn in range(1, self.max_turns + 1):
            prompt_estimate = sum(estimate_tokens(m.content) for m in messages)
            max_tokens = self.budget.plan(prompt_estimate, self.max_reply_tokens)
            if max_tokens is None:
                self._reject(purpose, round, turn, "budget", self.budget.stop_reason)
                return None
            key = request_key(messages)
            try:
                reply = self.client.complete(messages, max_tokens=max_tokens,
                                             temperature=self.temperature)
            except (LLMConfigError, ReplayMiss):
                raise       # the user must fix the settings / the replay is not faithful
            except LLMError as exc:
                self._reject(purpose, round, turn, "error", str(exc), key)
                return None
            kind, reason, source, explanation = self._judge(reply.text, entries, given_source,
                                                            original, seen)
            self.budget.charge(purpose=purpose, model=reply.model or self.model,
                               request_key=key, usage=reply.usage, round=round, turn=turn,
                               outcome="candidate" if not kind else f"rejected: {kind}",
                               latency_s=reply.latency_s, attempts=reply.attempts,
                               replayed=reply.replayed)
            if not kind:
                return Candidate(source=source, origin=origin, parent=parent,
                                 description=explanation or f"{purpose} by {self.model}")
            self._reject(purpose, round, turn, kind, reason, key)
            messages = messages + [Message("assistant", reply.text),
                                   self.prompts.rejected(reason, kind=kind, entries=entries)]
        return None
