"""Performance-script inputs kept on disk, one file per size, built once and shared by a run's workers.

A TritonBench-G performance script builds every input size at once (``get_input_tensors``), on
the host. Each worker that ran one case of it rebuilt and held them all: destindex_copy's 22 sizes
took 55-78 s per verification and put every worker over its host-memory limit (H100,
2026-11-23). Worse, several workers (three ``bench optimize`` shards and their verification
workers) missing the set at the same moment each built it themselves: 8.6 GB per worker and per
seed, 100-190 s per verified candidate. So ``obtain`` builds a set exactly once per run:

- A stored set (``DIR/<key>/``: ``<index>.pt`` per size and ``manifest.json``) is read without any
  lock; each worker loads only the size it needs, memory-mapped.
- A missing one is built by the one process holding ``DIR/<key>.lock`` (``fcntl.flock``); the
  others wait on that lock, then find the stored set and load it. flock is released by the kernel
  when its holder dies (crash, SIGKILL), so the next waiter takes over and builds.
- The builder writes into ``DIR/<key>.building-<pid>/`` and renames that folder to ``DIR/<key>``
  last (atomic), so ``DIR/<key>`` never exists half-written. Loading also validates it: the
  manifest must parse and every size file must have the byte length it records. The leftovers of
  a killed builder are deleted by the next one (under the lock).

The key (``runtime.invoke``) hashes the script and the seed, never the variant that asked first:
the inputs depend on nothing else. Only host (CPU) tensors are written, so the device is not part
of the key: a script that builds its inputs on the GPU already keeps them off the host, and such a
set (or one that does not fit, see ``fits_on_disk``, or cannot be pickled) stays in each worker's
memory as before; a ``DIR/<key>.in-memory`` note then tells the others not to wait on each other.
The folder is run-scoped (``RUN_DIR/perf-inputs``) and ``remove_for`` deletes a record's sets
when the run is done with it: they can be GBs.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import shutil
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

import torch

from ..verify.tree import iter_tensors

log = logging.getLogger(__name__)

# a message from the driver to the workers it starts (runtime.worker_client), not a user setting
ENV_DIR = "TRITONFORGE_PERF_INPUTS_DIR"
MANIFEST = "manifest.json"


def cache_dir() -> Path | None:
    """The run's shared folder, from the worker's environment (None: no disk cache)."""
    value = os.environ.get(ENV_DIR)
    return Path(value) if value else None


def _tensors(value: Any) -> list[torch.Tensor]:
    return [t for _, t in iter_tensors(value, "")]


def on_host_only(inputs: list[Any]) -> bool:
    """Every tensor of every size lives on the CPU (and there is at least one)."""
    found = [t for value in inputs for t in _tensors(value)]
    # is_cpu, not device.type: on the CPU interpreter the shim (runtime.cpu_shim) tells code
    # that reads ``device`` its tensors are CUDA, and nothing would be stored
    return bool(found) and all(t.is_cpu for t in found)


def lock_path(folder: Path) -> Path:
    """The lock file next to a set's folder, held by whoever builds it."""
    return folder.parent / f"{folder.name}.lock"


def _memory_note(folder: Path) -> Path:
    return folder.parent / f"{folder.name}.in-memory"


def stored_count(folder: Path) -> int | None:
    """How many sizes a complete, valid stored set has; None if there is none (or it is not whole:
    no manifest, or a size file missing or of another length than the manifest records)."""
    try:
        sizes = [int(n) for n in json.loads((folder / MANIFEST).read_text())["bytes"]]
        if any((folder / f"{i}.pt").stat().st_size != n for i, n in enumerate(sizes)):
            return None
        return len(sizes)
    except (OSError, ValueError, KeyError, TypeError):
        return None


def load(folder: Path, index: int) -> Any:
    """One size of a stored set, memory-mapped (pages are read as the copy to the GPU needs them)."""
    return torch.load(folder / f"{index}.pt", mmap=True, weights_only=False)


RESERVE_FRACTION = 0.25          # of the disk, left free whatever the inputs need ...
RESERVE_MIN, RESERVE_MAX = 8 * 2**30, 32 * 2**30     # ... but at least 8 and at most 32 GiB


