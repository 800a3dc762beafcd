"""Branch rounds: propose from a near miss instead of the incumbent (search side).

The search climbs: each round proposes from the incumbent, and only an accepted candidate moves
it. A change that is not faster alone can be the base of one that is -- several rows a program
wants another warp count, a persistent grid another tile -- and the climb never proposes from
it. Where the search would stop (nothing new, or out of patience) with time left, the loop
(``Optimizer._rounds``) runs a branch round: every proposer is asked with a near miss as the
context's incumbent (``ProposalContext.branch``), its candidates verified against the original
and timed beside the real incumbent as any others. What the branch finds faster is accepted as
usual; the chain then holds the combined change.

Why: on four H100s (120 s a record, engine 1018ceeea5af, 2026-11-27), 24 of 110 records ended
with more than 40 s of their budget unused, 15 of them "no new candidates" after 4 to 16
candidates: the one-knob proposals from the original were all the search ever tried. A near
miss is the timed candidate, not accepted, not in the chain, closest to the incumbent's speed
(at least ``NEAR`` of it); each is branched from once, at most ``MAX_BRANCHES`` per record.
"""

from __future__ import annotations

import ast
from dataclasses import replace

from ..model import Candidate
from .state import SearchState

NEAR = 0.9            # a near miss is at least this fraction of the incumbent's measured speed
MAX_BRANCHES = 2      # branch rounds per record


def near_miss(state: SearchState) -> Candidate | None:
    """The timed candidate (``state.ranked``) closest to the incumbent's speed, at least
    ``NEAR`` of it, that is not the incumbent, in the chain, or branched from already; None
    when there is none or the record has had its ``MAX_BRANCHES``."""
    if len(state.branched) >= MAX_BRANCHES:
        return None
    taken = {state.incumbent.hash, state.original.hash, *state.branched,
             *(c.hash for c in state.chain)}
    best: tuple[float, int, Candidate] | None = None
    for est, order, cand in state.ranked:
        if cand.hash in taken or est != est or est < NEAR * state.factor:
            continue
        if best is None or (est, order) > best[:2]:
            best = (est, order, cand)
    return best[2] if best else None


# Triton's launch defaults on CUDA: a launch that writes one of them is the launch without it
_LAUNCH_DEFAULTS = {"num_warps": 4, "num_stages": 3}


def launch_canonical(source: str) -> str | None:
    """``source``'s syntax tree with every kernel launch's (``k[grid](...)``) ``num_warps=4`` and
    ``num_stages=3`` left out, as text; None if it does not parse. Undoing a near miss's warp
    count writes the default the original left implicit: the same program in other text."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Subscript):
            node.keywords = [k for k in node.keywords
                             if not (k.arg in _LAUNCH_DEFAULTS and isinstance(k.value, ast.Constant)
                                     and k.value.value == _LAUNCH_DEFAULTS[k.arg])]
    return ast.dump(tree)


def branched_from(base: Candidate, cands: list[Candidate], judged: list[Candidate]
                  ) -> list[Candidate]:
    """``cands`` proposed from the near miss ``base``, each described as a change on it, less
    those that are one of ``judged`` (the incumbent, the original, the chain) in other text:
    undoing the base's change gives back a file already judged."""
    what = base.description or base.hash[:12]
    seen = {c.hash for c in judged} | {k for k in map(launch_canonical, (c.source for c in judged))
                                       if k is not None}
    out = []
    for c in cands:
        if c.hash in seen or launch_canonical(c.source) in seen:
            continue
        out.append(replace(c, description=f"{c.description} (on {what})"))
    return out
