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
        spec_case("large", "softmax", T(2, 256, scale=100.0)),      # exp overflows unshifted
    ]),
    "matmul": ("matmul_ref.py", [
        spec_case("round", "matmul", T(16, 32), T(32, 32)),
        spec_case("odd", "matmul", T(17, 37), T(37, 19)),
        spec_case("b_transposed", "matmul", T(16, 32), T(32, 16, layout="transposed")),
        spec_case("deep_k", "matmul", T(8, 600), T(600, 8)),       # K past 512
    ]),
    "layernorm": ("layernorm_ref.py", [
        spec_case("pow2", "layer_norm", T(8, 128), T(128), T(128)),
        spec_case("odd", "layer_norm", T(6, 100), T(100), T(100)),
    ]),
    "axpy": ("axpy_ref.py", [
        spec_case("n1000", "axpy_", 0.5, T(1000), T(1000)),
        spec_case("n4096", "axpy_", -1.5, T(4096), T(4096)),
        spec_case("n10000", "axpy_", 0.25, T(10000), T(10000)),      # past 8192 elements
    ]),
    "rowloss": ("rowloss_ref.py", [
        spec_case("a", "row_loss", T(8, 100)),
        spec_case("b", "row_loss", T(5, 64)),
    ]),
    "rowsum": ("rowsum_ref.py", [
        spec_case("a", "row_sums", T(16, 300)),
        spec_case("b", "row_sums", T(10, 1000)),
    ]),
    "adam": ("adam_ref.py", [
        spec_case("dense", "adam_step", T(1000), T(1000), T(1000), T(1000, init="rand"), 1e-2, 3),
        spec_case("zero_grads", "adam_step", T(300), T(300, init="zeros"), T(300),
                  T(300, init="rand"), 1e-2, 5),                     # exact-zero gradients
    ]),
    "scale": ("scale_ref.py", [
        spec_case("half", "scale", T(2000), 0.5),
        spec_case("identity", "scale", T(700, init="rand"), 1.0),      # the special value
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
    devices: tuple[str, ...] = ("cpu", "cuda")
    expect_case: str | None = None

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
                 consts.get("EXPECT_OUTPUT"), consts.get("POLICY"), consts.get("SYNC"),
                 tuple(consts.get("DEVICES", ("cpu", "cuda"))), consts.get("EXPECT_CASE"))


def _found(label: str, labels: tuple[str, ...]) -> bool:
    """``mismatch:value|norm`` (kinds of one prefix) or ``mismatch:value|cheat:race`` (any)."""
    prefix = label.split(":", 1)[0]
    for alt in label.split(":", 1)[1].split("|"):
        full = alt if ":" in alt else f"{prefix}:{alt}"
        if full in labels:
            return True
    return False


ENTRIES = [_read(p) for p in sorted(HERE.glob("*.py")) if not p.name.endswith("_ref.py")]
_counter = itertools.count()


def load(path: Path):
    spec = importlib.util.spec_from_file_location(f"catalogue_{path.stem}_{next(_counter)}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_catalogue_is_big_enough():
    cheats = [e for e in ENTRIES if not e.honest]
    assert len(cheats) >= 40 and len(ENTRIES) - len(cheats) >= 10
    assert {e.family for e in ENTRIES} == set(FAMILIES)


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.path.stem for e in ENTRIES])
def test_catalogue_variant(entry: Entry):
    if DEVICE not in entry.devices:
        pytest.skip(f"shows only on {', '.join(entry.devices)} (the interpreter runs programs "
                    f"one at a time)")
    ref_file, cases = FAMILIES[entry.family]
    original = (HERE / ref_file).read_text()
    policy = check_source(entry.path.read_text(), original=original)
    policy_labels = tuple(f"policy:{v.rule}" for v in policy.violations)
    if entry.policy:
        assert not policy.ok and any(v.rule == entry.policy for v in policy.violations), policy
    elif not any(label.startswith("policy:") for label in entry.expect):
        assert policy.ok, policy.reasons

    if entry.expect and all(label.startswith("policy:") for label in entry.expect):
        # refused before import, as the search refuses it: never run (a thread it starts would
        # run Triton's interpreter beside the original's, which is not thread-safe)
        for label in entry.expect:
            assert _found(label, policy_labels), (label, policy.reasons)
        return
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

    labels = policy_labels + reasons(verdict)
    if entry.honest:
        assert verdict.passed, verdict.summary(10)
        assert verdict.checked >= sum(len(c.seeds) for c in cases)
        return
    # a candidate the policy refuses is never imported by the search: that is its rejection
    assert not verdict.passed or not policy.ok
    for label in entry.expect:           # "mismatch:unwritten|nan": either (CPU vs GPU NaNs)
        assert _found(label, labels), f"expected {label}, got {labels}: {verdict.summary(10)}"
    if entry.expect_case:
        assert any(m.case_id == entry.expect_case for m in verdict.mismatches) or \
            any(c.case_id == entry.expect_case for c in verdict.violations), verdict.summary(10)
    if entry.expect_output:
        kinds = {k for label in entry.expect if label.startswith("mismatch:")
                 for k in label.split(":", 1)[1].split("|")}
        assert any(m.output == entry.expect_output and m.kind in kinds for m in verdict.mismatches), \
            verdict.summary(10)
