"""GPU probe: does a worker told its GPU (``Worker.quiet_start``) start without a CUDA context, and
how long do its start and first request take against a worker that asks CUDA itself?

    python3 scripts/gpu_worker_start_probe.py OUT.json

On the GPU host (``scripts/gpu_session.sh workerprobe``). For each kind of start: the start's
seconds, whether ``nvidia-smi`` lists the worker's process on the GPU after ``Ready`` (a CUDA
context) and after a first request (the sin example's one case, verified), and that request's
seconds. A quiet start must list no context after ``Ready`` and one after its request.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from tritonforge.model import Variant  # noqa: E402
from tritonforge.runtime.protocol import EvaluateRequest  # noqa: E402
from tritonforge.runtime.worker_client import Worker  # noqa: E402
from tritonforge.tasks.loader import task_from_file  # noqa: E402


def _on_gpu(pid: int) -> bool:
    out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid", "--format=csv,noheader"],
                         capture_output=True, text=True, timeout=30).stdout
    return str(pid) in {line.strip() for line in out.splitlines()}


def _probe(known, work: Path, task) -> dict:
    worker = Worker("cuda", work, known_device=known)
    began = time.monotonic()
    info = worker.start()
    started_s = time.monotonic() - began
    pid = worker.process.pid
    before = _on_gpu(pid)
    began = time.monotonic()
    variants = (Variant("original", task.source, task.source_hash),
                Variant("candidate", task.source, task.source_hash))
    evaluation = worker.evaluate(EvaluateRequest(task, variants, verify=True, time=False))
    request_s = time.monotonic() - began
    after = _on_gpu(pid)
    worker.close()
    return {"quiet": worker.quiet_start, "start_s": round(started_s, 2),
            "context_after_ready": before, "request_s": round(request_s, 2),
            "context_after_request": after, "device": info.name,
            "statuses": [r.status.value for r in evaluation.results]}


def main(out: str) -> int:
    example = ROOT / "src" / "tritonforge" / "examples" / "sin_block4.py"
    task = task_from_file(example, example.with_suffix(".toml"))
    with tempfile.TemporaryDirectory() as tmp:
        asking = _probe(None, Path(tmp) / "asks", task)
        known = Worker("cuda", Path(tmp) / "x")
        known_info = None
        try:
            known_info = known.start()
        finally:
            known.close()
        quiet = _probe(known_info, Path(tmp) / "quiet", task)
    result = {"asks_cuda": asking, "quiet": quiet,
              "quiet_holds": not quiet["context_after_ready"] and quiet["context_after_request"]
              and all(s == "ok" for s in quiet["statuses"])}
    Path(out).write_text(json.dumps(result, indent=1))
    print(json.dumps(result, indent=1))
    return 0 if result["quiet_holds"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
