"""A pass's records: one JSON line per optimized record in ``records.jsonl``, append-only.

The file is what a pass resumes from and what its figures are computed from; it is small enough
to commit (no SQLite store travels in git). A line is written, flushed and fsynced as soon as its
record is done, so a call cut at any moment loses at most the records still running, and those
are started again by the next call: no partial record is ever counted. A record written twice
(a ``--redo``, a re-verification) keeps its last line.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import math
import logging
import os
from dataclasses import dataclass
from pathlib import Path

from ..errors import ConfigError, InputError
from ..search.loop import OptimizeResult
from .engine import EngineId
from .optimize import held_back

log = logging.getLogger(__name__)

SUCCESS_SPEEDUP = 1.05        # BENCHMARK.md: a success is an accepted kernel at 1.05x or more


@dataclass(frozen=True)
class RecordRef:
    """One record of a pass, as the queue hands it out: a TritonBench-G name, or a kernel file
    (``path`` + ``spec``) for a pass over one's own kernels (and the tests')."""

    name: str
    category: str = ""
    source_lines: int = 0
    path: str | None = None
    spec: str | None = None


@dataclass(frozen=True)
class PassRecord:
    """One optimized record of a pass, as a line of ``records.jsonl``."""

    name: str
    engine_commit: str
    engine_source: str
    settings: str                  # engine.settings_hash
    status: str                    # success | below-threshold | not-improved | original-fails
    speedup: float                 # 1.0 unless a kernel was accepted
    speedup_low: float | None      # the accepted kernel's lower confidence bound
    wall_s: float
    per_kernel_s: float
    candidates: int
    rounds: int
    stop_reason: str
    held_back: str                 # bench.optimize.held_back: why it fell short ("" on success)
    accepted: str                  # "hash origin: description", "" when nothing was accepted
    accepted_source: str = ""      # for the re-verification after the pass
    category: str = ""
    source_lines: int = 0
    gpu: str = ""
    finished: str = ""             # ISO time the record was written
    redo: bool = False             # a --redo re-run (debugging): the pass is not publishable
    mixed: bool = False            # kept under --allow-mixed-engines though another engine made it
    reverified: bool | None = None # the accepted kernel in a fresh process, fresh seeds, every case
    reverify_note: str = ""
    verified: int = 0              # candidates that passed verification (and were timed)
    first_verified_s: float | None = None   # record start to the first of them
    generated_added: int = 0       # generated cases the task gained (testgen.augment)
    generated_dropped: int = 0     # generated cases dropped: the original fails them
    generated_s: float = 0.0       # seconds making them took, before the search
    generated_verify_s: float | None = None  # a candidate's request on them, mean seconds
    phases: dict[str, float] = dataclasses.field(default_factory=dict)  # wall s by phase, in order
    # the search's last notes (RECORD_NOTES, each cut to NOTE_CHARS): why a final check refused
    # its best and what it tried next, which the stop reason alone does not say
    notes: list[str] = dataclasses.field(default_factory=list)

    @property
    def is_success(self) -> bool:
        return self.status == "success"

    @property
    def was_accepted(self) -> bool:
        return bool(self.accepted)


def _finite(x: float) -> float:
    return x if isinstance(x, (int, float)) and math.isfinite(x) else 1.0


RECORD_NOTES = 6       # the search's last notes a record keeps (a pass of 130 stays ~200 KB)
NOTE_CHARS = 240


def pass_record(ref: RecordRef, result: OptimizeResult, engine: EngineId, settings_hash: str, per_kernel_s: float,
                gpu: str = "", redo: bool = False) -> PassRecord:
    """The line for ``ref`` from its ``OptimizeResult`` (``search.loop``)."""
    final = result.final
    made = result.generated
    accepted = final is not None and final.accepted and result.best.hash != result.original.hash
    speedup = _finite(final.speedup) if accepted else 1.0
    if result.stop_reason.startswith("the original"):
        status = "original-fails"
    elif accepted and speedup >= SUCCESS_SPEEDUP:
        status = "success"
    elif accepted:
        status = "below-threshold"
    else:
        status = "not-improved"
    best = result.best
    return PassRecord(
        name=ref.name, engine_commit=engine.commit, engine_source=engine.source_hash,
        settings=settings_hash, status=status, speedup=speedup,
        speedup_low=_finite(final.speedup_low) if accepted else None,
        wall_s=round(result.wall_s, 1), per_kernel_s=per_kernel_s, candidates=result.tried,
        verified=result.verified, first_verified_s=result.first_verified_s,
        generated_added=made.added, generated_dropped=made.dropped, generated_s=made.seconds,
        generated_verify_s=made.verify_s_per_candidate,
        phases={p.name: round(p.wall_s, 1) for p in result.phases},
        rounds=result.rounds, stop_reason=(final.reason if final else result.stop_reason)[:200],
        held_back=held_back(result),
        accepted=f"{best.hash[:12]} {best.origin}: {best.description}"[:300] if accepted else "",
        accepted_source=best.source if accepted else "",
        category=ref.category, source_lines=ref.source_lines, gpu=gpu,
        finished=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), redo=redo,
        notes=[n[:NOTE_CHARS] for n in result.notes[-RECORD_NOTES:]])


FIELDS = {f.name for f in dataclasses.fields(PassRecord)}


def read_records(path: str | Path) -> dict[str, PassRecord]:
    """Every record of ``path`` (the last line of each name), in first-written order; a torn
    line (a call killed mid-write: an unfinished JSON object) is skipped, its record runs again."""
    p = Path(path)
    out: dict[str, PassRecord] = {}
    if not p.exists():
        return out
    lines = p.read_text(encoding="utf-8").splitlines()
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError:
            if line.lstrip().startswith("{"):
                log.warning("%s:%d: a torn line (a call cut while writing it) skipped", p, i + 1)
                continue
            raise InputError(f"{p}:{i + 1} is not a JSON line",
                             hint="remove the broken line; its record then runs again") from None
        unknown = set(data) - FIELDS
        if unknown or "name" not in data:
            raise InputError(f"{p}:{i + 1} is not a pass record (fields {sorted(unknown)})",
                             hint="records.jsonl holds only lines written by `bench optimize`")
        out[data["name"]] = PassRecord(**data)
    return out


def append_record(path: str | Path, record: PassRecord) -> None:
    """Add one line, flushed to disk before returning."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(dataclasses.asdict(record), sort_keys=False, ensure_ascii=False)
    # a file that ends without a newline (a torn line) gets one first: its record re-runs
    lead = "\n" if p.exists() and p.stat().st_size and not p.read_bytes().endswith(b"\n") else ""
    with open(p, "a", encoding="utf-8") as f:
        f.write(lead + text + "\n")
        f.flush()
        os.fsync(f.fileno())


def check_one_engine(records: dict[str, PassRecord], engine: EngineId, settings_hash: str,
                     allow_mixed: bool) -> dict[str, PassRecord]:
    """The records a resumed pass keeps: all of them when they were made by this engine with
    these settings; otherwise a ConfigError, unless ``allow_mixed`` (then they are kept and
    marked ``mixed``, and the pass is not publishable)."""
    other = {n: r for n, r in records.items()
             if r.engine_source != engine.source_hash or r.settings != settings_hash}
    if not other:
        return records
    if not allow_mixed:
        sample = next(iter(other.values()))
        raise ConfigError(
            f"{len(other)} record(s) of this pass were made by another engine or other settings "
            f"(e.g. {sample.name}: engine {sample.engine_commit} sources {sample.engine_source}, "
            f"settings {sample.settings}; this engine is {engine.label}, settings {settings_hash})",
            hint="a pass is one engine: start a new records file (--records), or pass "
                 "--allow-mixed-engines to keep them (the pass is then marked not publishable)")
    return {n: (dataclasses.replace(r, mixed=True) if n in other else r) for n, r in records.items()}
