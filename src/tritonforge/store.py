"""The run store: one SQLite file per run directory, written as things happen.

Every task, candidate, evaluation (with all timing samples), decision and profile is written and
committed the moment it exists, so a run killed with SIGKILL loses at most the evaluation that was
in flight; started again with the same command it finds what is done by its ``key`` and goes on.

Rows carry readable columns (status, reason, medians) for people and SQL, and the full object as
JSON (``model.serialize``) for exact reconstruction.
"""

from __future__ import annotations

import functools
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any, Iterator

from .errors import StoreError
from .model import Candidate, Decision, Evaluation, Profile, Task
from .model.serialize import dumps, loads

SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS tasks (
    name TEXT PRIMARY KEY, origin TEXT NOT NULL, source_hash TEXT NOT NULL,
    body TEXT NOT NULL, created REAL NOT NULL);
CREATE TABLE IF NOT EXISTS candidates (
    task TEXT NOT NULL, hash TEXT NOT NULL, origin TEXT NOT NULL, parent TEXT,
    description TEXT NOT NULL, source TEXT NOT NULL, created REAL NOT NULL,
    PRIMARY KEY (task, hash));
CREATE TABLE IF NOT EXISTS evaluations (
    id INTEGER PRIMARY KEY AUTOINCREMENT, key TEXT NOT NULL UNIQUE, task TEXT NOT NULL,
    purpose TEXT NOT NULL, device TEXT NOT NULL, interpreted INTEGER NOT NULL,
    body TEXT NOT NULL, created REAL NOT NULL);
