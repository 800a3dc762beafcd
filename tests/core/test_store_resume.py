"""A run killed with SIGKILL mid-way resumes with every earlier result intact."""

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from tritonforge.model import Candidate, Evaluation, DeviceInfo, Status, VariantResult
from tritonforge.store import RunStore

EXAMPLE = Path(__file__).resolve().parents[2] / "src" / "tritonforge" / "examples" / "sin_block4.py"

DRIVER = textwrap.dedent('''
    import sys
    import time
    from pathlib import Path
    from tritonforge.bench.baseline import run_baseline
    from tritonforge.config import Settings
    from tritonforge.runtime.evaluator import Evaluator
    from tritonforge.store import RunStore
    from tritonforge.tasks.loader import task_from_file
    from dataclasses import replace
    run = Path(sys.argv[1])
    base = task_from_file(sys.argv[2], sys.argv[3])
    tasks = [replace(base, name=f"sin{i}", source=base.source + f"# variant {i}" + chr(10)) for i in range(4)]
    settings = Settings(device="cpu", case_timeout_s=60)
    with RunStore(run / "store.sqlite") as store:
        # done_with paces the run (1 s after each task's phase) so that the kill lands between
        # records: timing one on the interpreter takes 0.2 s, less than the test's polling
        run_baseline(tasks, lambda i: Evaluator(settings, run / f"w{i}", store, device="cpu"),
                     store, progress=lambda s: print(s, flush=True),
                     done_with=lambda name: time.sleep(1.0))
    print("FINISHED", flush=True)
''')

SPEC = '''
entry = "sin_triton"
seeds = 1
[[case]]
id = "c"
args = [{ tensor = [64] }]
[[case]]
id = "p"
role = "performance"
args = [{ tensor = [256] }]
'''


def _records(path: Path) -> dict:
    import tritonforge.bench.baseline  # noqa: F401 - registers record types

    with RunStore(path) as store:
        return dict(store.records("baseline"))


def test_sigkill_then_resume(tmp_path):
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC)
    script = tmp_path / "driver.py"
    script.write_text(DRIVER)
    cmd = [sys.executable, str(script), str(tmp_path / "run"), str(EXAMPLE), str(spec)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, start_new_session=True)
    # wait for the first record, then kill the whole process group without warning
    deadline = time.time() + 240
    store_path = tmp_path / "run" / "store.sqlite"
    while time.time() < deadline:
        if store_path.exists() and len(_records(store_path)) >= 1:
            break
        time.sleep(0.5)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    first = _records(store_path)
    assert 1 <= len(first) < 4, "the kill should land mid-way"
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert "FINISHED" in out.stdout, out.stderr[-2000:]
    after = _records(store_path)
    assert set(after) == {f"sin{i}" for i in range(4)}
    for name, rec in first.items():       # earlier results are intact, not redone
        assert after[name] == rec
    assert all(r.runnable for r in after.values())


def test_store_round_trips_evaluations(tmp_path):
    ev = Evaluation("t", (VariantResult("original", "h", Status.OK),), DeviceInfo("cpu", True))
    with RunStore(tmp_path / "s.sqlite") as store:
        store.put_evaluation("k", "run", ev)
        store.put_candidate("t", Candidate("x = 1\n", "original"))
    with RunStore(tmp_path / "s.sqlite") as store:
        assert store.get_evaluation("k") == ev
        assert store.candidates("t")[0].source == "x = 1\n"
