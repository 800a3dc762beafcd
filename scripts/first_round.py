#!/usr/bin/env python3
"""What the rule proposer (or, with --config-search, the config search) offers in round 1 for each
record of the subset, without a GPU (no profile, no diagnosis): a quick check, on this machine,
that a change to the analysis, the rules or the config space moves the proposals the way it was
meant to and breaks none (each record in about 1 s).

    python3 scripts/first_round.py [NAMES_FILE_OR_COMMA_LIST] [--budget 6] [--config-search]

Reads the TritonBench-G data from $TRITONFORGE_TRITONBENCH or ../shared/tritonbench_g. Prints one
line per record: how many candidates and their descriptions, or the error a proposer raised.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from tritonforge.model import Candidate, HardwareInfo, ProposalContext  # noqa: E402
from tritonforge.search.config_search import ConfigSearchProposer  # noqa: E402
from tritonforge.search.rules import RuleProposer  # noqa: E402
from tritonforge.tasks.tritonbench import load_harness, load_records, task_from_record  # noqa: E402

H100 = HardwareInfo("NVIDIA H100 80GB HBM3", False, sm_count=132, capability="9.0")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="?", default=str(ROOT / "bench/results/subset-40.txt"))
    parser.add_argument("--budget", type=int, default=6)
    parser.add_argument("--config-search", action="store_true",
                        help="the config search's proposals (all of the round) instead of the rules'")
    args = parser.parse_args(argv)
    path = Path(args.names)
    names = ([ln.strip() for ln in path.read_text().splitlines()
              if ln.strip() and not ln.startswith("#")] if "," not in args.names and path.is_file()
             else [n for n in args.names.split(",") if n])
    records, harness = load_records(), load_harness()
    failed = 0
    for name in names:
        t0 = time.perf_counter()
        try:
            task = task_from_record(records[name], harness)
            ctx = ProposalContext(task, Candidate(task.source, "original"), 1, H100,
                                  budget=args.budget)
            proposer = ConfigSearchProposer(share=1.0) if args.config_search else RuleProposer()
            cands = proposer.propose(ctx)
        except Exception as exc:  # noqa: BLE001 - report every record, then the count
            failed += 1
            print(f"{name:28s} ERROR {type(exc).__name__}: {str(exc)[:150]}")
            continue
        print(f"{name:28s} {len(cands)} {time.perf_counter() - t0:4.1f}s | "
              + " ; ".join(c.description for c in cands))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
