"""TokenBudget: records each request, trims max_tokens, refuses before overspending."""

from __future__ import annotations

import json

from tritonforge.llm.types import Usage
from tritonforge.llm.usage import Pricing, TokenBudget


def charge(b: TokenBudget, p: int, c: int, **kw):
    return b.charge(purpose="propose", model="m", request_key="k", usage=Usage(p, c), **kw)


def test_records_tokens_cost_and_ledger(tmp_path):
    ledger = tmp_path / "llm" / "usage.jsonl"
    b = TokenBudget(10_000, pricing=Pricing(2.0, 8.0), ledger_path=ledger)
    r = charge(b, 1000, 500, round=2, outcome="candidate")
    assert (r.seq, r.total_tokens, r.round) == (0, 1500, 2)
    assert abs(r.cost_usd - (1000 * 2 + 500 * 8) / 1e6) < 1e-12
    charge(b, 10, 10)
    assert b.used == Usage(1010, 510) and len(b.records) == 2
    lines = [json.loads(x) for x in ledger.read_text().splitlines()]
    assert [x["seq"] for x in lines] == [0, 1] and lines[0]["outcome"] == "candidate"


def test_plan_trims_max_tokens_then_refuses():
    b = TokenBudget(5000, min_reply_tokens=1000)
    assert b.plan(1000, 8192) == 4000          # trimmed to what is left
    charge(b, 2000, 1000)
    assert b.plan(500, 8192) == 1500
    assert b.plan(1500, 8192) is None          # 500 left for a reply < 1000
    assert b.exhausted and "token budget" in b.stop_reason


def test_unlimited_budget_never_refuses():
    b = TokenBudget(0)
    charge(b, 10**9, 10**9)
    assert b.plan(10**6, 8192) == 8192 and not b.exhausted


def test_cost_limit_refuses_once_reached():
    b = TokenBudget(0, max_cost_usd=0.01, pricing=Pricing(10.0, 10.0))
    assert b.plan(100, 100) == 100
    charge(b, 1000, 0)                         # $0.01
    assert b.plan(100, 100) is None and "cost budget" in b.stop_reason
