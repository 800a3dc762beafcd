"""One GPU's lane of a pass (worker side): optimizes the records it is handed, one at a time.

A lane runs in its own process, which sees one GPU (``CUDA_VISIBLE_DEVICES`` set by whoever
started it: the per-GPU executor, or Ray for a task with ``num_gpus=1``). It owns one
``compose.OptimizeSession`` (evaluators and prestarted final-check workers, all on that GPU) and
one run store for its cached work. The per-GPU executor talks to it over stdin/stdout: a job
is a JSON line in, a reply is a JSON line out, prefixed with ``REPLY_MARK`` so that anything
else printed on stdout is ignored. Nothing here imports ray, libcst or rich at import time.
"""

from __future__ import annotations

import ctypes
import dataclasses
import json
import logging
import os
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from ..compose import OptimizeSession, SessionOptions
from ..config import Settings
from ..model.serialize import from_jsonable, to_jsonable
from ..runtime.worker_client import wait_for_dying
from ..search import loop  # noqa: F401 - registers OptimizeResult for from_jsonable
from ..store import RunStore
from ..tasks.loader import task_from_file
from ..tasks.tritonbench import load_tasks
from .baseline import as_known_baseline
from .engine import EngineId, engine_id
from .records import RecordRef

log = logging.getLogger(__name__)

REPLY_MARK = "@@tritonforge-lane "

# before a record starts, its lane waits this long at most for workers killed in the record before
# to exit (``runtime.worker_client.KILL_WAIT_S``): the new record's workers would otherwise start
# beside the GiBs of a process still being torn down. The wait is between records, in no record's
# wall, and in the pass's.
DYING_WAIT_S = 120.0


@dataclass(frozen=True)
class LaneConfig:
    """What every lane of a pass shares (it travels as JSON to lane processes and Ray tasks)."""

    settings: Settings
    work_dir: str                   # this lane's folder: workers, modules, its run store
    jobs: int = 4                   # verification workers side by side
    per_kernel_s: float = 150.0
    baseline_store: str = ""        # a baseline sweep's store: the originals' case times
    label: str = ""                 # how its progress lines start, e.g. "gpu1"

    def to_json(self) -> str:
        data = dataclasses.asdict(self)
        return json.dumps(data)

    @staticmethod
    def from_json(text: str) -> "LaneConfig":
        data = json.loads(text)
        data["settings"] = Settings(**data["settings"])
        return LaneConfig(**data)


@dataclass(frozen=True)
class LaneReply:
    name: str
    result: object | None           # OptimizeResult, None on error
    error: str
    engine: EngineId
    gpu: str
    wall_s: float

    def to_json(self) -> str:
        return json.dumps({"name": self.name, "error": self.error, "gpu": self.gpu,
                           "wall_s": self.wall_s, "engine": dataclasses.asdict(self.engine),
                           "result": to_jsonable(self.result) if self.result is not None else None})

    @staticmethod
    def from_json(text: str) -> "LaneReply":
        d = json.loads(text)
        return LaneReply(d["name"], from_jsonable(d["result"]) if d["result"] is not None else None,
                         d["error"], EngineId(**d["engine"]), d["gpu"], d["wall_s"])


def load_ref(ref: RecordRef):
    """The Task of ``ref``: a kernel file (+ spec) or a TritonBench-G record."""
    if ref.path:
        task = task_from_file(ref.path, ref.spec)
        return dataclasses.replace(task, name=ref.name)
    return load_tasks([ref.name])[0]


TEST_HOOK_ENV = "TRITONFORGE_LANE_TEST_HOOK"


def _test_hook(name: str) -> None:
    """Tests: with ``$TRITONFORGE_LANE_TEST_HOOK=FOLDER``, the lane process dies once as it
    starts record ``name`` when ``FOLDER/kill-NAME`` exists (removed first): what a lane, Ray
    worker or node dying mid-record looks like to the driver."""
    folder = os.environ.get(TEST_HOOK_ENV)
    if folder:
        marker = Path(folder) / f"kill-{name}"
        if marker.exists():
            marker.unlink()
            os._exit(1)


class Lane:
    """Optimizes records one after another on the GPU this process sees."""

    def __init__(self, config: LaneConfig, progress=None):
        self.config = config
        self.engine = engine_id()
        work = Path(config.work_dir)
        settings = config.settings.replace(run_dir=str(work))
        self.say = progress or (lambda s: print(f"[{config.label}] {s}" if config.label else s,
                                                file=sys.stderr, flush=True))
        self.store = RunStore(work / "store.sqlite")
        self.session = OptimizeSession(settings, self.store, SessionOptions(jobs=config.jobs))

    def _known_baseline(self, task):
        path = Path(self.config.baseline_store) if self.config.baseline_store else None
        if path is None or not path.exists():
            return None
        with RunStore(path) as base:
            return as_known_baseline(base.get_record("baseline", task.name), task)

    def run(self, ref: RecordRef, redo: bool = False) -> LaneReply:
        """Optimize ``ref`` within the per-kernel budget; errors come back as a reply."""
        dying, waited = wait_for_dying(DYING_WAIT_S)
        if dying:
            self.say(f"waited {waited:.0f} s for {dying} killed worker(s) of the record before "
                     f"to exit before {ref.name}")
        t0 = time.perf_counter()
        _test_hook(ref.name)
        try:
            if redo:
                gone = self.store.forget_task(ref.name, "optimize", keep_record=True)
                self.say(f"{ref.name}: --redo (debugging): {gone} cached evaluation(s) forgotten")
            task = load_ref(ref)
            result = self.session.optimize(task, self.config.per_kernel_s,
                                           lambda e: self.say(e.message) if e.message else None,
                                           self._known_baseline(task))
            info = self.session.worker_info
            gpu = info.name if info else self.session.device
            return LaneReply(ref.name, result, "", self.engine, gpu, time.perf_counter() - t0)
        except Exception as exc:  # noqa: BLE001 - a record's failure must not end the lane
            log.exception("lane: %s failed", ref.name)
            return LaneReply(ref.name, None, f"{type(exc).__name__}: {exc}"[:500], self.engine,
                             "", time.perf_counter() - t0)

    def close(self) -> None:
        try:
            self.session.close()
        finally:
            self.store.close()


def _die_with_parent() -> None:
    """Linux: SIGTERM this lane when the driver that started it dies (killed by a call's end):
    an orphaned lane would go on timing on its GPU beside the next call's lanes."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)   # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def main(argv: list[str] | None = None) -> int:
    """A lane process: ``python -m tritonforge.bench.lane CONFIG_JSON``; jobs on stdin."""
    argv = sys.argv[1:] if argv is None else argv
    config = LaneConfig.from_json(argv[0])
    lane = Lane(config)

    def cut(signum, frame):          # the pass's deadline: the record running now is dropped
        lane.session.kill()
        os._exit(3)

    signal.signal(signal.SIGTERM, cut)
    _die_with_parent()
    out = sys.stdout
    sys.stdout = sys.stderr          # anything the engine prints goes to stderr, not the replies
    try:
        for line in sys.stdin:
            if not line.strip():
                continue
            job = json.loads(line)
            if job.get("quit"):
                break
            reply = lane.run(RecordRef(**job["ref"]), bool(job.get("redo")))
            out.write(REPLY_MARK + reply.to_json() + "\n")
            out.flush()
    finally:
        lane.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
