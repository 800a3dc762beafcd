"""What a launch-bound wrapper spends on the host, piece by piece (GPU only).

    python3 scripts/gpu_host_probe.py OUT.json      (scripts/gpu_session.sh runs it: step hostprobe)

Several TritonBench-G records run their Triton kernels in a few microseconds but take 20-50 us
per call: the timed sample is the slower of the GPU side and the host side (runtime/timing.py's
pacer), and for them the host side wins. Before a transform tries to cut host work, this probe
measures what each piece of a typical wrapper costs on the GPU machine's CPU: a device guard,
torch.no_grad, allocations, reshapes, and Triton launches with few and many arguments. The
numbers decide which host-side rewrites are worth having; the probe changes nothing.
"""

from __future__ import annotations

import json
import statistics
import sys
import time

import torch
import triton
import triton.language as tl


@triton.jit
def _copy3(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


@triton.jit
def _copy10(x_ptr, y_ptr, a_ptr, b_ptr, c_ptr, d_ptr, s0, s1, n, eps, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


def host_us(fn, calls: int = 3000, repeats: int = 5) -> float:
    """Median over ``repeats`` of the mean host time of one call, no synchronisation inside."""
    for _ in range(100):
        fn()
    torch.cuda.synchronize()
    means = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        means.append((time.perf_counter() - t0) / calls * 1e6)
        torch.cuda.synchronize()
    return statistics.median(means)


def micro_ops() -> dict[str, float]:
    x = torch.randn(4096, device="cuda")
    y = torch.empty_like(x)
    idx = x.device.index
    out: dict[str, float] = {}

    def nothing():
        return None

    def guard_index():
        with torch.cuda.device(x.device.index):
            pass

    def guard_device():
        with torch.cuda.device(x.device):
            pass

    def guard_checked():
        if x.get_device() != torch.cuda.current_device():
            with torch.cuda.device(x.device):
                pass

    @torch.no_grad()
    def decorated():
        return None

    def no_grad_block():
        with torch.no_grad():
            pass

    out["python call"] = host_us(nothing)
    out["x.device.index"] = host_us(lambda: x.device.index)
    out["x.get_device()"] = host_us(lambda: x.get_device())
    out["torch.cuda.current_device()"] = host_us(torch.cuda.current_device)
    out["with torch.cuda.device(x.device.index)"] = host_us(guard_index)
    out["with torch.cuda.device(x.device)"] = host_us(guard_device)
    out["guard only when off device"] = host_us(guard_checked)
    out["torch.cuda.device(idx) enter/exit (idx known)"] = host_us(lambda: torch.cuda.device(idx).__enter__())
    out["@torch.no_grad() function call"] = host_us(decorated)
    out["with torch.no_grad()"] = host_us(no_grad_block)
    out["torch.empty_like(x)"] = host_us(lambda: torch.empty_like(x))
    out["torch.empty((4096,), device, dtype)"] = host_us(lambda: torch.empty((4096,), device=x.device, dtype=x.dtype))
    out["x.reshape(-1, 4096)"] = host_us(lambda: x.reshape(-1, 4096))
    out["x.stride(0)"] = host_us(lambda: x.stride(0))
    out["x.is_contiguous()"] = host_us(lambda: x.is_contiguous())
    out["x.contiguous() (already)"] = host_us(lambda: x.contiguous())
    out["triton.next_power_of_2"] = host_us(lambda: triton.next_power_of_2(3000))
    out["launch, 3 args + 1 constexpr"] = host_us(lambda: _copy3[(4,)](x, y, 4096, BLOCK=1024))
    out["launch, 3 args + constexpr + num_warps"] = host_us(
        lambda: _copy3[(4,)](x, y, 4096, BLOCK=1024, num_warps=4))
    out["launch, 10 args + 1 constexpr"] = host_us(
        lambda: _copy10[(4,)](x, y, x, x, x, x, 1, 1, 4096, 1e-5, BLOCK=1024))
    return out


def record_wrappers() -> dict[str, float]:
    """The two launch-bound records' wrappers, as they are and without their guard/decorator."""
    import os
    from pathlib import Path

    data = Path(os.environ.get("TRITONFORGE_TRITONBENCH", "../shared/tritonbench_g"))
    records = {r["name"]: r for r in json.loads((data / "kernels.json").read_text())}
    out: dict[str, float] = {}

    def load(name: str, source: str, tag: str):
        path = Path(f"/tmp/hostprobe_{name}_{tag}.py")
        path.write_text(source)
        spec = __import__("importlib.util").util.spec_from_file_location(f"hp_{name}_{tag}", path)
        mod = __import__("importlib.util").util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod

    if "l2_norm_bwd" in records:
        src = records["l2_norm_bwd"]["source"].split("#" * 146)[0]
        unguarded = src.replace("    with torch.cuda.device(x.device.index):\n", "    if True:\n")
        for tag, text in (("as_is", src), ("no_guard", unguarded)):
            mod = load("l2_norm_bwd", text, tag)
            for size in (16, 16384):
                x, dy = torch.rand(size, device="cuda"), torch.rand(size, device="cuda")
                out[f"l2_norm_bwd {tag} n={size}"] = host_us(lambda: mod._l2_norm_bwd(x, dy), calls=1000)
    if "apply_penalty" in records:
        src = records["apply_penalty"]["source"].split("#" * 146)[0]
        bare = src.replace("@torch.no_grad()\n", "")
        b, v, s = 128, 30522, 64
        args = (torch.rand((b, v), dtype=torch.float16, device="cuda"),
                *(torch.rand(b, dtype=torch.float16, device="cuda") for _ in range(3)),
                torch.randint(0, v, (b * s,), dtype=torch.int32, device="cuda"),
                torch.randint(1, 10, (b * s,), dtype=torch.int32, device="cuda"),
                torch.cumsum(torch.randint(1, s, (b + 1,), dtype=torch.int32), 0).to(torch.int32).cuda(), s)
        for tag, text in (("as_is", src), ("no_no_grad", bare)):
            mod = load("apply_penalty", text, tag)
            out[f"apply_penalty {tag}"] = host_us(lambda: mod.apply_penalty(*args), calls=1000)
    return out


def main(path: str) -> None:
    results: dict[str, object] = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
                                  "triton": triton.__version__, "python": sys.version.split()[0],
                                  "unit": "us of host time per call (mean of a loop, median of 5)"}
    results["micro"] = micro_ops()
    results["records"] = record_wrappers()
    text = json.dumps(results, indent=1)
    print(text)
    with open(path, "w") as fh:
        fh.write(text)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "host_probe.json")
