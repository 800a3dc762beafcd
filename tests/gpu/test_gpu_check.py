"""`tritonforge check` on a GPU: an unchanged kernel passes with timings, and the same kernel
with a tiny block (sin_block4's 4 elements per program against the recorded 1024, about 50x
slower on an H100) is reported as a regression, exit 1.

Run on the GPU machine: python3 -m pytest -q -p no:cacheprovider tests/gpu/test_gpu_check.py
"""

import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tritonforge.cli import main

pytestmark = pytest.mark.gpu

EXAMPLES = Path(__file__).resolve().parents[2] / "src" / "tritonforge" / "examples"


def test_check_times_and_flags_a_slowed_kernel(tmp_path, capsys):
    kernel = tmp_path / "sin_block4.py"
    shutil.copy(EXAMPLES / "sin_block4.toml", tmp_path / "sin_block4.toml")
    slow = (EXAMPLES / "sin_block4.py").read_text()
    fast = slow.replace("BLOCK_SIZE = 4\n", "BLOCK_SIZE = 1024\n")
    assert fast != slow
    kernel.write_text(fast)
    base, runs = tmp_path / "base.json", tmp_path / "runs"
    assert main(["check", str(kernel), "--baseline", str(base), "--record", "--device", "cuda",
                 "--run-dir", str(runs)]) == 0
    recorded = json.loads(base.read_text())["kernels"][0]["cases"]
    assert any(c["samples_ms"] for c in recorded if c["role"] == "performance")
    capsys.readouterr()

    assert main(["check", str(kernel), "--baseline", str(base), "--device", "cuda",
                 "--run-dir", str(runs)]) == 0
    out = capsys.readouterr().out
    assert "check: passed" in out and "timing skipped" not in out and "| regression |" not in out

    kernel.write_text(slow)
    junit = tmp_path / "slow.xml"
    assert main(["check", str(kernel), "--baseline", str(base), "--device", "cuda",
                 "--run-dir", str(runs), "--junit", str(junit)]) == 1
    out = capsys.readouterr().out
    assert "| regression |" in out and "| mismatch |" not in out
    failures = list(ET.parse(junit).getroot().iter("failure"))
    assert failures and all(f.get("message").startswith("regression") for f in failures)
