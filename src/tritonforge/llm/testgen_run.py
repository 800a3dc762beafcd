"""LLM-written cases, end to end: ask the model for a spec, then keep only what the original runs.

The paper's test generator is an LLM; here it is an option beside the tracing generator
(``tritonforge testgen FILE --llm``). A model's spec is never trusted as it is: every case is run
on the ORIGINAL in the worker (``testgen.validate.run_original``), and a case the original fails on
is dropped with a note, exactly as for traced cases.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from ..config import Settings
from ..errors import SpecError
from ..model import Task
from ..runtime.evaluator import Evaluator
from ..tasks.source import check_entries, read_source, summarize_source
from ..tasks.spec import write_spec
from ..testgen.model import Dropped
from ..testgen.validate import run_original
from .client import build_client
from .factory import budget_from_settings
from .testgen import generate_spec


@dataclass(frozen=True)
class LLMTestgenOutcome:
    spec_text: str                 # the validated spec ("" when nothing is left)
    kept: tuple[str, ...]
    dropped: tuple[Dropped, ...]
    reason: str = ""               # why there is no spec, when there is none
    notes: tuple[str, ...] = field(default=())


def llm_generate_cases(kernel_path: str | Path, settings: Settings, *,
                       entries: tuple[str, ...] = (), out: str | Path | None = None,
                       client=None) -> LLMTestgenOutcome:
    path = Path(kernel_path)
    source = read_source(path)
    summary = summarize_source(source, str(path))
    if not entries:
        entries = tuple(f for f in summary.functions if not f.startswith("test"))
    check_entries(summary, entries, str(path))
    run_dir = Path(settings.run_dir)
    client = client or build_client(settings, run_dir)
    result = generate_spec(client, source, entries, budget=budget_from_settings(settings, run_dir))
    if not result.ok or result.spec is None:
        return LLMTestgenOutcome("", (), (), f"the model gave no usable spec: {result.reason}")
    doc = result.spec
    task = Task(path.stem, source, tuple(sorted({c.recipe.entry for c in doc.cases})), doc.cases,
                f"llm-testgen:{path}", str(path.resolve()))
    with Evaluator(settings, run_dir / "llm-testgen") as evaluator:
        validation = run_original(evaluator, task, tuple(c.id for c in doc.cases))
    kept = tuple(c for c in doc.cases if c.id in validation.kept)
    if not kept:
        return LLMTestgenOutcome("", (), validation.dropped,
                                 "the original failed on every case the model wrote")
    notes = tuple(f"dropped {d.case_id}: {d.reason}" for d in validation.dropped)
    try:
        text = write_spec(doc.entry, kept, doc.seeds,
                          comments=("cases written by an LLM, each run on the original first",)
                          + notes)
    except SpecError as exc:
        return LLMTestgenOutcome("", (), validation.dropped, exc.render())
    if out is not None:
        Path(out).write_text(text)
    return LLMTestgenOutcome(text, tuple(c.id for c in kept), validation.dropped,
                             notes=validation.notes)
