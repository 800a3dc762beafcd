#!/usr/bin/env python3
"""For merging branches written before the runtime rename (delete once every branch is merged):
rewrites imports of runtime.service (to evaluator, gpu_lock, hardware, timing_plan), runtime.client
(worker_client) and runtime.evaluate (worker_evaluate) in the files named.

    python3 scripts/rename_runtime_imports.py $(git grep -lE "runtime[.](service|client|evaluate)|from [.](client|evaluate) import")
"""
import pathlib
import re
import sys

WHERE = {
    "Evaluator": "evaluator", "PrestartedEvaluators": "evaluator", "original_variant": "evaluator",
    "COMPILE_PASS_RUNS": "evaluator",
    "GPU_LOCK_ENV": "gpu_lock", "GPU_LOCK_SCOPE_ENV": "gpu_lock", "gpu_blocked_s": "gpu_lock",
    "gpu_lock": "gpu_lock", "gpu_lock_covers_all": "gpu_lock", "lock_mode": "gpu_lock",
    "resolve_device": "hardware", "cuda_available": "hardware",
    "timing_plan": "timing_plan", "final_check_plan": "timing_plan",
}
IMPORT = re.compile(r"^(?P<ind>[ \t]*)from (?P<pre>(?:\.+|tritonforge\.|\.\.)?(?:runtime\.)?)service import (?P<names>\([^)]*\)|[^\n]*)(?P<tail>[ \t]*(#[^\n]*)?)$", re.M)


def split_import(m):
    pre = m.group("pre")
    if not (pre.endswith("runtime.") or pre == "."):
        return m.group(0)
    names = m.group("names").strip("()")
    comment = ""
    if "#" in names:
        names, comment = names.split("#", 1)
        comment = "  #" + comment
    items = [n.strip() for n in names.replace("\n", " ").split(",") if n.strip()]
    groups = {}
    for it in items:
        base = it.split(" as ")[0].strip()
        groups.setdefault(WHERE[base], []).append(it)
    tail = m.group("tail") or ""
    lines = []
    for mod in sorted(groups):
        line = f"{m.group('ind')}from {pre}{mod} import {', '.join(groups[mod])}"
        if len(line) > 100:
            line = (f"{m.group('ind')}from {pre}{mod} import (\n{m.group('ind')}    "
                    f"{', '.join(groups[mod])},\n{m.group('ind')})")
        lines.append(line)
    extra = comment or tail
    if "noqa" in extra:
        lines = [ln + extra for ln in lines]
    else:
        lines[-1] += extra
    return "\n".join(lines)


def attr_ref(m):
    name = m.group(2)
    return f"{m.group(1)}{WHERE.get(name, 'evaluator')}.{name}"


for p in sys.argv[1:]:
    path = pathlib.Path(p)
    if path.resolve() == pathlib.Path(__file__).resolve():
        continue
    s = path.read_text()
    o = s
    s = IMPORT.sub(split_import, s)
    s = re.sub(r"\bruntime\.client\b", "runtime.worker_client", s)
    s = re.sub(r"\bruntime\.evaluate\b", "runtime.worker_evaluate", s)
    if "tritonforge/runtime/" in p:
        s = re.sub(r"^(\s*)from \.client import", r"\1from .worker_client import", s, flags=re.M)
        s = re.sub(r"^(\s*)from \.evaluate import", r"\1from .worker_evaluate import", s, flags=re.M)
    s = re.sub(r"\b(runtime\.)service\.(\w+)", attr_ref, s)
    s = re.sub(r"\bservice\._compile_first\b", "Evaluator._compile_first", s)
    s = re.sub(r"``evaluate\.(\w+)``", r"``worker_evaluate.\1``", s)
    s = re.sub(r"`evaluate\._timing_order`", "`worker_evaluate._timing_order`", s)
    if s != o:
        path.write_text(s)
        print("changed", p)
