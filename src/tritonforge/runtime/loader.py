"""Import a variant's source as a fresh module with a unique key.

``@triton.jit`` reads its function's source through ``inspect``, so a variant must live in a real
file. Each import is registered in ``sys.modules`` under a key of its own (``tf_<label>_<hash>``:
the worker keeps one module per variant and autotune mode), but with ``shown_as`` the module
itself is named after the task and read from ``<directory>/<source hash>/<task>.py``: what a
candidate can see of its own module (``repr`` of a jit kernel, its ``.module``, a class's
``repr``, a logger's name, the file a warning names) is then the same in a verification, a timed
run and any other request. Named by its label, a candidate's kernel read ``JITFunction(
tf_<task>_<variant>_verify_<hash>:k)`` in a verification and ``..._short_...`` when timed: a
candidate could be right exactly when verified. ``module_key`` gives the registered key.
Support modules (TritonBench's ``performance_utils``) are registered under their own names.
"""

from __future__ import annotations

import importlib.util
import sys
import types
import weakref
from pathlib import Path

from ..model import content_hash


def write_module_file(directory: Path, stem: str, source: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{stem}.py"
    if not path.exists() or path.read_text(encoding="utf-8") != source:
        path.write_text(source, encoding="utf-8")
    return path


_KEYS: "weakref.WeakKeyDictionary[types.ModuleType, str]" = weakref.WeakKeyDictionary()


def _identifier(text: str) -> str:
    safe = "".join(ch if ch.isalnum() else "_" for ch in text)[:40] or "kernel"
    return safe if not safe[0].isdigit() else f"k_{safe}"


def module_key(module: types.ModuleType) -> str:
    """The key ``module`` is registered under in ``sys.modules``: unique per label and source,
    where its ``__name__`` (``shown_as``) is shared by every variant of a task."""
    return _KEYS.get(module, module.__name__)


def import_source(directory: Path, label: str, source: str,
                  shown_as: str | None = None) -> types.ModuleType:
    """Import ``source`` as a new module, registered as ``tf_<label>_<hash>`` (one module per
    label and source, cached); with ``shown_as`` it is named so and read from a file of that
    name (module docstring)."""
    key = f"tf_{_identifier(label)}_{content_hash(source)}"
    if key in sys.modules:
        return sys.modules[key]
    name = _identifier(shown_as) if shown_as else key
    folder = directory / f"s{content_hash(source)}" if shown_as else directory
    path = write_module_file(folder, name, source)
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[key] = module
    _KEYS[module] = key
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(key, None)
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
