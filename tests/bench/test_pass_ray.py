"""The Ray executor end to end on a local Ray cluster with fake GPU resources: interpreter
records as Ray tasks of one GPU each, a worker that dies mid-record (its record queued again and
finished), and a driver killed mid-pass that the next call resumes from records.jsonl."""

import json
import os
import signal
import subprocess
import time

import pytest

from tritonforge.bench.records import read_records

pytest.importorskip("ray")


def test_records_run_as_ray_tasks_and_a_dead_worker_loses_nothing(tmp_path, monkeypatch, kernels, cli):
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "kill-sin_a").write_text("")          # sin_a's first worker dies (lane._test_hook)
    monkeypatch.setenv("TRITONFORGE_LANE_TEST_HOOK", str(hook))
    done = cli(*kernels(["sin_a", "sin_b"]), "--executor", "ray",
               "--ray-num-gpus", "2", "--per-kernel", "60", timeout=400)
    assert done.returncode == 0, done.stderr[-3000:]
    assert not (hook / "kill-sin_a").exists()      # the hook fired
    assert "sin_a: lost" in done.stderr and "queued again" in done.stderr
    recs = read_records(tmp_path / "records.jsonl")
    assert set(recs) == {"sin_a", "sin_b"}
    assert all(r.was_accepted and "BLOCK_SIZE 4 ->" in r.accepted for r in recs.values())
    # each task ran its lane on the GPU Ray granted it
    assert "[ray gpu" in done.stderr or all(r.gpu for r in recs.values())
    out = json.loads((tmp_path / "out.json").read_text())
    assert out["finished"] and out["failed"] == []


def test_a_killed_driver_resumes_from_the_records_file(tmp_path, kernels, cli, pass_process):
    args = kernels(["sin_a", "sin_b"])
    cmd, env = pass_process("--per-kernel", "60", "--executor", "ray", "--ray-num-gpus", "1",
                            *args)
    driver = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and not read_records(tmp_path / "records.jsonl"):
            time.sleep(0.5)
    finally:
        os.killpg(driver.pid, signal.SIGKILL)      # the driver and the cluster it started
        driver.wait()
    first = read_records(tmp_path / "records.jsonl")
    assert len(first) == 1, "one record finished before the driver was killed"
    again = cli(*args, "--executor", "ray", "--ray-num-gpus", "1", "--per-kernel", "60",
                timeout=400)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "1 done, 1 to run" in again.stderr
    recs = read_records(tmp_path / "records.jsonl")
    assert set(recs) == {"sin_a", "sin_b"}
    name = next(iter(first))
    assert recs[name] == first[name]               # the finished record was not run again
