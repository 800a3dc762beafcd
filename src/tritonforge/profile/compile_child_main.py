"""The compile child process (``python -m tritonforge.profile.compile_child_main``): compile each
request of a JSON list on stdin with Triton's interpreter off, write their CompileStats as JSON on
stdout. The parent's side is ``profile.compile_child``.
"""

from __future__ import annotations

import json
import sys

from ..model import CompileStats
from .compile_child import decode_value, stats_to_json
from .static import KernelSignature, compile_loaded, load_kernel


def _warm() -> None:
    """Import what the requests will need while the parent still prepares them
    (``CompileChild(warm=True)``): torch, which a task's file imports, and Triton's compiler."""
    try:
        import torch  # noqa: F401
    except ImportError:
        pass
    import triton.compiler  # noqa: F401


def main() -> int:
    if "--warm" in sys.argv[1:]:
        _warm()
    results = []
    for d in json.loads(sys.stdin.read()):
        sig = KernelSignature(tuple(tuple(t) for t in d["types"]),
                              tuple((k, decode_value(v)) for k, v in d["constexprs"]),
                              tuple(d["divisible_by_16"]))
        try:
            fn = load_kernel(d["source_path"], d["kernel_name"])
            stats = compile_loaded(fn, sig, d["num_warps"], d["num_stages"], tuple(d["target"]),
                                   {k: decode_value(v) for k, v in d["options"]})
        except Exception as exc:  # noqa: BLE001 - report, never crash the batch
            stats = CompileStats(kernel=d["kernel_name"], target=f"{d['target'][0]}:{d['target'][1]}",
                                 num_warps=d["num_warps"], num_stages=d["num_stages"],
                                 error=f"{type(exc).__name__}: {exc}")
        results.append(stats_to_json(stats))
    sys.stdout.write("\n" + json.dumps(results) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
