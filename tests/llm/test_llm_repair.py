"""search/repair.py: rule repairs as literal edits, and the repair loop's order and bookkeeping.

(Kept under tests/llm/ because this helper owns that folder; it tests src/tritonforge/search/
repair.py and may move to tests/search/ when that folder settles.)
"""

from __future__ import annotations

import pytest
from conftest import SMEM_ERROR, variant

from tritonforge.errors import ConfigError
from tritonforge.model import Candidate, RepairRequest, Status
from tritonforge.search.repair import (
    apply_edits, find_literals, repair_candidate, rule_repairs,
)

REG_ERROR = "RuntimeError: Triton Error [CUDA]: too many resources requested for launch"

MATMUL = '''import triton
import triton.language as tl


@triton.autotune(configs=[
    triton.Config({'BLOCK_M': 128, 'BLOCK_N': 256, 'BLOCK_K': 64}, num_stages=4, num_warps=8),
    triton.Config({"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32}, num_stages=3, num_warps=4),
], key=["M"])
@triton.jit
def mm(a, b, c, M, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)  # ünïcode comment keeps offsets honest


GROUP_SIZE_M = 8
TILE = 128


def matmul(a, b, BLOCK_SIZE: int = 96, num_warps=4):
    mm[(1,)](a, b, a, 1)
'''


def cand(source: str) -> Candidate:
    return Candidate(source, "llm:m")


def test_literals_found_in_configs_keywords_assignments_and_defaults():
    lits = {(x.kind, x.name, x.value) for x in find_literals(MATMUL)}
    assert ("block", "BLOCK_M", 128) in lits and ("block", "BLOCK_K", 32) in lits
    assert ("num_stages", "num_stages", 4) in lits and ("num_warps", "num_warps", 8) in lits
    assert ("block", "TILE", 128) in lits and ("block", "BLOCK_SIZE", 96) in lits
    assert ("num_warps", "num_warps", 4) in lits
    assert not any(name == "GROUP_SIZE_M" for _, name, _ in lits)


def test_edits_change_only_the_literal_and_keep_formatting():
    lits = [x for x in find_literals(MATMUL) if x.name == "TILE"]
    out = apply_edits(MATMUL, [(lits[0], 64)])
    assert out == MATMUL.replace("TILE = 128", "TILE = 64")


def test_shared_memory_error_gives_fewer_stages_then_smaller_tiles():
    fixes = rule_repairs(cand(MATMUL), Status.COMPILE_ERROR, SMEM_ERROR)
    assert [f.origin for f in fixes] == ["repair:rules:fewer-stages", "repair:rules:smaller-tiles"]
    stages, tiles = fixes[0].source, fixes[1].source
    assert "num_stages=2, num_warps=8" in stages and "num_stages=2, num_warps=4" in stages
    # the largest block of each container is halved (ties all), the others kept
    assert "{'BLOCK_M': 128, 'BLOCK_N': 128, 'BLOCK_K': 64}" in tiles
    assert '{"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32}' in tiles
    assert "TILE = 64" in tiles and "BLOCK_SIZE: int = 96" in tiles   # 96: not a power of 2
    assert "ünïcode" in tiles and fixes[0].parent == cand(MATMUL).hash
    compile(stages, "<s>", "exec")
    compile(tiles, "<t>", "exec")


def test_register_error_gives_fewer_warps():
    [warps, _] = rule_repairs(cand(MATMUL), Status.RUNTIME_ERROR, REG_ERROR)
    assert warps.origin == "repair:rules:fewer-warps"
    assert "num_stages=4, num_warps=4" in warps.source and "num_warps=2" in warps.source


def test_power_of_two_and_dot_minimum_rules():
    [fix] = rule_repairs(cand(MATMUL), Status.COMPILE_ERROR,
                         "ValueError: arange's range must be a power of 2")
    assert "BLOCK_SIZE: int = 128" in fix.source
    small = MATMUL.replace('"BLOCK_K": 32', '"BLOCK_K": 8')
    [fix] = rule_repairs(cand(small), Status.COMPILE_ERROR,
                         "AssertionError: All non-batch values in both first input shape "
                         "([constexpr[64], constexpr[8]]) ... must be >= 16!")
    assert '"BLOCK_K": 16' in fix.source


