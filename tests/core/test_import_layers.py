"""The import rules of DESIGN.md hold: ``lint-imports`` checks pyproject's contracts (one-way
layers, no import cycle between the modules of a package). Skipped where import-linter is not
installed (it is in the ``test`` extra)."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _lint_imports() -> list[str]:
    exe = shutil.which("lint-imports") or str(Path(sys.executable).with_name("lint-imports"))
    if not Path(exe).exists():
        pytest.skip("import-linter not installed (pip install 'tritonforge[test]')")
    return [exe]


def _run(root: Path, src: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": f"{src}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    return subprocess.run(_lint_imports() + ["--no-cache"], cwd=root, env=env,
                          capture_output=True, text=True, timeout=300)


def test_the_import_contracts_are_kept():
    done = _run(ROOT, ROOT / "src")
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "0 broken" in done.stdout


def test_the_contracts_catch_a_cycle_closed_inside_a_function(tmp_path):
    """A copy of the package where one profile module imports, inside a function, a module that
    imports it back: the contracts must refuse it (they would pass it if they checked nothing)."""
    src = tmp_path / "src"
    shutil.copytree(ROOT / "src" / "tritonforge", src / "tritonforge",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    limits = src / "tritonforge" / "profile" / "limits.py"
    limits.write_text(limits.read_text() + "\n\ndef _back():\n    from .diagnose import diagnose\n"
                      "    return diagnose\n")
    done = _run(tmp_path, src)
    assert done.returncode != 0
    assert "tritonforge.profile" in done.stdout
