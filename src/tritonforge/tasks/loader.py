"""Build a Task from what the user points at: a kernel file (+ spec) or a TritonBench-G name."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from ..errors import SpecError
from ..model import Task
from .source import check_entries, read_source, summarize_source
from .spec import load_spec


def default_spec_path(kernel_path: Path) -> Path:
    return kernel_path.with_suffix(".toml")


def task_from_file(kernel_path: str | Path, spec_path: str | Path | None = None,
                   entry: str | None = None) -> Task:
    """A task from a kernel file and its case spec (default: the .toml beside the file)."""
    path = Path(kernel_path)
    source = read_source(path)
    summary = summarize_source(source, str(path))
    spec_file = Path(spec_path) if spec_path else default_spec_path(path)
    if not spec_file.exists():
        raise SpecError(
            f"no case spec for {path.name}: {spec_file} does not exist",
            hint=f"write one (README: 'Writing a spec'), or generate it with "
                 f"`tritonforge testgen {path}`",
        )
    doc = load_spec(spec_file)
    cases = doc.cases
    if entry:
        cases = tuple(replace(c, recipe=replace(c.recipe, entry=entry)) for c in cases)
    entries = tuple(sorted({c.recipe.entry for c in cases}))
    check_entries(summary, entries, str(path))
    if doc.reference:
        check_entries(summary, (doc.reference,), str(path))
    return Task(
        name=path.stem, source=source, entries=entries, cases=cases,
        origin=f"file:{path}", source_path=str(path.resolve()),
        tolerance_overrides=doc.tolerances, reference=doc.reference,
    )
