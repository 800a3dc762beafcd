"""Running a stored record again (``bench optimize --redo``), and resuming a re-run that was cut.

A re-run forgets the record's cached work when it starts (its record stays until the re-run
stores a new one), so that a harness fix takes effect. A device call can end in the middle of a
re-run: the autotuned records on the H100 (2026-11-24) took longer than a 9-minute call, and each
later ``--redo`` started them from the beginning again, so they could never finish. Here a
re-run leaves a marker (when it started, and a fingerprint of the engine's source); the next
``--redo`` of a record whose re-run never stored a result, with the same engine, forgets only
what was stored before that re-run started and keeps the re-run's own evaluations and profile
(content-addressed: it reuses exactly the requests it would make again). A changed engine, or a
re-run that finished, forgets everything as before.
"""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

from ..store import RunStore

REDO_KIND = "optimize-redo"


def engine_fingerprint(package_dir: Path | None = None) -> str:
    """A hash of every Python source of the package: any change to the engine changes it."""
    root = package_dir or Path(__file__).resolve().parent.parent
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(path.relative_to(root).as_posix().encode())
        digest.update(b"\0")
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def forget_for_redo(store: RunStore, name: str, record_kind: str = "optimize",
                    fingerprint: str | None = None) -> tuple[int, bool]:
    """Forget ``name``'s cached work before it runs again; returns (evaluations forgotten,
    whether an earlier cut re-run is resumed)."""
    engine = fingerprint or engine_fingerprint()
    marker = store.get_record(REDO_KIND, name)
    stored_at = store.record_created(record_kind, name)
    if (isinstance(marker, dict) and marker.get("engine") == engine
            and isinstance(marker.get("started"), (int, float))
            and (stored_at is None or stored_at < marker["started"])):
        return store.forget_task(name, record_kind, keep_record=True, before=marker["started"]), True
    started = time.time()
    gone = store.forget_task(name, record_kind, keep_record=True)
    store.put_record(REDO_KIND, name, {"started": started, "engine": engine})
    return gone, False


def redo_left(store: RunStore, names: list[str], since: float,
              record_kind: str = "optimize") -> list[str]:
    """The records of ``names`` that no run has stored since ``since`` (``time.time()`` when the
    call began): re-runs the call did not reach or did not finish. The suite's own "left" count
    misses those a shard started and the call's end cut, since it counts records not started
    (H100, 2026-11-25: it said "0 left" after two calls whose re-runs were all cut)."""
    left = []
    for name in names:
        stored = store.record_created(record_kind, name)
        if stored is None or stored < since:
            left.append(name)
    return left
