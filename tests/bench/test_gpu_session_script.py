"""scripts/gpu_session.sh's smoke step: a development check of the checkout's engine that must
never resume or write the pass in bench/results. An edit of its default records once dropped its
scratch directory, and the step would have run as a resumed pass there (caught before a call)."""

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _smoke_block() -> str:
    text = (ROOT / "scripts" / "gpu_session.sh").read_text()
    return text[text.index("    smoke)"):text.index("    pass|optimize)")]


def test_the_smoke_step_sets_a_scratch_pass_directory_before_it_falls_through_to_the_pass():
    block = _smoke_block()
    assert block.rstrip().endswith(";&")                  # it runs the pass step's code...
    lines = [ln.strip() for ln in block.splitlines()]
    assert any(ln.startswith('PASS_DIR="${SMOKE_DIR:-/tmp/') for ln in lines)  # ...elsewhere
    assert any("ENGINE_TREE" in ln and "continue" in ln for ln in lines)      # checkout's engine


def test_the_smoke_block_run_alone_leaves_bench_results_alone(tmp_path):
    """The block's own assignments, run by bash with the pass step cut off: PASS_DIR is the
    scratch directory, and it exists."""
    block = _smoke_block().replace("    smoke)", "", 1).rstrip()
    assert block.endswith(";&")
    script = ("log() { :; }\nfor step in smoke; do case $step in smoke)\n" + block[:-2]
              + ";;\nesac; done\necho \"$PASS_DIR\"\n")
    env = {**os.environ, "SMOKE_DIR": str(tmp_path / "scratch")}
    env.pop("ENGINE_TREE", None)
    out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env,
                         cwd=tmp_path, check=True).stdout.strip()
    assert out == str(tmp_path / "scratch") and (tmp_path / "scratch").is_dir()
