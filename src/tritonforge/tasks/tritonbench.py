"""TritonBench-G records as tasks.

A record (``../shared/tritonbench_g/kernels.json``) holds the kernel file (kernel and wrapper, then
a line of 146 ``#``, then a test section ending in ``result_gold = test_...()``) and a performance
script that imports the wrapper as ``TritonBench_v1.<name>`` and ``performance_utils``. The data
is read at run time from where the user keeps it; none of it is part of TritonForge.

Cases of a record's task (BENCHMARK.md):
- correctness: the test section run under 3 seeds (its returned results compared), plus every
  performance case;
- performance: each input the performance script builds (``perf-00``, ``perf-01``, ...). Their
  number is found by running the script's ``get_input_tensors`` on PyTorch's meta device in a
  throwaway process (no memory is allocated); ``golden``'s length is the fallback.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from ..config import env_settings
from ..errors import InputError, UnknownBenchmarkError
from ..model import Case, CaseRole, PerfScriptCall, Task, TestSectionCall

SEPARATOR = "#" * 146
_IMPORT = re.compile(r"^from TritonBench_v1\.(\w+) import ([^\n#]+)", re.M)


@dataclass(frozen=True)
class Record:
    name: str
    source: str
    perf_source: str
    category: str
    difficulty: str
    repo: str
    golden_sizes: int


def default_data_dir() -> Path | None:
    """Where the TritonBench-G data is: $TRITONFORGE_TRITONBENCH, or ../shared beside a checkout."""
    env = env_settings().tritonbench
    candidates = [Path(env)] if env else []
    here = Path.cwd()
    candidates += [p / "shared" / "tritonbench_g" for p in (here, *here.parents)]
    repo = Path(__file__).resolve().parents[3]
    candidates += [repo.parent / "shared" / "tritonbench_g"]
    for c in candidates:
        if (c / "kernels.json").exists():
            return c
    return None


def load_records(data_dir: str | Path | None = None) -> dict[str, Record]:
    directory = Path(data_dir) if data_dir else default_data_dir()
    if directory is None or not (directory / "kernels.json").exists():
        raise InputError(
            "TritonBench-G data not found",
            hint="set TRITONFORGE_TRITONBENCH to the folder holding kernels.json and harness.json",
        )
    rows = json.loads((directory / "kernels.json").read_text())
    return {r["name"]: Record(r["name"], r["source"], r["perf_source"], r.get("category", ""),
                              str(r.get("difficulty", "")), r.get("repo", ""),
                              len(r.get("golden") or []))
            for r in rows}


def load_harness(data_dir: str | Path | None = None) -> str:
    directory = Path(data_dir) if data_dir else default_data_dir()
    assert directory is not None
    return json.loads((directory / "harness.json").read_text())["performance_utils.py"]


def split_source(source: str) -> tuple[str, str]:
    """(kernel module, test section) of a record's source."""
    lines = source.splitlines(keepends=True)
    for i, line in enumerate(lines):
        if line.strip() == SEPARATOR:
            return "".join(lines[:i]), "".join(lines[i + 1:])
    return source, ""


def entries_of(record: Record) -> tuple[str, ...]:
    names: list[str] = []
    for _, imported in _IMPORT.findall(record.perf_source):
        names += [n.strip() for n in imported.split(",") if n.strip()]
    return tuple(names)


