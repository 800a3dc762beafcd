"""testgen.generate_spec: a model-written case spec is accepted only if parse_spec accepts it."""

from __future__ import annotations

from conftest import KERNEL
from fake_server import Reply

from tritonforge.llm.testgen import check_spec_reply, generate_spec
from tritonforge.llm.usage import TokenBudget
from tritonforge.model import CaseRole, TensorSpec

SPEC = '''entry = "add"
seeds = 2

[[case]]
id = "odd-1000"
role = "correctness"
args = [{ tensor = [1000] }, { tensor = [1000] }]

[[case]]
id = "perf-16M"
role = "performance"
args = [{ tensor = [16777216], dtype = "float16" }, { tensor = [16777216], dtype = "float16" }]
'''


def toml(text: str) -> str:
    return f"Cases for add.\n\n```toml\n{text}```\n"


def test_valid_spec_is_parsed_into_cases(client, server):
    server.add(Reply(toml(SPEC)))
    result = generate_spec(client, KERNEL, ("add",), budget=TokenBudget(50_000))
    assert result.ok and result.turns == 1
    odd, perf = result.spec.cases
    assert (odd.id, odd.role, odd.seeds) == ("odd-1000", CaseRole.CORRECTNESS, (0, 1))
    assert perf.recipe.args[0] == TensorSpec(shape=(16777216,), dtype="float16")
    prompt = server.requests[0]["messages"]
    assert "```toml" in prompt[0]["content"] and KERNEL.rstrip() in prompt[1]["content"]


def test_malformed_spec_is_rejected_with_the_reason_and_retried(client, server):
    bad = SPEC.replace('dtype = "float16"', 'dtype = "half"', 1)
    server.add(Reply(toml(bad)), Reply(toml(SPEC)))
    budget = TokenBudget(50_000)
    result = generate_spec(client, KERNEL, ("add",), budget=budget)
    assert result.ok and result.turns == 2
    follow_up = server.requests[1]["messages"][-1]["content"]
    assert "unknown dtype 'half'" in follow_up
    assert [r.purpose for r in budget.records] == ["testgen", "testgen"]


def test_spec_calling_an_unknown_entry_or_without_correctness_cases_is_refused():
    spec, _, reason = check_spec_reply(toml(SPEC.replace('"add"', '"add_fast"')), ("add",))
    assert spec is None and "add_fast" in reason
    perf_only = SPEC.replace('role = "correctness"', 'role = "performance"')
    spec, _, reason = check_spec_reply(toml(perf_only), ("add",))
    assert spec is None and "no correctness case" in reason
    spec, _, reason = check_spec_reply("entry = 'add'", ("add",))
    assert spec is None and "no ```toml block" in reason


def test_gives_up_after_max_turns(client, server):
    server.add(Reply("no idea"), Reply("still no idea"))
    result = generate_spec(client, KERNEL, ("add",), budget=TokenBudget(50_000), max_turns=2)
    assert not result.ok and result.turns == 2 and "toml" in result.reason
