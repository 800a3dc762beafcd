"""The per-GPU executor (driver side): one lane process per chosen GPU of this host.

Each lane is ``python -m tritonforge.bench.lane`` started with ``CUDA_VISIBLE_DEVICES`` set to
its one GPU, so its evaluators, final-check workers and profiler see that GPU alone and timing on
one GPU never waits for, or runs beside, another lane's work on the same card. The lanes share
nothing but the queue (``passes.run_pass``) and the records file the driver writes; each keeps
its cached work in its own folder (``RUN_DIR/gpuN``), which a later call on the same machine
reuses. A lane that dies loses only its record, which goes back to the queue.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import queue
import signal
import subprocess
import sys
import threading
from dataclasses import replace
from pathlib import Path

from ..errors import EnvironmentProblem
from .lane import REPLY_MARK, LaneConfig, LaneReply
from .passes import Job, Lost

log = logging.getLogger(__name__)


def visible_gpus(env: dict | None = None) -> list[str]:
    """This host's GPUs as ``CUDA_VISIBLE_DEVICES`` names them: that variable's entries when it is
    set, else every GPU ``nvidia-smi -L`` lists (none without a driver)."""
    env = os.environ if env is None else env
    if env.get("CUDA_VISIBLE_DEVICES", "").strip():
        return [g.strip() for g in env["CUDA_VISIBLE_DEVICES"].split(",") if g.strip()]
    try:
        done = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return []
    return [str(i) for i, ln in enumerate(done.stdout.splitlines()) if ln.startswith("GPU ")]


class _LaneProcess:
    def __init__(self, gpu: str, config: LaneConfig):
        self.gpu, self.config = gpu, config
        self.process: subprocess.Popen | None = None
        self.job: Job | None = None

    def ensure(self) -> None:
        if self.process is not None and self.process.poll() is None:
            return
        env = dict(os.environ)
        env["CUDA_VISIBLE_DEVICES"] = self.gpu
        src = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tritonforge.bench.lane", self.config.to_json()],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env,
            start_new_session=True)

    def send(self, job: Job) -> None:
        assert self.process is not None and self.process.stdin is not None
        self.job = job
        self.process.stdin.write(json.dumps({"ref": dataclasses.asdict(job.ref),
                                             "redo": job.redo}) + "\n")
        self.process.stdin.flush()

    def read_reply(self) -> LaneReply | Lost:
        assert self.process is not None and self.process.stdout is not None
        for line in self.process.stdout:
            if line.startswith(REPLY_MARK):
                return LaneReply.from_json(line[len(REPLY_MARK):])
        code = self.process.wait()
        return Lost(f"lane on GPU {self.gpu} exited with {code}")

    def terminate(self) -> None:
        """Ask the lane to kill its workers and exit (``lane.main``'s SIGTERM handler)."""
        p = self.process
        if p is not None and p.poll() is None:
            try:
                p.send_signal(signal.SIGTERM)
            except ProcessLookupError:
                pass

    def stop(self, grace_s: float = 5.0) -> None:
        self.terminate()
        p = self.process
        if p is None:
            return
        try:
            p.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()

    def quit(self) -> None:
        p = self.process
        if p is None or p.poll() is not None:
            return
        try:
            assert p.stdin is not None
            p.stdin.write('{"quit": true}\n')
            p.stdin.flush()
            p.wait(timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            self.stop()


class LocalGpuExecutor:
    """One lane per GPU in ``gpus`` (``CUDA_VISIBLE_DEVICES`` names); ``base`` is the lanes'
    shared config, each lane's ``work_dir`` becomes ``base.work_dir/gpuN``."""

    def __init__(self, gpus: list[str], base: LaneConfig):
        if not gpus:
            raise EnvironmentProblem("no GPU to run the pass on",
                              hint="pass --gpus 0,1 or make the GPUs visible (nvidia-smi -L)")
        self.lanes = [_LaneProcess(g, replace(base, work_dir=str(Path(base.work_dir) / f"gpu{g}"),
                                              label=f"gpu{g}"))
                      for g in gpus]
        self.events: queue.Queue = queue.Queue()

    def slots(self) -> int:
        return len(self.lanes)

    def submit(self, job: Job) -> None:
        lane = next(lane for lane in self.lanes if lane.job is None)
        lane.ensure()
        lane.send(job)

        def wait_reply() -> None:
            try:
                reply = lane.read_reply()
            except Exception as exc:  # noqa: BLE001 - a broken pipe is a lost lane
                reply = Lost(f"lane on GPU {lane.gpu}: {exc}")
            self.events.put((lane, job, reply))

        threading.Thread(target=wait_reply, name=f"lane-{lane.gpu}", daemon=True).start()

    def wait(self, timeout_s: float) -> list[tuple[Job, LaneReply | Lost]]:
        out = []
        try:
            item = self.events.get(timeout=timeout_s)
            while True:
                lane, job, reply = item
                if lane.job is job:
                    lane.job = None
                    out.append((job, reply))
                item = self.events.get_nowait()
        except queue.Empty:
            pass
        return out

    def cut(self) -> list[Job]:
        busy = [lane for lane in self.lanes if lane.job is not None]
        jobs = [lane.job for lane in busy]
        for lane in busy:            # all at once: the pass must end by its deadline
            lane.job = None
            lane.terminate()
        for lane in busy:
            lane.stop()
        return jobs

    def close(self) -> None:
        self.cut()
        for lane in self.lanes:
            lane.quit()
