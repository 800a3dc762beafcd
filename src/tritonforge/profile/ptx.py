"""Reading what the compiler produced: PTX instructions and the ptxas resource report.

Pure text functions (``widest_global_access``, ``mma_kind``, ``parse_ptxas_log``) are unit-tested on
snippets; ``run_ptxas`` and ``cuobjdump_registers`` call the tools that ship inside Triton's wheel
(``triton/backends/nvidia/bin``), so they work on a machine without a GPU or a CUDA install.
"""

from __future__ import annotations

import logging
import re
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)


_GLOBAL_ACCESS = re.compile(r"\b(?:ld|st)\.global((?:\.[\w:]+)+)")
_CP_ASYNC = re.compile(r"\bcp\.async\.c[ag]\.shared\.global(?:\.[\w:]+)*\s+\[[^\]]*\],\s*\[[^\]]*\],\s*(\d+)")
_TYPE_BITS = re.compile(r"^[bfsu](\d+)$")
_VEC = re.compile(r"^v(\d+)$")


def widest_global_access(ptx: str) -> int | None:
    """Bytes moved by the widest global load/store in the PTX (16 = 128-bit), None if none."""
    widest = 0
    for match in _GLOBAL_ACCESS.finditer(ptx):
        vec, bits = 1, 0
        for token in match.group(1).strip(".").split("."):
            if m := _VEC.match(token):
                vec = int(m.group(1))
            elif m := _TYPE_BITS.match(token):
                bits = int(m.group(1))
        widest = max(widest, vec * bits // 8)
    for match in _CP_ASYNC.finditer(ptx):
        widest = max(widest, int(match.group(1)))
    if "cp.async.bulk" in ptx:                      # TMA: whole tiles per instruction
        widest = max(widest, 16)
    return widest or None


def mma_kind(ptx: str) -> str | None:
    """"wgmma" (Hopper warpgroup MMA), "mma" (mma.sync) or None: which tensor-core path is used."""
    if re.search(r"\bwgmma\.mma_async", ptx):
        return "wgmma"
    if re.search(r"\bmma\.sync", ptx):
        return "mma"
    return None


@dataclass(frozen=True)
class PtxasReport:
    registers: int | None = None
    spill_stores: int = 0
    spill_loads: int = 0
    stack_bytes: int = 0
    shared_bytes: int | None = None


def parse_ptxas_log(log_text: str) -> PtxasReport:
    """Read ``ptxas -v``'s lines: 'Used N registers', 'N bytes stack frame, N bytes spill ...'."""
    regs = re.search(r"Used (\d+) registers", log_text)
    frame = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads",
                      log_text)
    smem = re.search(r"(\d+) bytes smem", log_text)
    return PtxasReport(
        registers=int(regs.group(1)) if regs else None,
        stack_bytes=int(frame.group(1)) if frame else 0,
        spill_stores=int(frame.group(2)) if frame else 0,
        spill_loads=int(frame.group(3)) if frame else 0,
        shared_bytes=int(smem.group(1)) if smem else None,
    )


def _ptxas_path(arch: int) -> str | None:
    try:
        from triton import knobs   # optional: without triton, no ptxas path from it
        tool = knobs.nvidia.ptxas_blackwell if arch >= 100 else knobs.nvidia.ptxas
        return tool.path
    except Exception as exc:  # noqa: BLE001 - any failure means "no ptxas"
        log.debug("no ptxas from triton: %s", exc)
        return None


def _cuobjdump_path() -> str | None:
    try:
        from triton import knobs
        return knobs.nvidia.cuobjdump.path
    except Exception as exc:  # noqa: BLE001
        log.debug("no cuobjdump from triton: %s", exc)
        return None


def _sm_arch(arch: int) -> str:
    return f"sm_{arch}{'a' if arch >= 90 else ''}"    # as Triton's own make_cubin names it


def run_ptxas(ptx: str, arch: int, timeout_s: float = 120.0) -> PtxasReport | None:
    """Assemble the PTX with ``ptxas -v`` for ``arch`` and read its resource report."""
    ptxas = _ptxas_path(arch)
    if not ptxas:
        return None
    with tempfile.TemporaryDirectory(prefix="tritonforge-ptxas-") as tmp:
        src = Path(tmp) / "kernel.ptx"
        src.write_text(ptx)
        cmd = [ptxas, "-v", f"--gpu-name={_sm_arch(arch)}", str(src), "-o", str(Path(tmp) / "k.o")]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
        except (OSError, subprocess.TimeoutExpired) as exc:
            log.warning("ptxas did not run: %s", exc)
            return None
    if done.returncode != 0:
        log.warning("ptxas failed (%d): %s", done.returncode, done.stderr[-500:])
        return None
    return parse_ptxas_log(done.stdout + done.stderr)


def cuobjdump_registers(cubin: bytes) -> int | None:
    """Registers per thread from ``cuobjdump -res-usage`` on a cubin (REG:N)."""
    tool = _cuobjdump_path()
    if not tool or not cubin:
        return None
    with tempfile.TemporaryDirectory(prefix="tritonforge-cubin-") as tmp:
        path = Path(tmp) / "kernel.cubin"
        path.write_bytes(cubin)
        try:
            done = subprocess.run([tool, "-res-usage", str(path)], capture_output=True, text=True,
                                  timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            return None
    m = re.search(r"REG:(\d+)", done.stdout)
    return int(m.group(1)) if m else None