def test_no_rules_for_mismatches_or_unparseable_sources():
    assert rule_repairs(cand(MATMUL), Status.MISMATCH, SMEM_ERROR) == []
    assert rule_repairs(cand("def f(:\n"), Status.COMPILE_ERROR, SMEM_ERROR) == []


class ScriptedProposer:
    """A proposer whose repairs are given in advance; records the requests it got."""

    name = "scripted"

    def __init__(self, *fixes):
        self.fixes = list(fixes)
        self.requests: list[RepairRequest] = []

    def propose(self, context):
        return []

    def repair(self, request):
        self.requests.append(request)
        return self.fixes.pop(0) if self.fixes else None


def test_rules_first_each_once_then_proposers_with_the_latest_error(context, evaluate):
    always_regs = variant("MARK:REGS")

    def eval_regs(c):
        if "MARK:REGS" in c.source:
            return Status.RUNTIME_ERROR, REG_ERROR
        return evaluate(c)

    llm = ScriptedProposer(Candidate(variant("clean"), "repair:scripted"))
    outcome = repair_candidate(cand(always_regs), Status.RUNTIME_ERROR, REG_ERROR, [llm],
                               context, 5, eval_regs)
    assert [a.origin for a in outcome.attempts] == [
        "repair:rules:fewer-warps", "repair:rules:smaller-tiles", "repair:scripted"]
    assert outcome.repaired and outcome.stop_reason == "repaired"
    [req] = llm.requests
    assert req.attempt == 3 and req.status is Status.RUNTIME_ERROR
    assert "num_warps=2" in req.candidate.source       # the chain builds on the latest fix


def test_stops_when_attempts_run_out_or_nobody_offers_a_fix(context, evaluate):
    bad = [Candidate(variant(f"MARK:MISMATCH {i}"), "repair:scripted") for i in range(3)]
    out = repair_candidate(cand(bad[0].source), Status.MISMATCH, "differs",
                           [ScriptedProposer(*bad[1:])], context, 2, evaluate)
    assert not out.repaired and out.stop_reason == "attempts exhausted (2)"
    assert [a.status for a in out.attempts] == [Status.MISMATCH, Status.MISMATCH]
    out = repair_candidate(cand(bad[0].source), Status.MISMATCH, "differs",
                           [ScriptedProposer()], context, 3, evaluate)
    assert not out.repaired and out.attempts == () and out.stop_reason == "no repair offered"


def test_a_crashing_proposer_is_skipped_but_config_errors_surface(context, evaluate):
    class Crashing(ScriptedProposer):
        def repair(self, request):
            raise RuntimeError("boom")

    class Misconfigured(ScriptedProposer):
        def repair(self, request):
            raise ConfigError("no key")

    good = ScriptedProposer(Candidate(variant("clean"), "repair:scripted"))
    out = repair_candidate(cand(variant("MARK:MISMATCH")), Status.MISMATCH, "x",
                           [Crashing(), good], context, 2, evaluate)
    assert out.repaired
    with pytest.raises(ConfigError):
        repair_candidate(cand(variant("MARK:MISMATCH")), Status.MISMATCH, "x",
                         [Misconfigured()], context, 2, evaluate)


def test_a_fix_already_tried_is_not_evaluated_again(context, evaluate):
    same = cand(variant("MARK:MISMATCH"))
    calls = []
    out = repair_candidate(same, Status.MISMATCH, "x", [ScriptedProposer(same, same)], context,
                           3, lambda c: calls.append(c) or evaluate(c))
    assert calls == [] and out.stop_reason == "no repair offered"


def test_ok_candidates_are_not_repaired(context, evaluate):
    with pytest.raises(ValueError):
        repair_candidate(cand(variant("x")), Status.OK, "", [], context, 1, evaluate)
