"""Build the run's LLM pieces from Settings: the budget, the (recording) client, the proposer."""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

from ..config import Settings
from .client import build_client, llm_enabled
from .proposer import LLMProposer
from .usage import Pricing, TokenBudget


def budget_from_settings(settings: Settings, run_dir: str | Path | None = None) -> TokenBudget:
    """The run's token/cost budget; its ledger goes to ``<run_dir>/llm/usage.jsonl``."""
    llm = settings.llm
    return TokenBudget(
        llm.max_tokens,
        max_cost_usd=llm.max_cost_usd or None,
        pricing=Pricing(llm.price_in_per_mtok, llm.price_out_per_mtok),
        ledger_path=Path(run_dir) / "llm" / "usage.jsonl" if run_dir is not None else None)


def build_proposer(settings: Settings, run_dir: str | Path | None = None, *,
                   budget: TokenBudget | None = None,
                   env: Mapping[str, str] | None = None) -> LLMProposer | None:
    """The LLM proposer the settings ask for, or None when no model (and no replay) is set."""
    if not llm_enabled(settings):
        return None
    llm = settings.llm
    return LLMProposer(
        build_client(settings, run_dir, env),
        llm.templates_dir or None,
        budget=budget or budget_from_settings(settings, run_dir),
        max_reply_tokens=llm.max_reply_tokens,
        temperature=llm.temperature,
        candidates_per_round=llm.candidates_per_round)
