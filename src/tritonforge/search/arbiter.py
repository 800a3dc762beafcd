"""The performance arbiter: accept a candidate only when it is faster beyond the noise.

A raw comparison of two medians accepts noise (KernelAgent's failure mode). Here the speedup is
the sum of the incumbent's per-case medians over the candidate's (TritonBench's definition), and
its lower confidence bound comes from a bootstrap over the samples of both, case by case. A
candidate is accepted when it is correct, its lower bound clears ``1 + min_gain`` and no single
case got slower by more than ``max_case_regression`` beyond the noise (the same bootstrap's lower
bound of that case's slowdown clears the limit).

On the CPU interpreter there is no performance to judge: a verified candidate is accepted "by
correctness only" and the decision says so.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

import numpy as np

from ..model import Decision, Status, VariantResult


@dataclass(frozen=True)
class ArbiterPolicy:
    min_gain: float = 0.01            # the lower bound must exceed 1 + min_gain
    max_case_regression: float = 0.05
    resamples: int = 400
    confidence: float = 0.95
    seed: int = 1234


def _medians_resampled(samples: tuple[float, ...], rng: np.random.Generator, resamples: int) -> np.ndarray:
    """``resamples`` bootstrap medians of ``samples`` (each a draw of len(samples) with replacement)."""
    values = np.asarray(samples, dtype=np.float64)
    picks = rng.integers(0, len(values), size=(resamples, len(values)))
    return np.median(values[picks], axis=1)


def speedup_bounds(incumbent: VariantResult, candidate: VariantResult, case_ids: tuple[str, ...],
                   policy: ArbiterPolicy = ArbiterPolicy()) -> tuple[float, float, float, dict[str, float]]:
    """(speedup, lower bound, geometric mean, per-case incumbent/candidate ratios)."""
    speedup, low, geo, per_case, _ = _bootstrap(incumbent, candidate, case_ids, policy)
    return speedup, low, geo, per_case


def regressed_beyond(incumbent: VariantResult, candidate: VariantResult, case_ids: tuple[str, ...],
                     limit: float, policy: ArbiterPolicy = ArbiterPolicy()) -> dict[str, float]:
    """The cases where ``candidate`` is slower than ``incumbent`` by more than ``limit`` at the
    lower confidence bound of its slowdown (the per-case test of ``judge``, at another limit):
    case -> that bound."""
    *_, slow_low = _bootstrap(incumbent, candidate, case_ids, policy)
    return {cid: v for cid, v in slow_low.items() if v > 1 + limit}


def _bootstrap(incumbent: VariantResult, candidate: VariantResult, case_ids: tuple[str, ...],
               policy: ArbiterPolicy) -> tuple[float, float, float, dict[str, float], dict[str, float]]:
    """The figures of ``speedup_bounds`` and, per case, the lower confidence bound of the
    candidate's slowdown (candidate median / incumbent median), from the same resamples."""
    pairs = []
    for cid in case_ids:
        a, b = incumbent.timing(cid), candidate.timing(cid)
        if a is None or b is None or not a.samples_ms or not b.samples_ms:
            continue
        pairs.append((cid, a.samples_ms, b.samples_ms))
    if not pairs:
        return float("nan"), float("nan"), float("nan"), {}, {}
    per_case = {cid: statistics.median(a) / statistics.median(b) for cid, a, b in pairs}
    speedup = sum(statistics.median(a) for _, a, _ in pairs) / sum(statistics.median(b) for _, _, b in pairs)
    geo = math.exp(sum(math.log(r) for r in per_case.values()) / len(per_case))
    rng = np.random.default_rng(policy.seed)
    num = np.zeros(policy.resamples)
    den = np.zeros(policy.resamples)
    k = int((1 - policy.confidence) * policy.resamples)
    slow_low = {}
    for cid, a, b in pairs:
        ma, mb = _medians_resampled(a, rng, policy.resamples), _medians_resampled(b, rng, policy.resamples)
        num += ma
        den += mb
        with np.errstate(divide="ignore"):
            slow_low[cid] = float(np.sort(mb / ma)[k])
    low = float(np.sort(num / den)[k])
    return speedup, low, geo, per_case, slow_low


def judge(incumbent: VariantResult, candidate: VariantResult, case_ids: tuple[str, ...], *,
          interpreted: bool, policy: ArbiterPolicy = ArbiterPolicy()) -> Decision:
    """Accept or reject ``candidate`` against ``incumbent`` on the timed ``case_ids``."""
    if candidate.status is not Status.OK:
        reason = candidate.failure.one_line() if candidate.failure else (
            candidate.verdict.summary() if candidate.verdict else candidate.status.value)
        return Decision(candidate.hash, False, float("nan"), float("nan"), float("nan"),
                        float("nan"), f"not correct: {reason}")
    if interpreted:
        return Decision(candidate.hash, True, float("nan"), float("nan"), float("nan"),
                        float("nan"), "interpreter: accepted by correctness only (CPU times are "
                                      "not performance)")
    speedup, low, geo, per_case, slow_low = _bootstrap(incumbent, candidate, case_ids, policy)
    if not per_case:
        return Decision(candidate.hash, False, float("nan"), float("nan"), float("nan"),
                        float("nan"), "no timings to compare")
    worst = max(1 / r for r in per_case.values())   # candidate time / incumbent time, worst case
    cases = tuple(sorted(per_case.items()))
    # slower beyond the limit AND beyond the noise: the slowdown's lower bound clears it (a 10 us
    # case whose samples spread from 5 to 66 us read 78% slower on the medians alone, and rejected a
    # candidate 1.3x faster on every large case: bmm_chunk_bwd, H100, 2026-11-23)
    regressed = {cid: v for cid, v in slow_low.items() if v > 1 + policy.max_case_regression}
    if regressed:
        slow = max(regressed, key=lambda cid: 1 / per_case[cid])
        reason = (f"case {slow} is {100 * (1 / per_case[slow] - 1):.1f}% slower (limit "
                  f"{100 * policy.max_case_regression:.0f}%, {policy.confidence:.0%} lower bound "
                  f"{100 * (regressed[slow] - 1):.1f}%)")
        return Decision(candidate.hash, False, speedup, low, geo, worst, reason, cases)
    missing = [cid for cid in case_ids if cid not in per_case]
    if missing:
        # a run that broke off (a crash, a lost context) timed only some cases: a speedup over the
        # rest is not the figure asked for, however good it looks
        reason = (f"{speedup:.3f}x on {len(per_case)} of {len(case_ids)} cases; no timings for "
                  f"{', '.join(missing[:4])}{' ...' if len(missing) > 4 else ''}: not judged on a part")
        return Decision(candidate.hash, False, speedup, low, geo, worst, reason, cases)
    if low <= 1 + policy.min_gain:
        reason = f"{speedup:.3f}x, but the {policy.confidence:.0%} lower bound {low:.3f}x is within noise"
        return Decision(candidate.hash, False, speedup, low, geo, worst, reason, cases)
    return Decision(candidate.hash, True, speedup, low, geo, worst,
                    f"{speedup:.3f}x faster (lower bound {low:.3f}x, geomean {geo:.3f}x)", cases)
