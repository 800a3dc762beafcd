"""Which engine and which settings made a benchmark record: a pass is one engine, one setting.

A published figure must come from one engine commit: a record optimized by another engine (a
fix between two device calls) is a different experiment. The commit is the last commit of the
package's checkout that changed the package (``git log -1 -- src/tritonforge``), unless
``$TRITONFORGE_ENGINE_COMMIT`` names it (a GPU machine gets a copy of the working tree, without
``.git`` or inside a stale checkout), or, with neither, the package version. The
check itself compares a hash of every Python source of the package, which exists everywhere and
also catches uncommitted edits; the commit is what a reader is told.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import subprocess
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from ..config import Settings

PACKAGE_DIR = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class EngineId:
    commit: str          # git HEAD (``+dirty`` when sources differ from it), env, or version
    source_hash: str     # sha256 prefix over the package's Python sources

    @property
    def label(self) -> str:
        return f"{self.commit} (sources {self.source_hash})"


def source_hash(package_dir: Path = PACKAGE_DIR) -> str:
    """A hash of every Python source of the package: any change to the engine changes it."""
    digest = hashlib.sha256()
    for path in sorted(package_dir.rglob("*.py")):
        digest.update(path.relative_to(package_dir).as_posix().encode())
        digest.update(b"\0")
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def _git(package_dir: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(["git", "-C", str(package_dir), *args], capture_output=True,
                              text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def _version() -> str:
    try:
        return version("tritonforge")
    except PackageNotFoundError:
        return "unversioned"


def engine_id(package_dir: Path = PACKAGE_DIR, env: dict | None = None) -> EngineId:
    """The engine that runs here (see the module's docstring for where the commit comes from)."""
    env = os.environ if env is None else env
    sources = source_hash(package_dir)
    # the last commit that changed the package: commits of records and results between two
    # calls of one pass do not change the engine
    # the variable comes first: a GPU machine's copy of the tree may sit in a stale checkout
    # whose git names another commit (seen on an H100: a commit of the day before)
    if env.get("TRITONFORGE_ENGINE_COMMIT"):
        return EngineId(env["TRITONFORGE_ENGINE_COMMIT"][:12], sources)
    head = _git(package_dir, "log", "-1", "--format=%H", "--", ".")
    if head:
        dirty = _git(package_dir, "status", "--porcelain", "--", ".")
        return EngineId(head[:12] + ("+dirty" if dirty else ""), sources)
    return EngineId(f"v{_version()}", sources)


# where, not what: paths of this machine and this call. A pass on an H100 (2026-11-26) refused
# its own first records on the next call: the progress log's path is a fresh temporary folder
# each call, and it was part of the settings compared.
SETTINGS_NOT_COMPARED = ("run_dir", "llm_api_key_env", "progress_log", "tritonbench", "ncu",
                         "cache_dir", "gpu_lock")


def settings_view(settings: Settings, per_kernel_s: float) -> dict:
    """The settings a record was made with, as JSON-ready values (the run folder left out)."""
    values = {k: v for k, v in dataclasses.asdict(settings).items() if k not in SETTINGS_NOT_COMPARED}
    values["per_kernel_s"] = per_kernel_s
    return values


def settings_hash(settings: Settings, per_kernel_s: float) -> str:
    text = json.dumps(settings_view(settings, per_kernel_s), sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:12]
