"""The optimization benchmark over TritonBench-G: a fixed subset, BENCHMARK.md's figures, resumable.

The subset rule (documented in bench/results/README.md, never tuned on outcomes): take the
records a baseline sweep found runnable, group them by category, sort each group by name, then
take one record from each category in turn (categories in name order) until ``size`` records are
chosen. Every category is covered, and no record is chosen by how well it goes.

A pass itself (queue, lanes, records.jsonl) is ``bench.passes``; this module keeps the subset rule
and the figures and reasons read from OptimizeResults (older stores' records included).
"""

from __future__ import annotations

import math
import re
import statistics
import time
from collections import defaultdict
from dataclasses import replace

from ..model import Status
from ..runtime.worker_client import CUT_REASON
from ..search.loop import SLIVER_RETIMED


def choose_subset(runnable: list[tuple[str, str]], size: int) -> list[str]:
    """``runnable`` is (name, category) pairs; round-robin over categories, names in order."""
    groups: dict[str, list[str]] = defaultdict(list)
    for name, category in sorted(runnable):
        groups[category].append(name)
    chosen: list[str] = []
    while len(chosen) < size and any(groups.values()):
        for category in sorted(groups):
            if groups[category] and len(chosen) < size:
                chosen.append(groups[category].pop(0))
    return chosen


FINAL_NO_TIME = "no time left to check the search's best in a fresh process"
FINAL_SIZE = "the final check found the search's best slower on some size"
FINAL_REJECTED = "the fresh-process final check rejected the search's best"
_SLOWER = re.compile(r"\bis \d+(\.\d+)?% slower")


def final_phase_loss(notes) -> str:
    """Why the final phase kept the original though the search had a candidate, from its first
    final check's note (``search.final_check``: "final check rejected 'X': why" or "final check
    of 'X': why"): the record's time ran out before it (the cap, or too little left for its
    shortest plan), a size slower beyond the per-case limit (in the fresh process, or the
    finalists' sweep), or anything else (within noise, not faster, not correct); "" without one.
    Each asks for another remedy (time, a size dispatch, ...): over the first 62 records of the
    c064071456aa pass 11 records fell short there, six of them with search factors of 1.2-2.9x."""
    first = next((n for n in notes if n.startswith(("final check rejected", "final check of '"))),
                 None)
    if first is None:
        return ""
    why = first.split("': ", 1)[-1]
    if why.startswith("not checked: about") or CUT_REASON in why:
        return FINAL_NO_TIME
    if _SLOWER.search(why):
        return FINAL_SIZE
    return FINAL_REJECTED


NOT_TIMED = "verified candidates, none timed beside the original"


def held_back(result) -> str:
    """Why a kernel did not reach 1.05x, in the issue's terms (roofline, no transform, verifier
    rejection, noise), from what the loop recorded."""
    final = result.final
    if final is not None and final.accepted and final.speedup >= 1.05:
        return ""
    if result.stop_reason.startswith("the original"):
        return "the original does not run"
    if final is not None and final.accepted:
        return f"accepted, but only {final.speedup:.3f}x"
    lost = final_phase_loss(result.notes)
    if lost:
        return lost
    near = any("near the roofline" in n for n in result.notes)
    if not result.history:
        return "near the roofline" if near else "no transform applied"
    ok = [h for h in result.history if h.status is Status.OK]
    if not ok:
        # candidates the record's cap stopped were never judged: the budget, not the verifier
        # (lightning_attention, H100 pass, 2026-11-26: 16 candidates, 4 through the first tier,
        # the rest cut, read "every candidate wrong")
        if any(h.status is Status.SKIPPED and CUT_REASON in h.reason for h in result.history):
            return "time budget spent before a candidate was verified"
        return "verifier rejection (every candidate wrong, or failed to compile/run)"
    reasons = " ".join(h.reason for h in ok)
    if near:
        return "near the roofline"
    if not any(h.speedup is not None and h.speedup == h.speedup for h in ok):
        # nothing was compared with the original: its timing failed (an original crashing on
        # every timed case, token_softmax_llama; 16 candidates out of device memory, fast_ce_loss)
        # or found no room; 9 of the 21 records of the c064071456aa pass's first 62 that read
        # "not faster" had no candidate timed (H200, 2026-11-28)
        return NOT_TIMED
    if any("time outside the Triton kernels" in n for n in result.notes) and \
            not any(n.startswith(SLIVER_RETIMED) for n in result.notes):
        # the diagnosis named it the bottleneck (profile.rules.outside_kernels)
        return "most of the time is outside the Triton kernels (the wrapper's other work)"
    if "within noise" in reasons and "slower" not in reasons:
        return "noise: no candidate faster beyond the noise"
    return "candidates verified but not faster"


ATTEMPT_KIND = "optimize-attempt"      # store records: when a record's latest run started
RESUMED_NOTE = "resumed: "


def _note_resumed(result, earlier) -> object:
    """``result`` with a note saying an earlier, unfinished attempt preceded it (if one did)."""
    if (not isinstance(earlier, dict) or not isinstance(earlier.get("started"), (int, float))
            or "finished" in earlier):
        return result
    when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(earlier["started"]))
    note = (f"{RESUMED_NOTE}an earlier attempt started {when} was cut before it stored a result; "
            "wall_s counts only the attempt that finished")
    return replace(result, notes=tuple(result.notes) + (note,))


def resumed(result) -> bool:
    """Whether ``result`` finished an attempt that an earlier, cut attempt preceded."""
    return any(str(n).startswith(RESUMED_NOTE) for n in getattr(result, "notes", ()))


def headline(results: list) -> dict:
    """BENCHMARK.md's headline figures over OptimizeResults (failures count as 1.0x)."""
    speedups = []
    for r in results:
        s = r.final.speedup if (r.final is not None and r.final.accepted) else 1.0
        speedups.append(s if not math.isnan(s) else 1.0)
    successes = [s for s in speedups if s >= 1.05]
    n = len(results)
    return {
        "kernels": n,
        "successes": len(successes),
        "success_rate": len(successes) / n if n else float("nan"),
        "mean_speedup_over_successes": statistics.mean(successes) if successes else float("nan"),
        "geomean_all_failures_as_1": math.exp(sum(math.log(s) for s in speedups) / n) if n else float("nan"),
        "best": max(speedups) if speedups else float("nan"),
        "median_wall_s": statistics.median(r.wall_s for r in results) if results else float("nan"),
        # the same less the time queued behind other shards for a shared GPU (suite runs in shards)
        "median_wall_unshared_s": statistics.median(r.wall_s - getattr(r, "blocked_s", 0.0)
                                                    for r in results) if results else float("nan"),
        # records whose wall time is their last attempt's alone: an earlier one was cut by a
        # call's end, and its time is not in the figures above
        "resumed_records": sum(resumed(r) for r in results),
    }


def phase_summary(results: list) -> list[tuple[str, int, float, float, float]]:
    """Per phase (in the order phases first appear): (name, records that ran it, median wall s,
    median queued s, longest wall s), over the records that measured their phases (records
    stored before ``OptimizeResult.phases`` existed are left out)."""
    walls: dict[str, list[float]] = {}
    queued: dict[str, list[float]] = {}
    for r in results:
        for p in getattr(r, "phases", ()) or ():
            walls.setdefault(p.name, []).append(p.wall_s)
            queued.setdefault(p.name, []).append(p.queued_s)
    return [(name, len(w), statistics.median(w), statistics.median(queued[name]), max(w))
            for name, w in walls.items()]
