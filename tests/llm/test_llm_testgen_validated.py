"""LLM-written tests end to end: the model's spec is parsed, every case is run on the ORIGINAL in
the worker (CPU interpreter), and a case the original fails on is dropped with a note."""

from __future__ import annotations

from conftest import KERNEL
from fake_server import Reply

from tritonforge.config import Settings
from tritonforge.llm.testgen_run import llm_generate_cases
from tritonforge.tasks.spec import parse_spec

SPEC = '''entry = "add"
seeds = 2

[[case]]
id = "odd"
args = [{ tensor = [1000] }, { tensor = [1000] }]

[[case]]
id = "mismatched"
args = [{ tensor = [100] }]

[[case]]
id = "one"
args = [{ tensor = [1] }, { tensor = [1] }]
'''


def test_model_spec_is_validated_on_the_original(tmp_path, server, client):
    kernel = tmp_path / "add.py"
    kernel.write_text(KERNEL)
    server.add(Reply(f"Here are cases.\n\n```toml\n{SPEC}```\n"))
    out = tmp_path / "add.toml"
    settings = Settings(device="cpu", run_dir=str(tmp_path / "run"), case_timeout_s=120)
    outcome = llm_generate_cases(kernel, settings, out=out, client=client)
    assert outcome.kept == ("odd", "one")
    assert [d.case_id for d in outcome.dropped] == ["mismatched"]
    written = parse_spec(out.read_text())
    assert [c.id for c in written.cases] == ["odd", "one"]
    assert "dropped mismatched" in out.read_text()


def test_no_usable_spec_says_why(tmp_path, server, client):
    kernel = tmp_path / "add.py"
    kernel.write_text(KERNEL)
    for _ in range(3):
        server.add(Reply("I would rather not."))
    outcome = llm_generate_cases(kernel, Settings(device="cpu", run_dir=str(tmp_path / "r")),
                                 client=client)
    assert outcome.spec_text == "" and "no usable spec" in outcome.reason
