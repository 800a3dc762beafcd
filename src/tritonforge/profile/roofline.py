"""Roofline: the machine's measured peaks, and where a kernel sits under them.

Datasheet rates are leads, not ceilings: ``measure_peaks`` measures what this GPU achieves once
(a large device-to-device copy counting bytes read plus bytes written; bf16/fp16/tf32 matrix
products on random data; an fp32 matrix product with TF32 off for the FMA rate) and caches the
numbers in a JSON file keyed by GPU name and torch version (``~/.cache/tritonforge/peaks.json``;
``TRITONFORGE_CACHE_DIR`` moves it). Seen on H200/H100 machines here: about 4.3 / 3.0 TB/s copy
and about 790 TFLOP/s bf16.

``place`` puts a kernel (bytes moved, operations, time) against those peaks: the fraction of the
achievable peak it reaches is the attainable time ``max(bytes/bw, flops/rate)`` over the measured
time, and the bound class is memory or compute when that fraction is high, launch when each launch
is only a few microseconds, latency otherwise.
"""

from __future__ import annotations

import datetime
import json
import logging
import os
import statistics
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, Callable

from ..config import env_settings
from ..errors import EnvironmentProblem
from ..model import Bound, Roofline

log = logging.getLogger(__name__)

NEAR_PEAK = 0.6            # fraction of a roof above which a kernel is "memory/compute-bound"
LAUNCH_BOUND_US = 8.0      # per-launch time under which launch overhead dominates


@dataclass(frozen=True)
class Peaks:
    """Achievable rates of one GPU, as measured (not datasheet)."""

    gpu: str
    torch_version: str
    dram_bw_gbs: float              # device-to-device copy, (read + write) bytes / time
    bf16_tflops: float
    fp16_tflops: float
    fp32_tflops: float              # fp32 FMA path: matrix product with TF32 off
    tf32_tflops: float | None = None
    sm_count: int = 0
    measured_at: str = ""
    method: str = ""

    def tflops(self, compute: str) -> float:
        """The peak for a compute kind: fp32 (FMA pipe), tf32, fp16, bf16 (tensor cores)."""
        table = {"fp32": self.fp32_tflops, "tf32": self.tf32_tflops or self.fp32_tflops,
                 "fp16": self.fp16_tflops, "bf16": self.bf16_tflops}
        if compute not in table:
            raise ValueError(f"unknown compute kind {compute!r}; use one of {sorted(table)}")
        return table[compute]


def cache_path() -> Path:
    base = env_settings().cache_dir or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "tritonforge")
    return Path(base) / "peaks.json"


def cache_key(gpu: str, torch_version: str) -> str:
    return f"{gpu} | torch {torch_version}"


def load_cached(gpu: str, torch_version: str, path: Path | None = None) -> Peaks | None:
    path = path or cache_path()
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    entry = data.get(cache_key(gpu, torch_version)) if isinstance(data, dict) else None
    if not isinstance(entry, dict):
        return None
    known = {f.name for f in fields(Peaks)}
    try:
        return Peaks(**{k: v for k, v in entry.items() if k in known})
    except TypeError:
        return None


def store_cached(peaks: Peaks, path: Path | None = None) -> None:
    path = path or cache_path()
    try:
        data = json.loads(path.read_text()) if path.exists() else {}
        if not isinstance(data, dict):
            data = {}
    except (OSError, ValueError):
        data = {}
    data[cache_key(peaks.gpu, peaks.torch_version)] = asdict(peaks)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True))
    tmp.replace(path)


