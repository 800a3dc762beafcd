"""Every performance case for the finalists, before the final check (search side).

The search times its candidates on a few representative cases (``cases.representative_cases``);
the final check, in a fresh process, times every performance case and rejects a candidate that
is slower on any of them beyond the per-case limit. One final check takes 20-50 s of a 120 s
record, so such a rejection leaves no time for the next finalist: on four H100s (engine
4ecfc35b906c, 120 s a record, 2026-11-27) fp4_to_bf16's best was rejected for perf-02 58%
slower and kldiv_ops' for perf-09 14% slower, both cases the search never timed, and neither
record had the time left to check its runner-up in a fresh process.

The sweep times the original and up to ``MAX_FINALISTS`` finalists (the accepted chain's last
three, best first; the best split config; the runners-up) together on every performance case, in
the search's timing worker, on a plan of ``SWEEP_ROUNDS`` rounds. The final check then skips a
finalist the sweep found slower on some case beyond ``SWEEP_LIMIT_FACTOR`` times the per-case
limit at the lower bound, and the sweep's decision stands in for the check's (a size dispatch
takes it as its veto: ``FinalCheck._final``). The sweep only rejects: a finalist it passes is
checked in a fresh process as before. It runs only where the record's time leaves it room beside
the final check's shortest plan.

A finalist the sweep found slower on some case beyond ``RISK_FACTOR`` times the per-case limit
(but within the veto) is at risk: the fresh check may find that case past the limit, and the
time its check took is then the time its size dispatch needed. ``Sweep.risk`` gives its decision
so that the final check tries the size dispatch first (``FinalCheck._dispatch_first``): on two
H200s (engine c064071456aa, 120 s a record, 2026-11-28) matmul_leakyrelu's best, 1.80x on the
sweep's 31 cases and 6% slower on the smallest, took 36 s to be rejected in a fresh process for
perf-01 5.6% slower, and its size dispatch was then "not tried: its probes and final check would
not end by the record's time cap".
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Callable, Mapping

from ..model import Candidate, Decision, Status, Task
from ..runtime.timing import TimingPlan
from ..runtime.timing_plan import rounds_cut
from .arbiter import ArbiterPolicy, judge, regressed_beyond

MAX_FINALISTS = 4
SWEEP_ROUNDS = 4          # the baseline times every case in 3 rounds; the search's plan has 10
# rounds the sweep's timing cannot cut: past them, each case's rounds stop at its share of the
# sweep's room (``end_within_s``). With all four the minimum, a sweep whose estimate fitted its
# room could not be cut short: on four H200s (engine c064071456aa, 2026-11-28)
# embedding_triton_kernel's sweep took 35 s and fused_layernorm_triton's 33 s, each leaving
# its final check 5-10 s of the 12-16 s its shortest plan needed (not checked, no success)
SWEEP_MIN_ROUNDS = 2
SWEEP_LIMIT_FACTOR = 2.0  # skipped only beyond twice the per-case limit: a sweep is no check
RISK_FACTOR = 0.5         # slower beyond half the limit at the lower bound: the check may veto it


@dataclass(frozen=True)
class Sweep:
    """What the sweep found: per finalist's hash, its decision against the original over every
    performance case, and the cases (with their slowdown's lower bound) where it is slower
    beyond ``SWEEP_LIMIT_FACTOR`` times the per-case limit."""
    decisions: Mapping[str, Decision] = field(default_factory=dict)
    slower: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    seconds: float = 0.0
    at_risk: Mapping[str, Mapping[str, float]] = field(default_factory=dict)

    def risk(self, cand: Candidate) -> tuple[Decision, str, float] | None:
        """Where the sweep found ``cand`` slower on some case beyond ``RISK_FACTOR`` times the
        per-case limit but not vetoed: (its decision over every case, the slowest case, that
        case's slowdown at the lower bound); None otherwise."""
        slow = self.at_risk.get(cand.hash)
        if not slow or self.slower.get(cand.hash) or cand.hash not in self.decisions:
            return None
        case = max(slow, key=slow.get)
        return self.decisions[cand.hash], case, slow[case]

    def veto(self, cand: Candidate) -> Decision | None:
        """The decision that stands in for ``cand``'s final check (None: check it)."""
        slow = self.slower.get(cand.hash)
        if not slow:
            return None
        d = self.decisions[cand.hash]
        case = max(slow, key=slow.get)
        return dataclasses.replace(
            d, accepted=False,
            reason=f"not checked in a fresh process: timed on every performance case in the "
                   f"search's worker, case {case} is {100 * (slow[case] - 1):.0f}% slower at the "
                   f"lower bound ({d.reason})")

    def note(self) -> str:
        vetoed = sum(1 for v in self.slower.values() if v)
        return (f"finalists timed on every performance case in the search's worker: "
                f"{len(self.decisions)} in {self.seconds:.0f} s, {vetoed} slower on some case "
                f"beyond {SWEEP_LIMIT_FACTOR:g}x the per-case limit (not checked in a fresh "
                f"process)")


def finalists(chain: list[Candidate], split: list, runners: list,
              original: Candidate) -> list[Candidate]:
    """The candidates the final check may reach, in the order it reaches them: the chain's last
    three (best first), the best split config, the runners-up; at most ``MAX_FINALISTS``."""
    order = list(reversed(chain[-3:]))
    order += [c for _, _, c in sorted(split, key=lambda r: (r[0], r[1]), reverse=True)[:1]]
    order += [c for _, _, c in sorted(runners, key=lambda r: (r[0], r[1]), reverse=True)]
    seen = {original.hash}
    out = []
    for c in order:
        if c.hash not in seen:
            seen.add(c.hash)
            out.append(c)
    return out[:MAX_FINALISTS]


def sweep_plan(search_plan: TimingPlan) -> TimingPlan:
    """The search's plan cut to ``SWEEP_ROUNDS`` rounds, ``SWEEP_MIN_ROUNDS`` of them the
    minimum, with no variant dropped for being slow (the sweep's question is how much slower).
    Fewer rounds widen the bounds, and a wider bound vetoes less: the sweep only rejects."""
    plan = rounds_cut(search_plan, SWEEP_ROUNDS)
    return dataclasses.replace(plan, min_rounds=min(plan.min_rounds, SWEEP_MIN_ROUNDS),
                               abandon_slower=None, screen_slower=None, screen_not_faster=None)


def sweep(time_fn: Callable[..., object], task: Task, original: Candidate,
          cands: list[Candidate], plan: TimingPlan, policy: ArbiterPolicy,
          end_within_s: float | None) -> Sweep:
    """Time ``original`` and ``cands`` on every performance case of ``task`` with ``time_fn``
    (``RoundStages._time``) and judge each against the original. A candidate the timing did not
    reach, or that failed there, has no decision: its final check decides."""
    perf = tuple(c.id for c in task.performance_cases)
    if not cands or not perf:
        return Sweep()
    started = time.monotonic()
    evaluation = time_fn(task, original, cands, perf, end_within_s=end_within_s, plan=plan)
    results = {r.variant: r for r in evaluation.results}
    base = results.get("incumbent")
    decisions, slower, at_risk = {}, {}, {}
    if base is not None and base.timings:
        limit = SWEEP_LIMIT_FACTOR * policy.max_case_regression
        for i, cand in enumerate(cands):
            r = results.get(f"c{i}")
            if r is None or r.status is not Status.OK or not r.timings:
                continue
            decisions[cand.hash] = judge(base, r, perf, interpreted=False, policy=policy)
            # one bootstrap: the veto's cases are those of the risk past the wider limit
            at_risk[cand.hash] = regressed_beyond(base, r, perf,
                                                  RISK_FACTOR * policy.max_case_regression, policy)
            slower[cand.hash] = {c: v for c, v in at_risk[cand.hash].items() if v > 1 + limit}
    return Sweep(decisions, slower, time.monotonic() - started, at_risk)
