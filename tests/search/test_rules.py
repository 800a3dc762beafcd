"""The rule proposer: ranked moves from the static analysis, new candidates only."""

from pathlib import Path

from tritonforge.model import Candidate, HardwareInfo, HistoryEntry, ProposalContext, Status
from tritonforge.search.rules import RuleProposer
from tritonforge.tasks.loader import task_from_file

EXAMPLE = Path(__file__).resolve().parents[2] / "src" / "tritonforge" / "examples" / "sin_block4.py"


def _ctx(task, source, history=(), budget=4):
    return ProposalContext(task, Candidate(source, "original"), 1, HardwareInfo("cpu", True),
                           history=history, budget=budget)


def test_tiny_block_grows_first_and_round_is_diverse():
    task = task_from_file(EXAMPLE)
    cands = RuleProposer().propose(_ctx(task, task.source, budget=6))
    assert len(cands) == 6
    assert "BLOCK_SIZE 4 -> 1024" in cands[0].description
    kinds = {c.origin for c in cands}
    assert "rules:launch_params" in kinds           # not only block sizes in one round
    assert len({c.hash for c in cands}) == 6


def test_tried_candidates_are_not_proposed_again():
    task = task_from_file(EXAMPLE)
    first = RuleProposer().propose(_ctx(task, task.source, budget=2))
    history = tuple(HistoryEntry(c.hash, c.origin, c.description, Status.OK) for c in first)
    second = RuleProposer().propose(_ctx(task, task.source, history, budget=2))
    assert not {c.hash for c in first} & {c.hash for c in second}
