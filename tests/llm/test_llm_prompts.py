"""Prompts come from template files and carry everything the issue asks for."""

from __future__ import annotations

import pytest
from conftest import KERNEL, SMEM_ERROR, variant

from tritonforge.errors import ConfigError
from tritonforge.llm.prompts import DEFAULT_TEMPLATES_DIR, PromptSet, clip_error
from tritonforge.model import Candidate, RepairRequest, Status


def test_templates_are_files():
    names = {p.name for p in DEFAULT_TEMPLATES_DIR.glob("*.j2")}
    assert {"system.j2", "propose.j2", "repair.j2", "output_contract.j2", "rejected.j2",
            "testgen.j2", "testgen_system.j2"} <= names


def test_propose_prompt_holds_source_hardware_profile_hints_history_contract(context):
    system, user = PromptSet(triton_version="3.6.0").propose(context)
    assert system.role == "system" and user.role == "user"
    assert "```python" in system.content and "exactly ONE fenced block" in system.content
    assert "`add`" in system.content                       # entries named in the contract
    assert KERNEL.rstrip() in user.content                  # verbatim, blank lines kept
    assert "NVIDIA H200" in user.content and "4800 GB/s" in user.content
    assert "too little memory parallelism" in user.content
    assert user.content.index("more_parallelism") < user.content.index("vectorize")
    assert "num_warps 4 -> 8 -> ok, speedup 1.020x" in user.content
    assert "perf-16M" in user.content


def test_a_branch_round_shows_the_near_miss_as_such(context):
    """In a branch round (search.branch) the context's incumbent is a near miss, not the best:
    the prompt says so, and asks to build on its change."""
    import dataclasses

    plain = PromptSet().propose(context)[1].content
    assert "Current best kernel file" in plain and "near miss" not in plain
    near = dataclasses.replace(context.incumbent, description="several rows per program")
    branch = PromptSet().propose(dataclasses.replace(context, incumbent=near, branch=True))[1]
    assert "A near miss" in branch.content and "several rows per program" in branch.content
    assert "Current best kernel file" not in branch.content
    assert "faster than the current best" in branch.content


def test_rendering_is_deterministic(context):
    assert PromptSet().propose(context) == PromptSet().propose(context)


def test_repair_prompt_holds_the_error_and_both_files(context):
    failed = Candidate(variant("MARK:SMEM"), "llm:m")
    msgs = PromptSet().repair(RepairRequest(context, failed, Status.COMPILE_ERROR,
                                            SMEM_ERROR, 2))
    text = msgs[1].content
    assert "repair attempt 2" in text and "compile_error" in text and "Hardware limit" in text
    assert failed.source.rstrip() in text and KERNEL.rstrip() in text


def test_user_templates_override_one_file_and_fall_back_for_the_rest(tmp_path, context):
    (tmp_path / "propose.j2").write_text("ROUND {{ ctx.round }} {{ ctx.task.name }}\n")
    system, user = PromptSet(tmp_path).propose(context)
    assert user.content == "ROUND 1 add\n"
    assert "OUTPUT CONTRACT" in system.content


def test_missing_templates_dir_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        PromptSet(tmp_path / "nope")


def test_long_errors_keep_head_and_tail():
    text = "HEAD " + "x" * 20000 + " TAIL"
    clipped = clip_error(text, 1000)
    assert clipped.startswith("HEAD") and clipped.endswith("TAIL") and len(clipped) < 1100
