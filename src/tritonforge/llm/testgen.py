"""Ask a model for test cases (the paper's test generator), in the project's TOML spec format.

Optional: TritonForge's own testgen traces a file's tests and draws odd shapes without a model.
The reply must hold exactly one ```toml block that ``tasks.spec.parse_spec`` accepts and whose
cases call the given entry functions; otherwise the reason goes back for another turn.

This module checks the form only. Whether the cases are *meaningful* is the caller's job: it must
run the ORIGINAL file on every case (in the worker) and drop or reject the spec when the original
fails on a case, before any case is used to judge candidates.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from ..errors import SpecError
from ..model import SpecCall
from ..tasks.spec import SpecDocument, parse_spec
from .errors import LLMConfigError, LLMError, ReplayMiss
from .parse import fenced_blocks
from .prompts import PromptSet
from .types import ChatClient, Message, estimate_tokens, request_key
from .usage import TokenBudget

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TestgenResult:
    """A parsed spec (``ok``), or the last reason the model's replies were refused."""

    ok: bool
    spec: SpecDocument | None = None
    spec_text: str = ""
    reason: str = ""
    turns: int = 0

    __test__ = False     # not a pytest test class despite the name


def check_spec_reply(text: str, entries: Sequence[str]) -> tuple[SpecDocument | None, str, str]:
    """(spec, spec_text, "") for a well-formed reply, else (None, "", reason)."""
    blocks, _ = fenced_blocks(text)
    toml = [b for b in blocks if b.lang == "toml"]
    if not toml:
        toml = [b for b in blocks if not b.lang] if len(blocks) == 1 else []
    if not toml:
        return None, "", "no ```toml block: put the whole spec in one block starting with ```toml"
    if len(toml) > 1:
        return None, "", f"{len(toml)} ```toml blocks: the reply must hold exactly one"
    if not toml[0].closed:
        return None, "", "the ```toml block is not closed with ``` (reply cut off?)"
    spec_text = toml[0].body
    try:
        spec = parse_spec(spec_text, origin="<llm spec>")
    except SpecError as exc:
        return None, "", f"the spec does not parse: {exc.render()}"
    unknown = sorted({c.recipe.entry for c in spec.cases
                      if isinstance(c.recipe, SpecCall) and c.recipe.entry not in entries})
    if unknown:
        return None, "", (f"cases call {', '.join(unknown)}, which is not an entry function; "
                          f"use {', '.join(entries)}")
    if not spec.cases or all(c.role.value != "correctness" for c in spec.cases):
        return None, "", "the spec has no correctness case; add small and odd-sized ones"
    return spec, spec_text, ""


def generate_spec(client: ChatClient, source: str, entries: Sequence[str], *,
                  budget: TokenBudget, templates_dir: str | Path | None = None,
                  prompts: PromptSet | None = None, max_turns: int = 3,
                  max_reply_tokens: int = 4096, temperature: float = 0.2) -> TestgenResult:
    """Ask ``client`` for a case spec for ``entries`` of ``source``; see the module docstring.

    The caller must validate the cases by running the original before using them.
    """
    prompts = prompts or PromptSet(templates_dir)
    model = getattr(client, "model", "") or "llm"
    messages: list[Message] = prompts.testgen(source, entries)
    reason = ""
    for turn in range(1, max_turns + 1):
        max_tokens = budget.plan(sum(estimate_tokens(m.content) for m in messages),
                                 max_reply_tokens)
        if max_tokens is None:
            return TestgenResult(False, reason=budget.stop_reason, turns=turn - 1)
        key = request_key(messages)
        try:
            reply = client.complete(messages, max_tokens=max_tokens, temperature=temperature)
        except (LLMConfigError, ReplayMiss):
            raise
        except LLMError as exc:
            return TestgenResult(False, reason=str(exc), turns=turn)
        spec, spec_text, reason = check_spec_reply(reply.text, entries)
        budget.charge(purpose="testgen", model=reply.model or model, request_key=key,
                      usage=reply.usage, turn=turn,
                      outcome="spec" if spec else f"rejected: {reason[:80]}",
                      latency_s=reply.latency_s, attempts=reply.attempts,
                      replayed=reply.replayed)
        if spec is not None:
            return TestgenResult(True, spec=spec, spec_text=spec_text, turns=turn)
        log.info("testgen reply rejected (turn %d): %s", turn, reason)
        messages = messages + [Message("assistant", reply.text), prompts.testgen_rejected(reason)]
    return TestgenResult(False, reason=reason, turns=max_turns)