CREATE TABLE IF NOT EXISTS results (
    evaluation INTEGER NOT NULL REFERENCES evaluations(id), variant TEXT NOT NULL,
    hash TEXT NOT NULL, status TEXT NOT NULL, reason TEXT NOT NULL, detail TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS timings (
    evaluation INTEGER NOT NULL REFERENCES evaluations(id), variant TEXT NOT NULL,
    case_id TEXT NOT NULL, method TEXT NOT NULL, median_ms REAL, samples TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS decisions (
    id INTEGER PRIMARY KEY AUTOINCREMENT, task TEXT NOT NULL, round INTEGER NOT NULL,
    candidate TEXT NOT NULL, accepted INTEGER NOT NULL, speedup REAL, reason TEXT NOT NULL,
    body TEXT NOT NULL, created REAL NOT NULL);
CREATE TABLE IF NOT EXISTS profiles (
    id INTEGER PRIMARY KEY AUTOINCREMENT, task TEXT NOT NULL, candidate TEXT NOT NULL,
    case_id TEXT, body TEXT NOT NULL, created REAL NOT NULL);
CREATE TABLE IF NOT EXISTS records (
    kind TEXT NOT NULL, key TEXT NOT NULL, body TEXT NOT NULL, created REAL NOT NULL,
    PRIMARY KEY (kind, key));
"""


def _locked(method):
    """Serialize a method on the store's lock: one connection is shared by the driver's threads."""
    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        with self._lock:
            return method(self, *args, **kwargs)
    return wrapper


class RunStore:
    """A SQLite run store, safe to share between threads. Use as a context manager."""

    def __init__(self, path: str | Path):
        self._lock = threading.RLock()
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self.db = sqlite3.connect(str(self.path), timeout=30, isolation_level=None,
                                      check_same_thread=False)
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=NORMAL")
            self.db.executescript(_SCHEMA)
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"cannot open run store {self.path}: {exc}",
                             hint="delete it or choose another --run-dir") from None
        version = self.get_meta("schema_version")
        if version is None:
            self.set_meta("schema_version", str(SCHEMA_VERSION))
        elif int(version) != SCHEMA_VERSION:
            raise StoreError(f"run store {self.path} has schema {version}, this TritonForge "
                             f"writes {SCHEMA_VERSION}", hint="use a new --run-dir")

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> "RunStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ meta
    @_locked
    def get_meta(self, key: str) -> str | None:
        row = self.db.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return row[0] if row else None

    @_locked
    def set_meta(self, key: str, value: str) -> None:
        self.db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))

    # ------------------------------------------------------------------ tasks and candidates
    @_locked
    def put_task(self, task: Task) -> None:
        self.db.execute("INSERT OR REPLACE INTO tasks VALUES (?, ?, ?, ?, ?)",
                        (task.name, task.origin, task.source_hash, dumps(task), time.time()))

    @_locked
    def get_task(self, name: str) -> Task | None:
        row = self.db.execute("SELECT body FROM tasks WHERE name=?", (name,)).fetchone()
        return loads(row[0]) if row else None

    @_locked
    def put_candidate(self, task: str, candidate: Candidate) -> None:
        self.db.execute(
            "INSERT OR IGNORE INTO candidates VALUES (?, ?, ?, ?, ?, ?, ?)",
            (task, candidate.hash, candidate.origin, candidate.parent, candidate.description,
             candidate.source, time.time()))

    @_locked
    def candidates(self, task: str) -> list[Candidate]:
        rows = self.db.execute("SELECT source, origin, parent, description FROM candidates "
                               "WHERE task=? ORDER BY created", (task,)).fetchall()
        return [Candidate(r[0], r[1], r[2], r[3]) for r in rows]

    # ------------------------------------------------------------------ evaluations
    @_locked
    def put_evaluation(self, key: str, purpose: str, evaluation: Evaluation) -> None:
        with self.db:  # one transaction: an evaluation is all there or not at all
            self.db.execute("BEGIN")
            cur = self.db.execute(
                "INSERT OR REPLACE INTO evaluations (key, task, purpose, device, interpreted, body,"
                " created) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (key, evaluation.task, purpose, evaluation.device.name,
                 int(evaluation.device.interpreted), dumps(evaluation), time.time()))
            eid = cur.lastrowid
            for r in evaluation.results:
                self.db.execute("INSERT INTO results VALUES (?, ?, ?, ?, ?, ?)",
                                (eid, r.variant, r.hash, r.status.value,
                                 r.failure.reason if r.failure else "",
                                 r.failure.detail if r.failure else ""))
                for t in r.timings:
                    self.db.execute("INSERT INTO timings VALUES (?, ?, ?, ?, ?, ?)",
                                    (eid, t.variant, t.case_id, t.method.value, t.median_ms,
                                     dumps(t.samples_ms)))

    @_locked
    def get_evaluation(self, key: str) -> Evaluation | None:
        row = self.db.execute("SELECT body FROM evaluations WHERE key=?", (key,)).fetchone()
        return loads(row[0]) if row else None

    def evaluations(self, task: str | None = None, purpose: str | None = None) -> Iterator[tuple[str, Evaluation]]:
        query, args = "SELECT key, body FROM evaluations WHERE 1=1", []
        if task is not None:
            query += " AND task=?"
            args.append(task)
        if purpose is not None:
            query += " AND purpose=?"
            args.append(purpose)
        for key, body in self.db.execute(query + " ORDER BY id", args).fetchall():
            yield key, loads(body)

    # ------------------------------------------------------------------ decisions and profiles
    @_locked
    def put_decision(self, task: str, round_: int, decision: Decision) -> None:
        self.db.execute(
            "INSERT INTO decisions (task, round, candidate, accepted, speedup, reason, body, created)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (task, round_, decision.candidate, int(decision.accepted), decision.speedup,
             decision.reason, dumps(decision), time.time()))

    @_locked
    def decisions(self, task: str) -> list[tuple[int, Decision]]:
        rows = self.db.execute("SELECT round, body FROM decisions WHERE task=? ORDER BY id",
                               (task,)).fetchall()
        return [(r[0], loads(r[1])) for r in rows]

    @_locked
    def put_profile(self, task: str, candidate: str, profile: Profile) -> None:
        self.db.execute("INSERT INTO profiles (task, candidate, case_id, body, created) "
                        "VALUES (?, ?, ?, ?, ?)",
                        (task, candidate, profile.case_id, dumps(profile), time.time()))

    @_locked
    def latest_profile(self, task: str, candidate: str) -> Profile | None:
        row = self.db.execute("SELECT body FROM profiles WHERE task=? AND candidate=? "
                              "ORDER BY id DESC LIMIT 1", (task, candidate)).fetchone()
        return loads(row[0]) if row else None

    # ------------------------------------------------------------------ free-form records
    @_locked
    def put_record(self, kind: str, key: str, value: Any) -> None:
        """Any model object (or JSON-able value) under (kind, key): summaries, LLM usage, ..."""
        self.db.execute("INSERT OR REPLACE INTO records VALUES (?, ?, ?, ?)",
                        (kind, key, dumps(value), time.time()))

    @_locked
    def claim(self, kind: str, key: str, group: str, owner: str) -> bool:
        """Take ``(kind, key)`` for ``owner`` unless another owner of the same ``group`` (the
        shards of one suite run) holds it. A claim of another group is left from an earlier run
        that ended, killed or not, and is taken over. Atomic across processes: the check and the
        write happen under SQLite's write lock (BEGIN IMMEDIATE)."""
        self.db.execute("BEGIN IMMEDIATE")
        try:
            row = self.db.execute("SELECT body FROM records WHERE kind=? AND key=?",
                                  (kind, key)).fetchone()
            if row is not None:
                held = loads(row[0])
                if isinstance(held, dict) and held.get("group") == group and held.get("owner") != owner:
                    self.db.execute("COMMIT")
                    return False
            self.db.execute("INSERT OR REPLACE INTO records VALUES (?, ?, ?, ?)",
                            (kind, key, dumps({"group": group, "owner": owner}), time.time()))
            self.db.execute("COMMIT")
            return True
        except BaseException:
            self.db.execute("ROLLBACK")
            raise

    @_locked
    def get_record(self, kind: str, key: str) -> Any | None:
        row = self.db.execute("SELECT body FROM records WHERE kind=? AND key=?",
                              (kind, key)).fetchone()
        return loads(row[0]) if row else None

    @_locked
    def record_created(self, kind: str, key: str) -> float | None:
        """When the record ``(kind, key)`` was last written (``time.time()``), or None."""
        row = self.db.execute("SELECT created FROM records WHERE kind=? AND key=?",
                              (kind, key)).fetchone()
        return row[0] if row else None

    @_locked
    def forget_task(self, name: str, record_kind: str, keep_record: bool = False,
                    before: float | None = None) -> int:
        """Delete everything stored for task ``name`` (its ``record_kind`` record, evaluations with
        their results and timings, decisions, profiles, candidates), so that a resumed run does it
        again from scratch; returns how many evaluations went. Used to re-run a record after a
        harness fix, visibly (``bench optimize --redo``), instead of by hand. ``keep_record``
        keeps the record itself until a new one replaces it: a re-run cut off by the end of its
        call then leaves the earlier result, not none. ``before`` (a ``time.time()``): only the
        rows stored before then go; a cut re-run's own work, stored after it, stays."""
        when, args = ("", (name,)) if before is None else (" AND created < ?", (name, before))
        ids = [r[0] for r in self.db.execute(f"SELECT id FROM evaluations WHERE task=?{when}", args)]
        self.db.execute("BEGIN")
        try:
            for table in ("results", "timings"):
                self.db.executemany(f"DELETE FROM {table} WHERE evaluation=?", [(i,) for i in ids])
            self.db.executemany("DELETE FROM evaluations WHERE id=?", [(i,) for i in ids])
            for table in ("decisions", "profiles", "candidates"):
                self.db.execute(f"DELETE FROM {table} WHERE task=?{when}", args)
            if not keep_record:
                self.db.execute("DELETE FROM records WHERE kind=? AND key=?", (record_kind, name))
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")
        return len(ids)

    @_locked
    def records(self, kind: str) -> list[tuple[str, Any]]:
        rows = self.db.execute("SELECT key, body FROM records WHERE kind=? ORDER BY created",
                               (kind,)).fetchall()
        return [(k, loads(b)) for k, b in rows]
