"""Import a variant's source as a fresh module with a unique name.

``@triton.jit`` reads its function's source through ``inspect``, so a variant must live in a real
file: each one is written under the worker's module directory as ``tf_<name>_<hash>.py`` and
imported from there. Support modules (TritonBench's ``performance_utils``) are registered under
their own names.
"""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path

from ..model import content_hash


def write_module_file(directory: Path, stem: str, source: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{stem}.py"
    if not path.exists() or path.read_text(encoding="utf-8") != source:
        path.write_text(source, encoding="utf-8")
    return path


def import_source(directory: Path, label: str, source: str) -> types.ModuleType:
    """Import ``source`` as a new module (never cached across calls with the same name)."""
    safe = "".join(ch if ch.isalnum() else "_" for ch in label)[:40]
    name = f"tf_{safe}_{content_hash(source)}"
    if name in sys.modules:
        return sys.modules[name]
    path = write_module_file(directory, name, source)
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def install_support_modules(directory: Path, modules: tuple[tuple[str, str], ...]) -> None:
    """Make each (name, source) importable under ``name`` (e.g. ``performance_utils``)."""
    for name, source in modules:
        if name in sys.modules and getattr(sys.modules[name], "__tf_hash__", None) == content_hash(source):
            continue
        path = write_module_file(directory, name, source)
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        module.__tf_hash__ = content_hash(source)  # type: ignore[attr-defined]
        sys.modules[name] = module
        spec.loader.exec_module(module)