def _median_ms(torch: Any, fn: Callable[[], Any], warmup: int, reps: int) -> float:
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def measure_peaks(device: Any = None, *, refresh: bool = False, path: Path | None = None,
                  copy_bytes: int = 1 << 30, matmul_n: int = 8192) -> Peaks:
    """Measured peaks of ``device`` (a torch device or index), from the cache when present."""
    import torch   # profile is importable without torch; measuring peaks needs it

    if not torch.cuda.is_available():
        raise EnvironmentProblem("measuring peaks needs a CUDA GPU and none is visible",
                                 hint="run on the GPU machine, or place kernels with given Peaks")
    dev = torch.device("cuda", torch.cuda.current_device() if device is None else
                       (device if isinstance(device, int) else torch.device(device).index or 0))
    props = torch.cuda.get_device_properties(dev)
    gpu = props.name
    if not refresh and (cached := load_cached(gpu, torch.__version__, path)) is not None:
        return cached
    with torch.cuda.device(dev):
        src = torch.empty(copy_bytes // 4, dtype=torch.float32, device=dev).uniform_()
        dst = torch.empty_like(src)
        ms = _median_ms(torch, lambda: dst.copy_(src), 3, 20)
        bw = 2 * src.numel() * 4 / (ms * 1e-3) / 1e9
        del src, dst
        flops = 2.0 * matmul_n ** 3
        rates = {}
        old_tf32 = torch.backends.cuda.matmul.allow_tf32
        try:
            for name, dtype, tf32 in (("bf16", torch.bfloat16, False), ("fp16", torch.float16, False),
                                      ("tf32", torch.float32, True), ("fp32", torch.float32, False)):
                torch.backends.cuda.matmul.allow_tf32 = tf32
                a = torch.randn(matmul_n, matmul_n, device=dev, dtype=dtype)
                b = torch.randn(matmul_n, matmul_n, device=dev, dtype=dtype)
                reps = 10 if dtype != torch.float32 else 4
                ms = _median_ms(torch, lambda: a @ b, 2, reps)
                rates[name] = flops / (ms * 1e-3) / 1e12
                del a, b
        finally:
            torch.backends.cuda.matmul.allow_tf32 = old_tf32
    peaks = Peaks(gpu=gpu, torch_version=torch.__version__, dram_bw_gbs=bw,
                  bf16_tflops=rates["bf16"], fp16_tflops=rates["fp16"], fp32_tflops=rates["fp32"],
                  tf32_tflops=rates["tf32"], sm_count=props.multi_processor_count,
                  measured_at=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                  method=f"copy {copy_bytes >> 20} MiB (read+write); {matmul_n}^3 matmuls on randn; "
                         "median of CUDA-event timings")
    log.info("measured peaks on %s: %.0f GB/s, bf16 %.0f TFLOP/s, fp32 %.1f TFLOP/s",
             gpu, bw, peaks.bf16_tflops, peaks.fp32_tflops)
    try:
        store_cached(peaks, path)
    except OSError as exc:
        log.warning("could not cache peaks at %s: %s", path or cache_path(), exc)
    return peaks


def place(bytes_moved: float, flops: float, time_us: float, peaks: Peaks, *,
          compute: str = "fp32", launches: int = 1) -> Roofline:
    """Place a kernel (or one call of several launches) against the roofline of ``peaks``.

    ``compute`` picks the arithmetic roof: "fp32" (FMA pipe) unless the kernel's work runs on
    tensor cores ("tf32", "fp16", "bf16"). ``launches`` is how many kernel launches ``time_us``
    covers, for the launch-bound test.
    """
    if time_us <= 0:
        raise ValueError(f"time_us must be positive, got {time_us}")
    seconds = time_us * 1e-6
    bw = bytes_moved / seconds / 1e9
    tflops = flops / seconds / 1e12
    peak_tf = peaks.tflops(compute)
    bw_frac = bw / peaks.dram_bw_gbs if peaks.dram_bw_gbs > 0 else 0.0
    tf_frac = tflops / peak_tf if peak_tf > 0 else 0.0
    fraction = max(bw_frac, tf_frac)
    if fraction >= NEAR_PEAK:
        bound = Bound.MEMORY if bw_frac >= tf_frac else Bound.COMPUTE
    elif time_us / max(1, launches) < LAUNCH_BOUND_US:
        bound = Bound.LAUNCH
    else:
        bound = Bound.LATENCY
    return Roofline(bytes_moved=float(bytes_moved), flops=float(flops), time_us=float(time_us),
                    achieved_bw_gbs=bw, achieved_tflops=tflops, peak_bw_gbs=peaks.dram_bw_gbs,
                    peak_tflops=peak_tf, fraction_of_peak=fraction, bound=bound)


def ridge_point(peaks: Peaks, compute: str = "fp32") -> float:
    """Arithmetic intensity (FLOP per byte) where the memory roof meets the compute roof."""
    return peaks.tflops(compute) * 1e12 / (peaks.dram_bw_gbs * 1e9)
