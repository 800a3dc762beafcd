"""Print the catalogue table (variant, expected reasons, what the verifier said): ``python
print_catalogue.py`` here (CPU, interpreter) or with TRITONFORGE_VERIFY_DEVICE=cuda on a GPU."""

from __future__ import annotations

import time
import warnings

import conftest  # noqa: F401 - sets TRITON_INTERPRET before triton loads
from conftest import DEVICE
from standin import build
from test_catalogue import ENTRIES, FAMILIES, HERE, load
from tritonforge.verify import (
    VerifyOptions, check_source, integrity_snapshot, reasons, restore_integrity, verify,
)


def main() -> None:
    warnings.filterwarnings("ignore")
    print(f"device: {DEVICE}")
    for entry in ENTRIES:
        ref_file, cases = FAMILIES[entry.family]
        if DEVICE not in entry.devices:
            print(f"| {entry.path.stem} | {', '.join(entry.expect)} | not on {DEVICE} | - |")
            continue
        policy = check_source(entry.path.read_text(), original=(HERE / ref_file).read_text())
        refused = ", ".join(f"policy:{v.rule}" for v in policy.violations)
        if entry.expect and all(label.startswith("policy:") for label in entry.expect):
            print(f"| {entry.path.stem} | {', '.join(entry.expect)} | {refused} (not run) | - |")
            continue
        reference = load(HERE / ref_file)
        baseline = integrity_snapshot()
        candidate = load(entry.path)

        def sync(c=candidate):
            while c.PENDING:
                c.PENDING.pop(0)()

        started = time.perf_counter()
        verdict = verify(reference, candidate, cases, build, device=DEVICE,
                         options=VerifyOptions(baseline=baseline, nonce=12345, catch_errors=True,
                                               synchronize=sync if entry.sync else None))
        restore_integrity(baseline)
        expected = ", ".join(entry.expect) or "honest"
        got = ", ".join(filter(None, [refused, ", ".join(reasons(verdict))])) or "accepted"
        print(f"| {entry.path.stem} | {expected} | {got} | {time.perf_counter() - started:.1f}s |")
        for cheat in verdict.violations:
            if f"cheat:{cheat.kind}" not in entry.expect:
                print(f"    unexpected: {cheat.one_line()}")


if __name__ == "__main__":
    main()
