"""The Ray executor (driver side): each record is a Ray task that claims one GPU (``num_gpus=1``).

Ray sets ``CUDA_VISIBLE_DEVICES`` in the task's worker to the GPU it granted, so the task's
``bench.lane.Lane`` (evaluators, final-check workers) sees that GPU alone, as a local lane does.
The driver keeps as many tasks in flight as the cluster has GPUs (a record must start with its
whole per-kernel budget left: a queue of submitted tasks would start them late), and a task
whose worker or node died comes back as ``Lost``: ``passes.run_pass`` queues it again. Ray's own
retries are off (``max_retries=0``), so that the re-queue is the pass's, counted and reported.

Ray is an optional extra (``pip install tritonforge[ray]``) that the GPU image lacks: it is
imported only when this executor is built.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from pathlib import Path

from ..errors import EnvironmentProblem
from .lane import Lane, LaneConfig, LaneReply
from .passes import Job, Lost
from .records import RecordRef

log = logging.getLogger(__name__)


def _ray():
    try:
        import ray   # optional (the ray extra); absent on the GPU image
    except ImportError:
        raise EnvironmentProblem("--executor ray needs Ray, which is not installed",
                          hint="pip install 'tritonforge[ray]' (or pip install ray)") from None
    return ray


def optimize_in_task(ref_data: dict, config_json: str, redo: bool) -> str:
    """The body of one Ray task (worker side): one record on the GPU Ray granted it; returns the
    reply as JSON (``LaneReply.to_json``)."""
    config = LaneConfig.from_json(config_json)
    gpu = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    work = Path(config.work_dir) / f"ray-{os.uname().nodename}-gpu{gpu or 'none'}"
    config = dataclasses.replace(config, work_dir=str(work), label=f"ray gpu{gpu}")
    lane = Lane(config)
    try:
        return lane.run(RecordRef(**ref_data), redo).to_json()
    finally:
        lane.close()


class RayExecutor:
    """Records as Ray tasks of one GPU each on the cluster at ``address`` (None: a local one)."""

    def __init__(self, base: LaneConfig, address: str | None = None, gpus_per_task: float = 1.0,
                 init_kwargs: dict | None = None):
        ray = self.ray = _ray()
        if not ray.is_initialized():
            kwargs = dict(init_kwargs or {})
            if address:
                kwargs["address"] = address
            # the engine's source travels with the driver's PYTHONPATH to local workers;
            # remote nodes must have the same package (the driver refuses other engines' replies)
            ray.init(**kwargs, log_to_driver=False)
        self.base = base
        self.gpus = int(ray.cluster_resources().get("GPU", 0))
        if self.gpus < 1:
            raise EnvironmentProblem("the Ray cluster has no GPU resource",
                              hint="start Ray workers on GPU hosts, or give the local cluster "
                                   "--num-gpus")
        # the driver's TRITONFORGE_* settings (data folder, limits) reach every task's worker
        env = {k: v for k, v in os.environ.items() if k.startswith("TRITONFORGE_")}
        self.remote = ray.remote(num_gpus=gpus_per_task, max_retries=0)(optimize_in_task).options(
            runtime_env={"env_vars": env} if env else None)
        self.running: dict = {}          # ObjectRef -> Job

    def slots(self) -> int:
        return self.gpus

    def submit(self, job: Job) -> None:
        ref = self.remote.remote(dataclasses.asdict(job.ref), self.base.to_json(), job.redo)
        self.running[ref] = job

    def wait(self, timeout_s: float) -> list[tuple[Job, LaneReply | Lost]]:
        if not self.running:
            return []
        done, _ = self.ray.wait(list(self.running), num_returns=1, timeout=timeout_s)
        if done:     # whatever else finished meanwhile too
            done, _ = self.ray.wait(list(self.running), num_returns=len(self.running), timeout=0)
        out = []
        for ref in done:
            job = self.running.pop(ref)
            try:
                out.append((job, LaneReply.from_json(self.ray.get(ref))))
            except Exception as exc:  # noqa: BLE001 - worker or node died, object lost
                out.append((job, Lost(f"{type(exc).__name__}: {str(exc)[:200]}")))
        return out

    def cut(self) -> list[Job]:
        jobs = list(self.running.values())
        for ref in list(self.running):
            self.ray.cancel(ref, force=True)
        self.running.clear()
        return jobs

    def close(self) -> None:
        self.cut()