def reserve_bytes(total: int) -> int:
    """What a stored set must leave free: a quarter of the disk (16 GiB of the GPU machine's 64),
    at least 8 GiB, at most 32 GiB (a quarter of a 252 GB disk with 62 GB free refused a 1 KB
    set)."""
    return int(min(max(RESERVE_FRACTION * total, RESERVE_MIN), RESERVE_MAX))


def fits_on_disk(folder: Path, inputs: list[Any]) -> bool:
    """The set fits with ``reserve_bytes`` of the disk still free afterwards."""
    need = sum(t.numel() * t.element_size() for value in inputs for t in _tensors(value))
    probe = folder
    while not probe.exists():
        probe = probe.parent
    usage = shutil.disk_usage(probe)
    return usage.free - need > reserve_bytes(usage.total)


def _remove_leftovers(folder: Path) -> None:
    """Half-written folders of builders that died, and an invalid ``folder`` (hold the lock)."""
    for stale in folder.parent.glob(f"{folder.name}.building-*"):
        shutil.rmtree(stale, ignore_errors=True)
    if folder.exists() and stored_count(folder) is None:
        shutil.rmtree(folder, ignore_errors=True)


def store(folder: Path, inputs: list[Any]) -> bool:
    """Write every size into a private folder, then the manifest, then rename it to ``folder``;
    False (and nothing readable) if any write fails or the set would leave the disk short.
    Call it holding ``lock_path(folder)`` (``obtain`` does)."""
    if not fits_on_disk(folder, inputs):
        log.info("performance inputs kept in memory: not enough free disk for %s", folder)
        return False
    tmp = folder.parent / f"{folder.name}.building-{os.getpid()}"
    try:
        _remove_leftovers(folder)
        tmp.mkdir(parents=True)
        sizes = []
        for i, value in enumerate(inputs):
            torch.save(value, tmp / f"{i}.pt")
            sizes.append((tmp / f"{i}.pt").stat().st_size)
        (tmp / MANIFEST).write_text(json.dumps({"bytes": sizes}))
        os.rename(tmp, folder)
        return True
    except Exception as exc:  # noqa: BLE001 - a full disk or an unpicklable input: keep them in memory
        log.warning("performance inputs not stored in %s: %s", folder, exc)
        shutil.rmtree(tmp, ignore_errors=True)
        return False


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Hold an exclusive flock on ``path`` (waiting for it). If the file was deleted and made
    again while we waited (``remove_for``), lock the new one: a lock on a deleted file guards
    nothing."""
    path.parent.mkdir(parents=True, exist_ok=True)
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            held, now = os.fstat(fd), os.stat(path)
            if (held.st_ino, held.st_dev) == (now.st_ino, now.st_dev):
                break
        except FileNotFoundError:
            pass
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)
    try:
        yield
    finally:
        os.close(fd)              # releases the flock


@dataclass(frozen=True)
class Obtained:
    """What ``obtain`` found. ``built``: the set this process built (None: another process had
    stored it, load the sizes with ``load``). ``stored``: the set is on disk in the folder (when
    False the caller keeps ``built`` in memory)."""

    built: list[Any] | None
    stored: bool


def obtain(folder: Path, build: Callable[[], list[Any]]) -> Obtained:
    """A performance script's input set, built by exactly one process of the run (module
    docstring): read lock-free when stored, else built under the lock or waited for."""
    if stored_count(folder) is not None:
        return Obtained(None, True)
    if not _memory_note(folder).exists():
        start = time.monotonic()
        with _locked(lock_path(folder)):
            waited = time.monotonic() - start
            if waited > 1.0:
                log.info("waited %.1f s for another worker's performance inputs %s", waited, folder)
            if stored_count(folder) is not None:
                return Obtained(None, True)
            if not _memory_note(folder).exists():
                built = build()
                if on_host_only(built) and store(folder, built):
                    return Obtained(built, True)
                _memory_note(folder).touch()
                return Obtained(built, False)
    return Obtained(build(), False)        # not storable: every worker builds its own, at once


def remove_for(root: Path, module_name: str) -> None:
    """Delete the stored sets of one record, with their locks, notes and leftovers (``bench``
    does after each task: they can be GBs). Call it when no worker still uses the record."""
    if not root.is_dir():
        return
    for path in root.glob(f"{module_name}-*"):
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
