"""Performance-script inputs kept on disk, one file per size, shared by a run's workers.

A TritonBench-G performance script builds every input size at once (``get_input_tensors``), on
the host. Each worker that ran one case of it rebuilt and held them all: destindex_copy's 22 sizes
took 55-78 s per verification and put every worker over its host-memory limit (H100,
2026-11-23). Here the first worker to build a script's inputs writes each size to
``DIR/<key>/<index>.pt`` (and ``count`` last, so a half-written set is never read); every later
build, in any worker of the run, loads only the size it needs, memory-mapped. Inputs depend only
on the script and the seed (the key hashes both), never on the variant that asked first.

Only host (CPU) tensors are written: a script that builds its inputs on the GPU already keeps
them off the host, and such a set stays in memory as before.
"""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path
from typing import Any

import torch

from ..verify.tree import iter_tensors

log = logging.getLogger(__name__)

ENV_DIR = "TRITONFORGE_PERF_INPUTS_DIR"


def cache_dir() -> Path | None:
    """The run's shared folder, from the worker's environment (None: no disk cache)."""
    value = os.environ.get(ENV_DIR)
    return Path(value) if value else None


def _tensors(value: Any) -> list[torch.Tensor]:
    return [t for _, t in iter_tensors(value, "")]


def on_host_only(inputs: list[Any]) -> bool:
    """Every tensor of every size lives on the CPU (and there is at least one)."""
    found = [t for value in inputs for t in _tensors(value)]
    return bool(found) and all(t.device.type == "cpu" for t in found)


def stored_count(folder: Path) -> int | None:
    """How many sizes a complete stored set has; None if there is none (or it is incomplete)."""
    try:
        return int((folder / "count").read_text())
    except (OSError, ValueError):
        return None


def load(folder: Path, index: int) -> Any:
    """One size of a stored set, memory-mapped (pages are read as the copy to the GPU needs them)."""
    return torch.load(folder / f"{index}.pt", mmap=True, weights_only=False)


RESERVE_FRACTION = 0.25          # of the disk, left free whatever the inputs need


def fits_on_disk(folder: Path, inputs: list[Any]) -> bool:
    """The set fits with a quarter of the disk (and at least 8 GiB) still free afterwards."""
    need = sum(t.numel() * t.element_size() for value in inputs for t in _tensors(value))
    probe = folder
    while not probe.exists():
        probe = probe.parent
    usage = shutil.disk_usage(probe)
    return usage.free - need > max(RESERVE_FRACTION * usage.total, 8 * 2**30)


def store(folder: Path, inputs: list[Any]) -> bool:
    """Write every size, then ``count``; False (and nothing readable) if any write fails or the
    set would leave the disk short."""
    if not fits_on_disk(folder, inputs):
        log.info("performance inputs kept in memory: not enough free disk for %s", folder)
        return False
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for i, value in enumerate(inputs):
            tmp = folder / f".{i}.pt.{os.getpid()}"
            torch.save(value, tmp)
            os.replace(tmp, folder / f"{i}.pt")
        tmp = folder / f".count.{os.getpid()}"
        tmp.write_text(str(len(inputs)))
        os.replace(tmp, folder / "count")
        return True
    except Exception as exc:  # noqa: BLE001 - a full disk or an unpicklable input: keep them in memory
        log.warning("performance inputs not stored in %s: %s", folder, exc)
        return False


def remove_for(root: Path, module_name: str) -> None:
    """Delete the stored sets of one record (``bench`` does after each task: they can be GBs)."""
    if not root.is_dir():
        return
    for folder in root.glob(f"{module_name}-*"):
        shutil.rmtree(folder, ignore_errors=True)
