"""Where one candidate's verification spends its seconds, on this machine (a measurement tool).

    python scripts/verify_profile.py RECORD [RECORD ...] [--cases N] [--out DIR]

For each TritonBench-G record: the original and a copy of it (another hash, the same code) go
through the worker's own evaluation (``runtime.worker_evaluate.evaluate_request``, in this
process, verify on, nothing timed) on the test section and the N largest performance inputs,
twice: the first request compiles and autotunes, the second is what a later candidate of the same
record costs in a warm worker. Each request's progress lines are printed with their times, and
the second request's profile (cumulative, top 60) is written to DIR/RECORD.prof.txt. Needs the
TritonBench-G data (``TRITONFORGE_TRITONBENCH`` or ../shared); on a machine with no GPU it runs
the CPU interpreter, where only the test section is practical (``--cases 0``).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
import tempfile
import time
from pathlib import Path


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("records", nargs="+")
    ap.add_argument("--cases", type=int, default=2, help="largest performance inputs checked")
    ap.add_argument("--out", default="verify-profile")
    args = ap.parse_args(argv)

    import os

    import torch
    if not torch.cuda.is_available():
        os.environ["TRITON_INTERPRET"] = "1"      # before triton is imported, as the worker does
    from tritonforge.model import CaseRole, Variant
    from tritonforge.runtime.protocol import EvaluateRequest
    from tritonforge.runtime.worker_main import _device_info
    from tritonforge.tasks.tritonbench import load_tasks

    device = _device_info()
    if device.interpreted:
        from tritonforge.runtime import cpu_shim
        cpu_shim.install()
    from tritonforge.runtime.worker_evaluate import evaluate_request

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    print(f"device: {device.name}", flush=True)
    for task in load_tasks(args.records):
        perf = [c for c in task.cases if c.role is CaseRole.PERFORMANCE]
        sizes = {c.id: getattr(c.recipe, "elements", None) or 0 for c in perf}
        largest = sorted(perf, key=lambda c: -sizes[c.id])[:args.cases]
        ids = tuple(c.id for c in task.cases if c.role is CaseRole.CORRECTNESS) + \
            tuple(c.id for c in largest)
        original = Variant("original", task.source, "o" * 16)
        start = time.perf_counter()

        def report(p, start=start):
            print(f"  {time.perf_counter() - start:7.2f} s  {p.stage} {p.variant} "
                  f"{getattr(p, 'case_id', '') or ''}", flush=True)

        for attempt in (1, 2):
            copy = Variant("candidate", task.source + f"\n# copy {attempt}\n", f"{attempt}" * 16)
            request = EvaluateRequest(task, (original, copy), case_ids=ids, verify=True, time=False)
            print(f"{task.name}: request {attempt} on {', '.join(ids)}", flush=True)
            with tempfile.TemporaryDirectory() as module_dir:
                prof = cProfile.Profile()
                t0 = time.perf_counter()
                prof.enable()
                evaluation, broken = evaluate_request(request, device, Path(module_dir), report)
                prof.disable()
                took = time.perf_counter() - t0
            peak = ""
            if torch.cuda.is_available():
                peak = f"; GPU memory peak {torch.cuda.max_memory_allocated() / 2 ** 30:.1f} GiB, " \
                       f"held after {torch.cuda.memory_allocated() / 2 ** 30:.1f} GiB"
                torch.cuda.reset_peak_memory_stats()
            print(f"{task.name}: request {attempt} took {took:.2f} s; broken={broken}{peak}",
                  flush=True)
            for r in evaluation.results:
                verdict = r.verdict.summary(3) if r.verdict is not None else ""
                failure = r.failure.one_line() if r.failure is not None else ""
                print(f"  {r.variant}: {r.status.value} {verdict} {failure}"[:400], flush=True)
            if attempt == 2:
                text = io.StringIO()
                pstats.Stats(prof, stream=text).sort_stats("cumulative").print_stats(60)
                (out / f"{task.name}.prof.txt").write_text(f"{took:.2f} s\n" + text.getvalue())
            if broken:
                break
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
