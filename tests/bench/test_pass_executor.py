"""The pass's queue (``bench.passes.run_pass``) with a scripted executor, then the per-GPU
executor end to end: real lane processes on fake GPUs, interpreter records, the CLI's --out
written as records finish, a pass that ends by its --budget and resumes."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tritonforge.bench.engine import EngineId
from tritonforge.bench.lane import LaneReply
from tritonforge.bench.passes import Job, Lost, run_pass
from tritonforge.bench.records import RecordRef, read_records
from tritonforge.model import Candidate, Decision
from tritonforge.search.loop import OptimizeResult

ENGINE = EngineId("abc", "src1")
ORIG = Candidate("x = 1\n", "original")
BEST = Candidate("x = 2\n", "rules")


def _result(name):
    final = Decision(BEST.hash, True, 1.5, 1.4, 1.5, 1.0, "faster")
    return OptimizeResult(name, ORIG, BEST, final, 1, "done", 1.0, 2)


class ScriptedExecutor:
    """``plan[name]``: a list of outcomes, one per start: seconds to finish, "lost", or
    ("engine", source_hash) for a reply from a lane running other code."""

    def __init__(self, slots, plan):
        self.n, self.plan = slots, {k: list(v) for k, v in plan.items()}
        self.running, self.peak, self.starts = {}, 0, []

    def slots(self):
        return self.n

    def submit(self, job):
        self.starts.append(job.ref.name)
        outcome = self.plan[job.ref.name].pop(0)
        self.running[job.ref.name] = (job, outcome, time.monotonic())
        self.peak = max(self.peak, len(self.running))

    def wait(self, timeout_s):
        end = time.monotonic() + timeout_s
        while True:
            out = []
            for name, (job, outcome, t0) in list(self.running.items()):
                if outcome == "lost":
                    out.append((job, Lost("worker died")))
                elif isinstance(outcome, tuple):
                    out.append((job, LaneReply(name, _result(name), "", EngineId("x", outcome[1]),
                                               "gpu", 0.0)))
                elif time.monotonic() - t0 >= outcome:
                    out.append((job, LaneReply(name, _result(name), "", ENGINE, "gpu", outcome)))
                else:
                    continue
                del self.running[name]
            if out or time.monotonic() >= end:
                return out
            time.sleep(0.01)

    def cut(self):
        jobs = [j for j, _, _ in self.running.values()]
        self.running.clear()
        return jobs

    def close(self):
        pass


def _jobs(*names):
    return [Job(RecordRef(n)) for n in names]


def _run(tmp_path, executor, names, budget=None, per_kernel=0.0, **kw):
    return run_pass(_jobs(*names), executor, records_path=str(tmp_path / "r.jsonl"), engine=ENGINE,
                    settings_hash="s", per_kernel_s=per_kernel, budget_s=budget, poll_s=0.05, **kw)


def test_one_record_per_slot_from_one_queue(tmp_path):
    ex = ScriptedExecutor(2, {n: [0.05] for n in "abcde"})
    seen = []
    out = _run(tmp_path, ex, "abcde", on_record=lambda r: seen.append(r.name))
    assert ex.peak == 2 and sorted(ex.starts) == list("abcde")
    assert sorted(seen) == list("abcde") and sorted(read_records(tmp_path / "r.jsonl")) == list("abcde")
    assert out.left == () and out.cut == () and out.failed == ()


def test_a_lost_record_is_queued_again_and_finished_or_given_up(tmp_path):
    ex = ScriptedExecutor(2, {"a": ["lost", 0.01], "b": [0.01], "c": ["lost"] * 3})
    out = _run(tmp_path, ex, "abc", max_attempts=3)
    assert ex.starts.count("a") == 2 and ex.starts.count("c") == 3
    assert set(read_records(tmp_path / "r.jsonl")) == {"a", "b"}
    assert [n for n, _ in out.failed] == ["c"] and "lost 3 times" in out.failed[0][1]


def test_a_reply_from_another_engine_is_refused(tmp_path):
    ex = ScriptedExecutor(1, {"a": [("engine", "other-src")], "b": [0.01]})
    out = _run(tmp_path, ex, "ab")
    assert set(read_records(tmp_path / "r.jsonl")) == {"b"}
    assert out.failed[0][0] == "a" and "same code" in out.failed[0][1]


def test_budget_no_start_without_a_whole_record_and_running_ones_cut(tmp_path):
    # 1 slot, records take 0.6 s, per-kernel budget 0.5 s, pass budget 0.8 s: "a" finishes,
    # "b" starts with 0.2 s left? no: it needs 0.5 s; so it is left, never started
    ex = ScriptedExecutor(1, {"a": [0.3], "b": [0.3], "c": [5.0]})
    out = _run(tmp_path, ex, "abc", budget=0.5, per_kernel=0.3)
    assert "a" in read_records(tmp_path / "r.jsonl")
    assert "c" not in ex.starts and "c" in out.left
    # a record running at the deadline is cut: nothing written, started again next call
    ex2 = ScriptedExecutor(2, {"x": [0.05], "y": [30.0]})
    t0 = time.monotonic()
    out2 = _run(tmp_path / "two", ex2, "xy", budget=0.4, per_kernel=0.1)
    assert time.monotonic() - t0 < 1.5
    assert out2.cut == ("y",) and set(read_records(tmp_path / "two" / "r.jsonl")) == {"x"}


# ---------------------------------------------------------------- real lanes, fake GPUs
# (tests/bench/conftest.py: ``kernels`` and ``cli``)


def test_two_fake_gpus_one_queue_one_records_file(tmp_path, kernels, cli, monkeypatch):
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "kill-sin_b").write_text("")          # sin_b's first lane dies (lane._test_hook)
    monkeypatch.setenv("TRITONFORGE_LANE_TEST_HOOK", str(hook))
    done = cli(*kernels(["sin_a", "sin_b"]), "--gpus", "0,1",
               "--per-kernel", "60")
    assert done.returncode == 0, done.stderr[-2000:]
    assert not (hook / "kill-sin_b").exists() and "sin_b: lost" in done.stderr
    recs = read_records(tmp_path / "records.jsonl")
    assert set(recs) == {"sin_a", "sin_b"}
    # the same candidate accepted for both (on the CPU: by correctness), its tile changed
    assert all(r.was_accepted and "BLOCK_SIZE 4 ->" in r.accepted for r in recs.values())
    assert len({r.accepted_source for r in recs.values()}) == 1
    # each lane said which GPU it was: both lanes worked
    assert "[gpu0]" in done.stderr and "[gpu1]" in done.stderr
    latest = json.loads((tmp_path / "LATEST.json").read_text())
    assert latest["all"]["optimized"] == 2 and latest["engine_commit"] == recs["sin_a"].engine_commit
    out = json.loads((tmp_path / "out.json").read_text())
    assert out["finished"] and sorted(out["written"]) == ["sin_a", "sin_b"]
    # a call with nothing left runs nothing; other settings (another per-kernel budget) are
    # another pass, refused
    again = cli(*kernels(["sin_a", "sin_b"]), "--gpus", "0,1",
                "--per-kernel", "60")
    assert again.returncode == 0 and "0 to run" in again.stderr
    assert read_records(tmp_path / "records.jsonl") == recs
    other = cli(*kernels(["sin_a", "sin_b"]), "--per-kernel", "90")
    assert other.returncode != 0 and "other settings" in other.stderr


def test_a_pass_ends_by_its_budget_writes_out_and_resumes(tmp_path, kernels, cli):
    args = kernels(["sin_a", "sin_b"])
    slow = tmp_path / "sin_a.py"            # its wrapper outlasts the pass's budget
    slow.write_text(slow.read_text().replace("    out = torch.empty_like(x)\n",
                                             "    import time; time.sleep(60)\n"
                                             "    out = torch.empty_like(x)\n", 1))
    assert "sleep(60)" in slow.read_text()
    t0 = time.monotonic()
    # a record starts with its 20 s left; its own requests are cut only near its 25 s cap, so
    # the pass's 21 s end it first
    cut = cli(*args, "--gpus", "0", "--per-kernel", "20", "--budget", "21")
    wall = time.monotonic() - t0
    assert cut.returncode == 0, cut.stderr[-2000:]
    out = json.loads((tmp_path / "out.json").read_text())
    assert not out["finished"] and set(out["left"]) == {"sin_a", "sin_b"}
    assert out["cut"] == ["sin_a"]                  # started, then cut: nothing counted
    assert read_records(tmp_path / "records.jsonl") == {}
    assert wall < 21 + 25                           # the budget, process start and lane stop
    slow.write_text(slow.read_text().replace("    import time; time.sleep(60)\n", ""))
    done = cli(*args, "--gpus", "0", "--per-kernel", "60")
    assert done.returncode == 0, done.stderr[-2000:]
    assert set(read_records(tmp_path / "records.jsonl")) == {"sin_a", "sin_b"}


def test_a_resumed_pass_refuses_records_of_another_engine(tmp_path, kernels, cli):
    from tritonforge.bench.records import append_record, pass_record

    args = kernels(["sin_a"])
    old = pass_record(RecordRef("sin_a"), _result("sin_a"), EngineId("old", "old-src"), "s", 150.0)
    append_record(tmp_path / "records.jsonl", old)
    refused = cli(*args, "--gpus", "0", "--per-kernel", "150")
    assert refused.returncode != 0 and "another engine" in refused.stderr
    assert "another engine" in json.loads((tmp_path / "out.json").read_text())["error"]
    kept = cli(*args, "--gpus", "0", "--allow-mixed-engines")
    assert kept.returncode == 0 and "not publishable" in kept.stderr
    latest = json.loads((tmp_path / "LATEST.json").read_text())
    assert not latest["publishable"] and "another engine" in " ".join(latest["why_not_publishable"])


def test_gpus_come_from_cuda_visible_devices_and_lane_messages_round_trip():
    from tritonforge.bench.lane import LaneConfig
    from tritonforge.bench.local import visible_gpus
    from tritonforge.config import Settings

    assert visible_gpus({"CUDA_VISIBLE_DEVICES": "2, 3"}) == ["2", "3"]
    config = LaneConfig(Settings(device="cpu", max_rounds=3), "/w", jobs=2, per_kernel_s=99.0)
    assert LaneConfig.from_json(config.to_json()) == config
    reply = LaneReply("a", _result("a"), "", ENGINE, "H100", 12.5)
    assert LaneReply.from_json(reply.to_json()) == reply


def test_a_pass_stopped_by_sigterm_still_writes_latest_and_out(tmp_path, kernels, pass_process):
    args = kernels(["sin_a"])
    slow = tmp_path / "sin_a.py"            # still running when the signal comes
    slow.write_text(slow.read_text().replace("    out = torch.empty_like(x)\n",
                                             "    import time; time.sleep(60)\n"
                                             "    out = torch.empty_like(x)\n", 1))
    cmd, env = pass_process(*args, "--gpus", "0", "--per-kernel", "60",
                            "--out", str(tmp_path / "out.json"))
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out = tmp_path / "out.json"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (out.exists() and "sin_a" in out.read_text()):
        time.sleep(0.5)
    time.sleep(8)                           # the record is under way in its lane
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    state = json.loads(out.read_text())
    assert "signal 15" in state.get("stopped", ""), err[-2000:]
    assert not state["finished"] and state["left"] == ["sin_a"]
    latest = json.loads((tmp_path / "LATEST.json").read_text())
    assert latest["engine_commit"] == state["engine_commit"]
    assert (tmp_path / "PASS.md").exists()


def test_a_gpu_pass_measures_the_peaks_once_before_its_lanes_start(tmp_path, kernels, monkeypatch):
    """On a GPU the driver measures the roofline's peaks before any lane exists (the lanes'
    profiles then read them from the cache instead of waiting for an exclusive GPU lock behind
    their own verifications); a failure to measure is said, and the pass goes on."""
    from tritonforge.bench import pass_command
    from tritonforge.bench.options import PassOptions
    from tritonforge.config import Settings

    order = []

    class Started(Exception):
        pass

    def executor(options, base, device):
        order.append("lanes")
        raise Started

    monkeypatch.setattr(pass_command, "resolve_device", lambda setting: "cuda")
    monkeypatch.setattr(pass_command, "_executor", executor)
    said = []
    monkeypatch.setattr(pass_command, "_say", said.append)
    args = kernels(["sin_a"])
    options = PassOptions(kernels=(args[1],), per_kernel_s=60.0, gpus=("0",),
                          records=str(tmp_path / "r.jsonl"), latest=str(tmp_path / "LATEST.json"))
    settings = Settings(run_dir=str(tmp_path / "run"))
    for result in ((None, "measuring peaks failed: no GPU"), ("peaks", None)):
        order.clear()
        monkeypatch.setattr(pass_command, "measure_peaks_isolated",
                            lambda r=result: order.append("peaks") or
                            ((_peaks_stub() if r[0] else None), r[1]))
        with pytest.raises(Started):
            pass_command.run_pass_command(options, settings)
        assert order == ["peaks", "lanes"]
    assert any("measuring peaks failed: no GPU" in s for s in said)
    assert any("2,964 GB/s copy" in s and "cached for every lane" in s for s in said)


def _peaks_stub():
    from tritonforge.profile.roofline import Peaks
    return Peaks(gpu="H100 (stand-in)", torch_version="2.11", dram_bw_gbs=2964.0,
                 bf16_tflops=700.0, fp16_tflops=700.0, fp32_tflops=50.0)
