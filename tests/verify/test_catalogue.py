"""The catalogue: every cheating or subtly wrong variant is refused for the RIGHT reason, and every
honest variant is accepted (see catalogue/FAMILIES.md for the file format).

Each case runs the whole pipeline a worker runs: the static policy on the source, an integrity
snapshot taken BEFORE the candidate is imported, then ``verify`` against the original through the
Triton interpreter.
"""

from __future__ import annotations

import ast
import importlib.util
import itertools
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import DEVICE
from standin import T, build, spec_case
from tritonforge.verify import (
    VerifyOptions, check_source, integrity_snapshot, reasons, restore_integrity, verify,
)

HERE = Path(__file__).parent / "catalogue"

FAMILIES = {
    "softmax": ("softmax_ref.py", [
        spec_case("wide", "softmax", T(4, 4096)),
        spec_case("odd", "softmax", T(3, 1000)),
    ]),
    "matmul": ("matmul_ref.py", [
        spec_case("round", "matmul", T(16, 32), T(32, 32)),
        spec_case("odd", "matmul", T(17, 37), T(37, 19)),
        spec_case("b_transposed", "matmul", T(16, 32), T(32, 16, layout="transposed")),
    ]),
    "layernorm": ("layernorm_ref.py", [
        spec_case("pow2", "layer_norm", T(8, 128), T(128), T(128)),
        spec_case("odd", "layer_norm", T(6, 100), T(100), T(100)),
    ]),
    "axpy": ("axpy_ref.py", [
        spec_case("n1000", "axpy_", 0.5, T(1000), T(1000)),
        spec_case("n4096", "axpy_", -1.5, T(4096), T(4096)),
    ]),
    "rowloss": ("rowloss_ref.py", [
        spec_case("a", "row_loss", T(8, 100)),
        spec_case("b", "row_loss", T(5, 64)),
    ]),
    "rowsum": ("rowsum_ref.py", [
        spec_case("a", "row_sums", T(16, 300)),
        spec_case("b", "row_sums", T(10, 1000)),
    ]),
}


@dataclass(frozen=True)
class Entry:
    path: Path
    family: str
    expect: tuple[str, ...]          # () for honest
    expect_output: str | None
    policy: str | None
    sync: str | None

    @property
    def honest(self) -> bool:
        return not self.expect


def _read(path: Path) -> Entry:
    """Read the variant's constants without importing it."""
    consts = {}
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and \
                isinstance(node.targets[0], ast.Name) and node.targets[0].id.isupper():
            try:
                consts[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                pass
    expect = consts["EXPECT"]
    return Entry(path, consts["FAMILY"], () if expect == "honest" else tuple(expect),
                 consts.get("EXPECT_OUTPUT"), consts.get("POLICY"), consts.get("SYNC"))


ENTRIES = [_read(p) for p in sorted(HERE.glob("*.py")) if not p.name.endswith("_ref.py")]
_counter = itertools.count()


def load(path: Path):
    spec = importlib.util.spec_from_file_location(f"catalogue_{path.stem}_{next(_counter)}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_catalogue_is_big_enough():
    cheats = [e for e in ENTRIES if not e.honest]
    assert len(cheats) >= 12 and len(ENTRIES) - len(cheats) >= 5
    assert {e.family for e in ENTRIES} == set(FAMILIES)


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.path.stem for e in ENTRIES])
def test_catalogue_variant(entry: Entry):
    ref_file, cases = FAMILIES[entry.family]
    original = (HERE / ref_file).read_text()
    policy = check_source(entry.path.read_text(), original=original)
    if entry.policy:
        assert not policy.ok and any(v.rule == entry.policy for v in policy.violations), policy
    else:
        assert policy.ok, policy.reasons

    reference = load(HERE / ref_file)
    baseline = integrity_snapshot()              # before the candidate's import, as the worker does
    try:
        candidate = load(entry.path)
        sync = None
        if entry.sync == "pending":
            def sync():
                while candidate.PENDING:
                    candidate.PENDING.pop(0)()
        options = VerifyOptions(baseline=baseline, nonce=12345, catch_errors=True, synchronize=sync)
        verdict = verify(reference, candidate, cases, build, device=DEVICE, options=options)
    finally:
        restore_integrity(baseline)

    labels = reasons(verdict)
    if entry.honest:
        assert verdict.passed, verdict.summary(10)
        assert verdict.checked >= sum(len(c.seeds) for c in cases)
        return
    assert not verdict.passed
    for label in entry.expect:           # "mismatch:unwritten|nan": either (CPU vs GPU NaNs)
        assert any(f"{label.split(':')[0]}:{k}" in labels for k in label.split(":", 1)[1].split("|")), \
            f"expected {label}, got {labels}: {verdict.summary(10)}"
    if entry.expect_output:
        kinds = {k for label in entry.expect if label.startswith("mismatch:")
                 for k in label.split(":", 1)[1].split("|")}
        assert any(m.output == entry.expect_output and m.kind in kinds for m in verdict.mismatches), \
            verdict.summary(10)