# A child process that runs each performance script's get_input_tensors() on the meta device
# (nothing allocated) with stand-ins for TritonBench_v1 and performance_utils. Code put between
# META_PERF_PRELUDE and META_PERF_END (8 spaces in, with `name` and `inst`) sets results[name].
META_PERF_PRELUDE = r"""
import json, sys, types, torch
torch.set_default_device("meta")
results = {}
for name, script in json.load(sys.stdin).items():
    try:
        class _Any(types.ModuleType):
            def __getattr__(self, attr):
                return lambda *a, **k: None
        pkg = types.ModuleType("TritonBench_v1"); pkg.__path__ = []
        sys.modules["TritonBench_v1"] = pkg
        sys.modules["TritonBench_v1." + name] = _Any(name)
        pu = types.ModuleType("performance_utils")
        class Performance_Metrics:
            def __init__(self, *a, **k): self.input_tensors = []
        pu.Performance_Metrics = Performance_Metrics; pu.do_bench_config = object
        sys.modules["performance_utils"] = pu
        ns = {"__name__": "perf", "__file__": "/tmp/x/perf.py"}
        exec(compile(script, name, "exec"), ns)
        inst = ns["performance_metrics"]()
        inst.get_input_tensors()
"""
META_PERF_END = r"""    except BaseException:
        results[name] = None
print(json.dumps(results))
"""
# per input: the elements of every tensor in it (nested tuples, lists and dicts walked)
_ELEMENTS_SCRIPT = META_PERF_PRELUDE + r"""        def numel(v):
            if isinstance(v, torch.Tensor):
                return v.numel()
            if isinstance(v, (list, tuple)):
                return sum(numel(x) for x in v)
            if isinstance(v, dict):
                return sum(numel(x) for x in v.values())
            return 0
        results[name] = [numel(x) for x in inst.input_tensors]
""" + META_PERF_END


def perf_input_elements(records: list[Record], timeout_s: float = 300.0) -> dict[str, tuple[int, ...] | None]:
    """Tensor elements of each input each record's performance script builds (None: could not
    tell), found on the meta device: the CPU interpreter runs only the small ones."""
    payload = json.dumps({r.name: r.perf_source for r in records})
    try:
        proc = subprocess.run([sys.executable, "-c", _ELEMENTS_SCRIPT], input=payload, text=True,
                              capture_output=True, timeout=timeout_s)
        found = json.loads(proc.stdout.strip().splitlines()[-1])
    except (subprocess.TimeoutExpired, json.JSONDecodeError, IndexError):
        found = {}
    return {r.name: tuple(found[r.name]) if found.get(r.name) is not None else None for r in records}


def count_perf_inputs(records: list[Record], timeout_s: float = 300.0) -> dict[str, int | None]:
    """How many inputs each record's performance script builds (None: could not tell)."""
    return {name: None if sizes is None else len(sizes)
            for name, sizes in perf_input_elements(records, timeout_s).items()}


def task_from_record(record: Record, harness: str, perf_count: int | None = None,
                     seeds: int = 3, perf_elements: tuple[int, ...] | None = None) -> Task:
    """The record's task; ``perf_elements`` (``perf_input_elements``) gives the number of
    performance inputs and the size of each (which ones the CPU interpreter can run)."""
    module, tests = split_source(record.source)
    if perf_elements is not None:
        perf_count = len(perf_elements)
    n = perf_count if perf_count is not None else record.golden_sizes
    cases = [Case("test", CaseRole.CORRECTNESS, TestSectionCall(tests), tuple(range(seeds)),
                  "the record's test section")] if tests.strip() else []
    cases += [Case(f"perf-{i:02d}", CaseRole.PERFORMANCE,
                   PerfScriptCall(record.perf_source, record.name, i,
                                  perf_elements[i] if perf_elements is not None else None), (0,),
                   f"performance input {i}") for i in range(n)]
    notes = () if perf_count is not None else ("performance-input count taken from golden",)
    return Task(name=record.name, source=module, entries=entries_of(record), cases=tuple(cases),
                origin=f"tritonbench:{record.name}",
                support_modules=(("performance_utils", harness),), notes=notes)


def load_tasks(names: list[str] | None = None, data_dir: str | Path | None = None) -> list[Task]:
    records = load_records(data_dir)
    if names:
        missing = [n for n in names if n not in records]
        if missing:
            close = [k for k in records if any(m[:5] in k for m in missing)][:5]
            raise UnknownBenchmarkError(
                f"not in the TritonBench-G data: {', '.join(missing)}",
                hint=("did you mean: " + ", ".join(close)) if close else
                     f"{len(records)} names are known; list them with `tritonforge bench list`")
        chosen = [records[n] for n in names]
    else:
        chosen = list(records.values())
    harness = load_harness(data_dir)
    sizes = perf_input_elements(chosen)
    return [task_from_record(r, harness, perf_elements=sizes.get(r.name)) for r in chosen]
