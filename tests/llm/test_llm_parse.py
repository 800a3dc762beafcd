"""extract_source: the output contract is enforced, with a reason for every refusal."""

from __future__ import annotations

from conftest import KERNEL, variant
from fake_server import fenced

from tritonforge.llm.parse import extract_source

CHANGED = variant("bigger blocks", block=2048)


def parse(text: str, original: str | None = KERNEL):
    return extract_source(text, required_entries=("add",), original_source=original)


def test_well_formed_reply_gives_the_source_and_the_explanation():
    r = parse(fenced(CHANGED, "Doubled BLOCK_SIZE to halve the number of programs."))
    assert r.ok, r.reason
    assert r.source.rstrip() == CHANGED.rstrip()
    assert r.explanation == "Doubled BLOCK_SIZE to halve the number of programs."


def test_no_block_is_rejected():
    r = parse("Sure! Just set BLOCK_SIZE to 2048.")
    assert not r.ok and "no fenced code block" in r.reason


def test_several_python_blocks_are_rejected():
    r = parse(fenced(CHANGED) + "\nAnd a test:\n```python\nprint(1)\n```\n")
    assert not r.ok and "2 ```python blocks" in r.reason


def test_block_of_another_language_is_rejected_with_its_tag():
    r = parse("```cuda\n__global__ void k() {}\n```\n```text\nhi\n```")
    assert not r.ok and "cuda" in r.reason and "text" in r.reason


def test_lone_untagged_block_is_accepted():
    r = parse(f"```\n{CHANGED}```\n")
    assert r.ok, r.reason


def test_unclosed_block_says_the_reply_was_cut_off():
    r = parse(f"```python\n{CHANGED[:200]}")
    assert not r.ok and "not closed" in r.reason


def test_syntax_error_names_the_line():
    broken = CHANGED.replace("mask = offs < n", "mask = offs <")
    line = broken.splitlines().index("    mask = offs <") + 1
    r = parse(fenced(broken))
    assert not r.ok
    assert "SyntaxError" in r.reason and f"line {line}:" in r.reason
    assert "mask = offs <" in r.reason


def test_file_without_a_triton_kernel_is_rejected():
    torch_only = "import torch\n\ndef add(x, y):\n    return x + y\n"
    r = parse(fenced(torch_only))
    assert not r.ok and "no @triton.jit kernel" in r.reason


def test_removed_or_renamed_entry_is_rejected():
    r = parse(fenced(CHANGED.replace("def add(", "def add_fast(")))
    assert not r.ok and "'add' is missing" in r.reason


def test_changed_entry_parameters_are_rejected_but_new_defaults_allowed():
    r = parse(fenced(CHANGED.replace("def add(x: torch.Tensor, y: torch.Tensor)",
                                     "def add(a, b)")))
    assert not r.ok and "changed its parameters" in r.reason
    r = parse(fenced(CHANGED.replace("y: torch.Tensor)", "y: torch.Tensor, block=2048)")))
    assert r.ok, r.reason


def test_unchanged_code_is_rejected_even_if_reformatted():
    reformatted = KERNEL.replace("\n\n\n", "\n\n") + "# a new comment\n"
    r = parse(fenced(reformatted))
    assert not r.ok and "identical" in r.reason


def test_reasoning_tags_of_local_models_are_ignored():
    r = parse("<think>maybe ```python\nx=1\n``` no</think>\n" + fenced(CHANGED))
    assert r.ok, r.reason
