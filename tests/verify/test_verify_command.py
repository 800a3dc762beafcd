"""``tritonforge verify ORIGINAL CANDIDATE`` end to end on the CPU: cases from testgen alone (the
original's own ``test_softmax``), a worker process, the search's checks; exit 0 accepted, 1 rejected
with one line per reason naming the class, 2 bad input."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from conftest import DEVICE
from tritonforge import cli

HERE = Path(__file__).parent / "cli_kernels"

# a CPU end-to-end test (the worker runs the interpreter): not repeated in the GPU verify step
pytestmark = pytest.mark.skipif(DEVICE != "cpu", reason="the CPU end-to-end run of the command")


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    """The original copied alone (no spec beside it: testgen must make the cases), and the run
    directory; the first verification there writes testgen's spec."""
    root = tmp_path_factory.mktemp("verify_cmd")
    shutil.copy(HERE / "softmax_original.py", root / "softmax.py")
    return root


def _verify(work: Path, candidate: str, capsys, *extra: str) -> tuple[int, str]:
    argv = ["verify", str(work / "softmax.py"), str(HERE / candidate), "--device", "cpu",
            "--run-dir", str(work / "run"), *extra]
    code = cli.main(argv)
    return code, capsys.readouterr().out


def _spec(work: Path) -> str:
    return str(work / "run" / "verify" / "softmax.toml")


def test_an_honest_rewrite_is_accepted_with_cases_from_testgen(work, capsys):
    code, out = _verify(work, "honest_warps.py", capsys)
    assert code == 0, out
    assert out.startswith("accepted:") and "from testgen" in out
    assert Path(_spec(work)).exists()


@pytest.mark.parametrize("candidate,kind", [
    ("watched_poison.py", "cheat:watched"),
    ("sample_cache.py", "cheat:call_state"),
    ("persistent_buffer.py", "cheat:aliased"),
    ("hidden_torch.py", "policy:private"),
])
def test_cheats_are_rejected_with_their_class(work, capsys, candidate, kind):
    if not Path(_spec(work)).exists():
        _verify(work, "honest_warps.py", capsys)          # testgen's spec, as the first test makes
    code, out = _verify(work, candidate, capsys, "--spec", _spec(work))
    assert code == 1, out
    lines = out.splitlines()
    assert lines[0].startswith("rejected")
    assert any(line.strip().startswith(f"{kind}:") for line in lines[1:]), out


def test_json_output_is_typed_and_complete(work, capsys):
    if not Path(_spec(work)).exists():
        _verify(work, "honest_warps.py", capsys)
    code, out = _verify(work, "persistent_buffer.py", capsys, "--spec", _spec(work), "--json")
    data = json.loads(out)
    assert code == 1 and data["accepted"] is False
    assert "cheat:aliased" in [r["kind"] for r in data["reasons"]]
    assert data["checked"] > 0 and data["cases"]


def test_bad_input_exits_2(work, capsys):
    code = cli.main(["verify", str(work / "softmax.py"), str(work / "missing.py"),
                     "--device", "cpu", "--run-dir", str(work / "run")])
    assert code == 2
    assert "missing.py does not exist" in capsys.readouterr().err


def test_no_max_subtraction_is_caught_by_testgen_cases_alone(work, capsys):
    if not Path(_spec(work)).exists():
        _verify(work, "honest_warps.py", capsys)
    code, out = _verify(work, "no_max.py", capsys, "--spec", _spec(work))
    assert code == 1, out


def test_generated_cases_join_the_spec_s_as_in_the_search(work, capsys, monkeypatch):
    """With generated cases on (the GPU's default; asked for here), the command verifies on
    them too, as the search does: their ids are among the cases checked, and an honest rewrite
    still passes them."""
    monkeypatch.setenv("TRITONFORGE_GENERATED_CASES", "on")
    if not Path(_spec(work)).exists():
        _verify(work, "honest_warps.py", capsys)
    code, out = _verify(work, "honest_warps.py", capsys, "--spec", _spec(work), "--json")
    data = json.loads(out)
    assert code == 0 and data["accepted"] is True, out
    assert any(c.startswith("gen-") for c in data["cases"]), data["cases"]
