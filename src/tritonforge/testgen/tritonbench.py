"""Testgen on TritonBench-G records, with their performance scripts hidden from the generator.

The record's file is split into its kernel module and its test section (``tasks.tritonbench``);
only those two are written to the work folder and traced. The performance script is used by the
caller afterwards, to compare sizes and times, never by the generator.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..config import Settings
from ..tasks.tritonbench import Record, entries_of, split_source
from .generate import TestgenOptions, generate, module_source
from .model import TestgenResult
from .trace import INTERPRETER_SIGNS


@dataclass(frozen=True)
class RecordOutcome:
    """One record's testgen result and the coverage verdict drawn from it."""

    name: str
    status: str                  # ok | interpreter_limitation | test_fails | timeout | no_calls | no_cases | error
    result: TestgenResult | None
    perf_entries: tuple[str, ...]      # what the hidden perf script calls (for comparison only)
    detail: str = ""
    module_path: str = ""
    source: str = ""             # what the cases were validated on (module + the section's imports)


def record_status(result: TestgenResult) -> str:
    """ok when at least one correctness and one performance case survived validation."""
    if result.correctness and result.performance:
        return "ok"
    reasons = " ".join(d.reason for d in result.dropped)
    if (not result.correctness and result.dropped and result.device == "cpu"
            and ("(crash)" in reasons or any(sign in reasons for sign in INTERPRETER_SIGNS))):
        return "interpreter_limitation"      # the worker's interpreter failed the original too
    if result.failure_kind in ("interpreter_limitation", "timeout", "test_fails"):
        return result.failure_kind
    if not result.cases:
        return result.failure_kind or "no_cases"
    return "no_perf" if not result.performance else "no_correctness"


def generate_for_record(record: Record, settings: Settings, work_dir: str | Path, *,
                        options: TestgenOptions = TestgenOptions(), device: str | None = None) -> RecordOutcome:
    work = Path(work_dir) / record.name
    work.mkdir(parents=True, exist_ok=True)
    module, section = split_source(record.source)
    module_path = work / f"{record.name}.py"
    section_path = work / "test_section.py"
    module_path.write_text(module, encoding="utf-8")
    section_path.write_text(section, encoding="utf-8")
    try:
        result = generate(module_path, settings, work, options=options,
                          section_path=section_path if section.strip() else None, device=device)
    except Exception as exc:  # noqa: BLE001 - a generator bug on one record must not stop a sweep
        return RecordOutcome(record.name, "error", None, entries_of(record),
                             f"{type(exc).__name__}: {exc}", str(module_path))
    detail = result.trace.error or ""
    source = module_source(module_path, section_path if section.strip() else None)[0]
    return RecordOutcome(record.name, record_status(result), result, entries_of(record), detail,
                         str(module_path), source)
