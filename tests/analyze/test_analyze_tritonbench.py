"""The analyzer on the 142 TritonBench-G kernel modules (read from ../shared at run time).

Nothing of those files is committed: the test skips when the data set is absent.
"""

import json
from pathlib import Path

import pytest

from tritonforge.analyze import analyze_source

DATA = Path(__file__).resolve().parents[3] / "shared" / "tritonbench_g" / "kernels.json"
SEPARATOR = "#" * 146


def _modules() -> list[tuple[str, str]]:
    records = json.loads(DATA.read_text(encoding="utf-8"))
    return [(r["name"], r["source"].split(SEPARATOR)[0]) for r in records]


pytestmark = pytest.mark.skipif(not DATA.exists(), reason=f"{DATA} not present")


@pytest.fixture(scope="module")
def analyzed():
    out = []
    for name, source in _modules():
        try:
            out.append((name, source, analyze_source(source, filename=name)))
        except Exception as exc:   # noqa: BLE001 - collect every failure, report them together
            out.append((name, source, exc))
    return out


def test_every_module_is_analyzed_consistently(analyzed):
    assert len(analyzed) == 142
    failures = []
    for name, source, a in analyzed:
        if isinstance(a, Exception):
            failures.append(f"{name}: {type(a).__name__}: {a}")
            continue
        problems = []
        if not a.kernels:
            problems.append("no kernel")
        if not a.launch_sites:
            problems.append("no launch site")
        if not a.entry_candidates:
            problems.append("no entry candidate")
        names = {k.name for k in a.kernels}
        lines = source.splitlines()
        for s in a.launch_sites:
            if s.kernel not in names:
                problems.append(f"site {s.index} launches unknown {s.kernel}")
            named = s.alias or s.kernel      # a launch through a local alias names the alias
            if not lines[s.span.line - 1][s.span.col:].lstrip("(").startswith(
                    (named, "self.", "cls.")) and named not in lines[s.span.line - 1]:
                problems.append(f"site {s.index} span {s.span} does not start at the launch")
            for arg in s.args:
                if arg.param is None and not s.has_star_args:
                    problems.append(f"site {s.index} argument {arg.source!r} bound to nothing")
            assert s.knobs is not None and s.knobs.site == s.index
        for k in a.kernels:
            if not lines[k.def_line - 1].lstrip().startswith("def " + k.name):
                problems.append(f"kernel {k.name} def_line {k.def_line} is off")
            if (k.stores or k.atomics) and k.unresolved_accesses:
                problems.append(f"kernel {k.name}: {k.unresolved_accesses} unresolved writes")
        if problems:
            failures.append(f"{name}: " + "; ".join(problems))
    assert not failures, "\n".join(failures)


def test_corpus_statistics_are_plausible(analyzed):
    analyses = [a for _, _, a in analyzed if not isinstance(a, Exception)]
    kernels = [k for a in analyses for k in a.kernels]
    sites = [s for a in analyses for s in a.launch_sites]
    assert len(kernels) >= 200 and len(sites) >= 180
    assert sum(k.autotune is not None for k in kernels) >= 50
    assert sum(bool(k.tiled_constexprs) for k in kernels) >= 120
    assert sum(k.uses_dot for k in kernels) >= 40
    tunable = [kn for s in sites for kn in s.knobs.constexprs if kn.tunable and kn.block_like]
    assert len(tunable) >= 60
