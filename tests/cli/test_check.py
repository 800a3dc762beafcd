"""`tritonforge check`: record a baseline, then re-verify kernels against it (CPU interpreter:
correctness; timing skipped with a note). The GPU half (a slowed kernel is a regression) is
tests/gpu/test_gpu_check.py."""

import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tritonforge.ci_check import CaseCheck, _timed_case
from tritonforge.cli import main
from tritonforge.model import Status, Timing, TimingMethod, VariantResult

EXAMPLES = Path(__file__).resolve().parents[2] / "src" / "tritonforge" / "examples"


@pytest.fixture
def kernel(tmp_path):
    for suffix in (".py", ".toml"):
        shutil.copy(EXAMPLES / f"sin_block4{suffix}", tmp_path / f"sin_block4{suffix}")
    return tmp_path / "sin_block4.py"


def _check(capsys, *argv):
    code = main([str(a) for a in argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_record_then_check_passes_and_a_changed_result_fails(capsys, kernel, tmp_path):
    base, runs = tmp_path / "base.json", tmp_path / "runs"
    code, out, _ = _check(capsys, "check", kernel, "--baseline", base, "--record",
                          "--device", "cpu", "--run-dir", runs)
    assert code == 0 and base.exists() and "1 kernel(s)" in out

    junit, md = tmp_path / "ok.xml", tmp_path / "ok.md"
    code, out, _ = _check(capsys, "check", kernel, "--baseline", base, "--device", "cpu",
                          "--run-dir", runs, "--junit", junit, "--markdown", md)
    assert code == 0 and "check: passed" in out and "timing skipped" in out
    suite = ET.parse(junit).getroot()
    assert suite.get("failures") == "0" and suite.get("skipped") == "2"
    assert md.read_text() + "\n" == out

    kernel.write_text(kernel.read_text().replace("tl.sin(x)", "tl.cos(x)"))
    junit = tmp_path / "bad.xml"
    code, out, _ = _check(capsys, "check", kernel, "--baseline", base, "--device", "cpu",
                          "--run-dir", runs, "--junit", junit)
    assert code == 1 and "check: FAILED" in out and "| mismatch |" in out
    suite = ET.parse(junit).getroot()
    assert suite.get("failures") == "3"
    assert all("mismatch" in f.get("message") for f in suite.iter("failure"))


def test_a_kernel_without_a_record_fails(capsys, kernel, tmp_path):
    base = tmp_path / "base.json"
    base.write_text('{"version": 1, "kernels": []}')
    code, out, _ = _check(capsys, "check", kernel, "--baseline", base, "--device", "cpu",
                          "--run-dir", tmp_path / "r")
    assert code == 1 and "no record of sin_block4" in out and "--record" in out


def test_a_missing_baseline_is_bad_input_before_any_run(capsys, kernel, tmp_path):
    code, _, err = _check(capsys, "check", kernel, "--baseline", tmp_path / "none.json",
                          "--device", "cpu", "--run-dir", tmp_path / "r")
    assert code == 2 and "does not exist" in err and "--record" in err
    assert not (tmp_path / "r" / "check").exists()


def test_an_unreadable_baseline_is_bad_input(capsys, kernel, tmp_path):
    base = tmp_path / "base.json"
    base.write_text('{"version": 7}')
    code, _, err = _check(capsys, "check", kernel, "--baseline", base, "--device", "cpu")
    assert code == 2 and "cannot be read" in err


def _result(name, ms):
    samples = tuple(ms * (1 + 0.002 * ((i * 7) % 5)) for i in range(40))
    return VariantResult(name, name, Status.OK,
                         timings=(Timing("perf", name, TimingMethod.CUDA_EVENTS, samples),))


@pytest.mark.parametrize("current_ms, status", [(1.0, "ok"), (1.02, "ok"), (1.2, "regression"),
                                                (0.8, "ok")])
def test_regression_rule(current_ms, status):
    got = _timed_case("perf", "performance", _result("recorded", 1.0),
                      _result("current", current_ms), True, 0.05, (1.0, 1.0))
    assert isinstance(got, CaseCheck) and got.status == status
    assert got.low <= got.ratio <= got.high and got.recorded_ms == 1.0
