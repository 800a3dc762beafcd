"""scripts/submission_size.py counts what a submission's limit counts: every commit's diff as
text, binary files base85-encoded, a file added and later removed twice."""

from __future__ import annotations

import importlib.util
import os
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "submission_size.py"
MIB = 1024 * 1024


def _load():
    spec = importlib.util.spec_from_file_location("submission_size", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    return subprocess.run(("git", *args), cwd=repo, env=env, capture_output=True, text=True,
                          check=True).stdout


@pytest.fixture()
def repo(tmp_path: Path, monkeypatch) -> Path:
    _git(tmp_path, "init", "-q", "-b", "main")
    (tmp_path / "a.txt").write_text("start\n")
    _git(tmp_path, "add", "a.txt")
    _git(tmp_path, "commit", "-qm", "start")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_a_binary_added_then_removed_counts_twice(repo: Path, capsys) -> None:
    module = _load()
    base = _git(repo, "rev-parse", "HEAD").strip()
    (repo / "store.bin").write_bytes(os.urandom(MIB))
    _git(repo, "add", "store.bin")
    _git(repo, "commit", "-qm", "add a store")
    _git(repo, "rm", "-q", "store.bin")
    _git(repo, "commit", "-qm", "drop it")

    assert module.main(["--base", base, "--warn-mib", "100"]) == 0
    out = capsys.readouterr().out
    total = float(out.split("diffs ")[1].split(" MiB")[0])
    # 1 MiB of random bytes is ~1.25 MiB in base85, counted once added and once removed
    assert 2.3 < total < 3.0
    # over a warning line below that total, the script says so with exit 1
    assert module.main(["--base", base, "--warn-mib", "2"]) == 1


def test_the_default_base_is_where_the_branch_was_created(repo: Path) -> None:
    module = _load()
    first = _git(repo, "rev-parse", "HEAD").strip()
    (repo / "a.txt").write_text("more\n")
    _git(repo, "commit", "-qam", "more")
    assert module.default_base() == first
